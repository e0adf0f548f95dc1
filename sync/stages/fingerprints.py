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
        select = self.rules.rules_for(url).select
        fp = self._by_select.get(select)
        if fp is None:
            fp = self._by_select[select] = page_fingerprint(self.embedder_id, self.extractor_id,
                                                            self.splitter_settings, select)
        return fp
