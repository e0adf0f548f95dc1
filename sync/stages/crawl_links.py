"""The crawl's memory of what each page links to: read this pass, or kept from an earlier one.

Links read this pass go to the state (`LinkKeeper.put_links`) and are read back from it, so a
page that answers 304, or is not due, still stands for what it linked to when last read. A
dry run, or a state that keeps no links, holds them for the pass only.
"""

from __future__ import annotations

from typing import Sequence

from ..core.links import PageLinks, links_from_json, links_to_json
from ..edges.state_protocol import LinkKeeper

__all__ = ["LinkMemory"]


class LinkMemory:
    """Each page's links: `get` (this pass's reads first, then the state's), `keep`, `hold`, `forget`."""

    def __init__(self, links: LinkKeeper | None, *, dry_run: bool):
        self.links = links  # the state's kept links, read back (a dry run too)
        self.keeper = None if dry_run else links  # ... and written (never in a dry run)
        # Links read this pass when the state cannot keep them (a dry run, a state without
        # `put_links`), or held over an answer that is no evidence of them: url -> PageLinks.
        self.local: dict[str, PageLinks] = {}

    def get(self, urls: Sequence[str]) -> dict[str, PageLinks]:
        """The links kept for `urls` (this pass's reads included)."""
        out = {u: self.local[u] for u in urls if u in self.local}
        rest = [u for u in urls if u not in out]
        if rest and self.links is not None:
            for url, text in self.links.get_links(rest).items():
                links = links_from_json(text)
                if links is not None:
                    out[url] = links
        return out

    def keep(self, url: str, links: PageLinks) -> None:
        """The links `url` was read with this pass: the state keeps them (else the pass does)."""
        if self.keeper is not None:
            self.keeper.put_links([(url, links_to_json(links))])
        else:
            self.local[url] = links

    def hold(self, url: str, links: PageLinks) -> None:
        """Links that stand for `url` this pass only (the state keeps what it had)."""
        self.local[url] = links

    def forget(self, url: str) -> None:
        """`url` links nothing any more (gone, or moved out of the crawl)."""
        self.local.pop(url, None)
        if self.keeper is not None:
            self.keeper.drop_links([url])
