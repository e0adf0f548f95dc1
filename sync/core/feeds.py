"""Change feeds: the search indexes docs generators publish beside the pages, read as
"page URL -> digest of its text". Pure: bytes in, digests out, no I/O.

MkDocs' `search/search_index.json` carries each page's text (per section): an exact
signal. Sphinx's `searchindex.js` carries per-document titles and terms: an approximate
one (an edit that adds no new word and drops none is not seen). Docusaurus' local search
plugins write `search-doc.json` (docusaurus-lunr-search: titles and content) or
`search-index.json` (@easyops-cn/docusaurus-search-local: titles, headings and URLs).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Iterable, Mapping
from urllib.parse import urljoin

from .ids import canonical_url

__all__ = [
    "FEED_KINDS",
    "FEED_PATHS",
    "Feed",
    "FeedError",
    "feed_candidates",
    "parse_feed",
    "generator_feed_kind",
    "match_urls",
    "feed_page_urls",
]

MKDOCS, SPHINX, DOCUSAURUS = "mkdocs", "sphinx", "docusaurus"
FEED_KINDS = (MKDOCS, SPHINX, DOCUSAURUS)
# Where each generator puts its search index, relative to the site's root (the sitemap's directory).
FEED_PATHS: tuple[tuple[str, str], ...] = (
    (MKDOCS, "search/search_index.json"),
    (SPHINX, "searchindex.js"),
    (DOCUSAURUS, "search-doc.json"),
    (DOCUSAURUS, "search-index.json"),
)
_GENERATOR = re.compile(r"""<meta\s+name=["']generator["']\s+content=["']([a-z-]+)""", re.I)


class FeedError(ValueError):
    """The body is not a search index of the kind asked for."""


@dataclass(frozen=True)
class Feed:
    """A parsed change feed: its kind, whether it is exact (page text) or approximate (terms),
    and one digest per page, keyed by the feed's own location relative to the site root."""

    kind: str
    exact: bool
    digests: dict[str, str]


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


def _mkdocs(data: object) -> dict[str, str]:
    if not isinstance(data, dict) or not isinstance(data.get("docs"), list):
        raise FeedError("no 'docs' list")
    by_page: dict[str, list[str]] = {}
    for doc in data["docs"]:
        if not isinstance(doc, dict) or not isinstance(doc.get("location"), str):
            continue
        page = doc["location"].split("#", 1)[0]
        by_page.setdefault(page, []).extend((str(doc.get("title", "")), str(doc.get("text", ""))))
    return {page: _digest(parts) for page, parts in by_page.items()}


def _sphinx(body: str) -> dict[str, str]:
    start, end = body.find("{"), body.rfind("}")
    if not body.lstrip().startswith("Search.setIndex(") or start < 0 or end < start:
        raise FeedError("no Search.setIndex(...) call")
    try:
        data = json.loads(body[start : end + 1])
    except ValueError as exc:
        raise FeedError(f"not JSON inside Search.setIndex: {exc}") from None
    docnames = data.get("docnames") if isinstance(data, dict) else None
    if not isinstance(docnames, list):
        raise FeedError("no 'docnames' list")
    titles = data.get("titles") or []
    per_doc: list[list[str]] = [[str(titles[i]) if i < len(titles) else ""] for i in range(len(docnames))]
    for table in ("terms", "titleterms"):
        terms = data.get(table) or {}
        if not isinstance(terms, dict):
            continue
        for term in sorted(terms):
            refs = terms[term]
            for i in refs if isinstance(refs, list) else [refs]:
                if isinstance(i, int) and 0 <= i < len(per_doc):
                    per_doc[i].append(f"{table[0]}:{term}")
    return {str(name): _digest(parts) for name, parts in zip(docnames, per_doc)}


def _docusaurus(data: object) -> dict[str, str]:
    docs: list = []
    if isinstance(data, dict) and isinstance(data.get("searchDocs"), list):  # docusaurus-lunr-search
        docs = data["searchDocs"]
    elif isinstance(data, list):  # @easyops-cn/docusaurus-search-local: [{documents: [...], index}]
        for part in data:
            if isinstance(part, dict) and isinstance(part.get("documents"), list):
                docs.extend(part["documents"])
    else:
        raise FeedError("neither 'searchDocs' nor a list of document sets")
    by_page: dict[str, list[str]] = {}
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        url = doc.get("url", doc.get("u"))
        if not isinstance(url, str):
            continue
        page = url.split("#", 1)[0].lstrip("/")
        by_page.setdefault(page, []).extend(str(doc.get(k, "")) for k in ("title", "t", "content", "b", "sectionTitle"))
    return {page: _digest(parts) for page, parts in by_page.items()}


def parse_feed(kind: str, body: bytes) -> Feed:
    """Parse a search index of `kind` (`FEED_KINDS`) into per-page digests; FeedError when
    the body is not one (an HTML 404 page served with 200, a truncated file)."""
    text = body.decode("utf-8", "replace")
    if kind == SPHINX:
        return Feed(kind, False, _sphinx(text))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FeedError(f"not JSON: {exc}") from None
    if kind == MKDOCS:
        return Feed(kind, True, _mkdocs(data))
    if kind == DOCUSAURUS:
        exact = isinstance(data, dict)  # lunr-search carries the content; search-local titles only
        return Feed(kind, exact, _docusaurus(data))
    raise FeedError(f"unknown feed kind {kind!r}")


def feed_candidates(sitemap_url: str) -> list[tuple[str, str]]:
    """(kind, URL) of the search indexes to look for next to a sitemap, in order."""
    return [(kind, urljoin(sitemap_url, path)) for kind, path in FEED_PATHS]


def generator_feed_kind(html: str) -> str | None:
    """The feed kind a page's `<meta name="generator">` names (mkdocs, sphinx, docusaurus), or None."""
    m = _GENERATOR.search(html[:65536])
    name = m.group(1).lower() if m else ""
    return next((k for k in FEED_KINDS if name.startswith(k)), None)


def match_urls(feed: Feed, root: str, known: Iterable[str]) -> dict[str, str]:
    """The feed's digests keyed by the tracked URL each location names: `root` joined with
    the location, tried as given, with `.html` and with `/` (Sphinx names documents, MkDocs
    pages, with or without directory URLs). Locations naming no tracked URL are left out."""
    urls = set(known)
    out: dict[str, str] = {}
    for loc, digest in feed.digests.items():
        base = urljoin(root, loc)
        for cand in (
            base,
            base + ".html",
            base.rstrip("/") + "/",
            base.removesuffix("index.html"),
            base + "index.html" if base.endswith("/") else base + "/index.html",
        ):
            if cand in urls:
                out[cand] = digest
                break
    return out


def feed_page_urls(feed: Feed, root: str) -> list[str]:
    """The pages an exact feed (MkDocs, docusaurus-lunr-search) names, as canonical URLs under
    `root`, in the feed's order: their locations are URL paths. Sphinx names documents, not
    URLs (`.html` or `/` depends on the builder), and search-local's titles only: none."""
    if not feed.exact or feed.kind == SPHINX:
        return []
    out: dict[str, None] = {}
    for loc in feed.digests:
        url = urljoin(root, loc)
        if url.startswith(("http://", "https://")):
            out[canonical_url(url)] = None
    return list(out)


def changed_pages(before: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """Pure: the URLs whose digest now differs from the one recorded (never-recorded ones excluded)."""
    return sorted(u for u, d in now.items() if u in before and before[u] != d)
