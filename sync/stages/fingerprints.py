"""The pipeline fingerprint of each page's points: model, extractor (with its site's selector), splitter."""

from __future__ import annotations

from ..core.site_rules import SiteRuleSet, page_fingerprint

__all__ = ["Fingerprints"]


class Fingerprints:
    """`for_url(url)`: the fingerprint a page's points are recorded under. A page extracted
    under another selector is re-read and rewritten (`decide`); its unchanged texts keep
    their vectors. One string per --select in use, made once."""

    def __init__(self, rules: SiteRuleSet, *, embedder_id: str, extractor_id: str, splitter_settings: str):
        self.rules, self.embedder_id = rules, embedder_id
        self.extractor_id, self.splitter_settings = extractor_id, splitter_settings
        self._by_select: dict[str | None, str] = {}

    def for_url(self, url: str) -> str:
        """The fingerprint this pipeline records for `url` (under its site's selector)."""
        select = self.select_for(url)
        fp = self._by_select.get(select)
        if fp is None:
            fp = self._by_select[select] = self.of(self.embedder_id, select)
        return fp

    def select_for(self, url: str) -> str | None:
        """The --select its site's rules name for `url` (None: the extractor's own choice)."""
        return self.rules.rules_for(url).select

    def of(self, embedder_id: str, select: str | None) -> str:
        """The fingerprint of points another embedder made (or under another selector), with
        this extractor and splitter: how a reindex tells whose text a page's points hold."""
        return page_fingerprint(embedder_id, self.extractor_id, self.splitter_settings, select)
