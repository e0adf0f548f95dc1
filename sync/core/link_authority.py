"""Link authority: whether a crawled answer may replace a page's kept links.

A crawl purges a page only when the pages that linked to it stop doing so. A hub that
answers a maintenance stub, an empty or script-only page, a wrong content type, a body cut
short, a first 404, a redirect out of the crawl (a login page) or an off-site `<base href>`
says nothing about its links: its last good links stand (`held_reason`). An answer that
loses no kept link is always taken (there is nothing to lose).

Pure: the caller fetched and parsed the page (`sync.core.links.read_links`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence
from urllib.parse import urlsplit

from .links import PageLinks

__all__ = ["CrawlAnswer", "held_reason", "lost_links", "STUB_TEXT_CHARS"]

# A page that lost links and holds less visible text than this is a stub (a maintenance
# notice, an error page, a shell its scripts would fill).
STUB_TEXT_CHARS = 200
# Of a hub that lost links, keeping at most this share of them, with stub-sized text.
_COLLAPSE_SHARE = 0.25
_CLOSING = re.compile(rb"</(html|body)\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class CrawlAnswer:
    """What one visit answered, as the crawl sees it. `kind`: "html" (read, `links` parsed),
    "other" (a 200 of another type), "gone" (404/410), "skipped" (robots, too big, a type the
    fetcher does not read). `final_url`: after non-permanent redirects."""

    url: str
    kind: str
    status: int | None = None
    content_type: str = ""
    body: bytes = b""
    final_url: str | None = None
    links: PageLinks | None = None
    was_gone: bool = False  # the state had the page gone already (a 404 seen before)


def lost_links(old: PageLinks | None, new: PageLinks | None) -> list[str]:
    """The kept links `new` no longer has, in `old`'s order."""
    if old is None:
        return []
    have = set(new.links) if new is not None else set()
    return [u for u in old.links if u not in have]


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def held_reason(answer: CrawlAnswer, old: PageLinks | None, prefixes: Sequence[str]) -> str | None:
    """Why `answer` may not replace the kept links `old` (they stand for reachability), or
    None when it may: it loses nothing, or it is a healthy read of the page."""
    if old is None or not old.links:
        return None
    a = answer
    if a.kind == "gone":
        return None if a.was_gone else f"answered {a.status} for the first time"
    if a.kind == "skipped":
        return "not read (skipped)"
    if a.kind == "other":
        return f"answered {a.content_type or 'no content type'}, not HTML"
    final = a.final_url or a.url
    if final != a.url and not any(final.startswith(p) for p in prefixes):
        return f"redirected out of the crawl, to {final}"
    new = a.links or PageLinks()
    if not lost_links(old, new):
        return None
    if new.nofollow:
        return "meta robots nofollow"
    if new.base is not None and _host(new.base) != _host(final):
        return f"its <base href> points off-site ({new.base})"
    if not new.links:
        return "links nothing (a stub, an empty page or a script shell)"
    if new.text_chars < STUB_TEXT_CHARS and len(new.links) <= _COLLAPSE_SHARE * len(old.links):
        return f"a stub ({new.text_chars} characters of text, {len(new.links)} of {len(old.links)} links)"
    if not _CLOSING.search(a.body[-4096:]):
        return "its body is cut short (no closing </body> or </html>)"
    return None
