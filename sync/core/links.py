"""Links and the crawl frontier: what a page links to, and which of those a crawl takes.

`read_links` parses a page's raw HTML (lxml) once for what a crawl needs: its links
(absolute, canonical, fragments dropped, deduplicated, `rel=nofollow` left out), its
`rel=canonical` and its `<meta name=robots>` (noindex, nofollow). `CrawlRules` says which
URLs a crawl follows at all: the scope's sites, under a start page's directory, an optional
filter hook (include/exclude rules), and the caps that keep a link trap (a calendar,
`?page=N`, `a/b/a/b/...`) from growing the crawl without end. `Frontier` is the breadth-first
set a crawl grows: at most `max_pages` URLs ever admitted, so its memory is bounded whatever
the site links to; an admission past that bound marks the crawl incomplete (`bound_hit`).

Pure: no I/O, the caller fetches and parses the pages it gives here.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Collection, Iterable, Iterator, Sequence
from urllib.parse import urljoin, urlsplit

from .ids import canonical_url

__all__ = [
    "PageLinks",
    "CrawlLimits",
    "CrawlRules",
    "Frontier",
    "read_links",
    "crawl_prefix",
    "crawl_start",
    "links_to_json",
    "links_from_json",
]

# Links kept of one page at most: a page listing more (a 100k-link index) is read to this
# bound and marked `truncated`, which makes its crawl incomplete (nothing purged by it).
MAX_LINKS_PER_PAGE = 5000


@dataclass(frozen=True)
class PageLinks:
    """What one page says to a crawl. `links`: in document order, absolute and canonical,
    each once, none marked `rel=nofollow` (empty when the page's meta robots says nofollow)."""

    links: tuple[str, ...] = ()
    canonical: str | None = None
    noindex: bool = False
    nofollow: bool = False
    truncated: bool = False
    # Of this read only (not kept between passes): the `<base href>` it named, and the
    # characters of visible text it holds (`sync.core.link_authority` judges stubs by them).
    base: str | None = None
    text_chars: int = 0


def _absolute(base: str, href: str | None) -> str | None:
    """The canonical http(s) URL `href` names from `base`, fragment dropped; None for
    anything else (mailto:, javascript:, a bare fragment, a malformed URL)."""
    if not href:
        return None
    href = href.strip()
    if not href or href.startswith("#"):
        return None
    try:
        url = canonical_url(urljoin(base, href))
    except ValueError:
        return None
    if not url.startswith(("http://", "https://")) or not urlsplit(url).hostname:
        return None
    return url


def _tokens(value: str | None) -> set[str]:
    return {t for t in re.split(r"[\s,]+", (value or "").lower()) if t}


def read_links(body: bytes, url: str, *, charset: str | None = None, max_links: int = MAX_LINKS_PER_PAGE) -> PageLinks:
    """Parse an HTML page's links, canonical and meta robots (see `PageLinks`). `url` is the
    address it was fetched from (after redirects); a `<base href>` overrides it for relative
    links. A body lxml cannot parse has no links."""
    import lxml.html  # a dependency already (the extractor's)

    if not body or not body.strip():
        return PageLinks()
    source: bytes | str = body
    if charset:  # the header's charset, decoded here (libxml2 knows fewer names than Python)
        try:
            source = body.decode(charset, errors="replace")
        except LookupError:
            pass  # an unknown charset: lxml reads the bytes as it would without one
    try:
        doc = lxml.html.document_fromstring(source)
    except Exception:  # noqa: BLE001 (lxml raises several kinds: a page it cannot read has no links)
        return PageLinks()
    base = url
    named_base = None
    for el in doc.iter("base"):
        if el.get("href"):
            base = named_base = urljoin(url, el.get("href").strip())
        break
    text_chars = _text_chars(doc)
    noindex = nofollow = False
    for el in doc.iter("meta"):
        if (el.get("name") or "").strip().lower() in ("robots", "pagesync"):
            words = _tokens(el.get("content"))
            noindex |= bool(words & {"noindex", "none"})
            nofollow |= bool(words & {"nofollow", "none"})
    canonical = None
    for el in doc.iter("link"):
        if "canonical" in _tokens(el.get("rel")):
            canonical = _absolute(base, el.get("href"))
            break
    if nofollow:
        return PageLinks((), canonical, noindex, True, False, named_base, text_chars)
    seen: dict[str, None] = {}
    truncated = False
    for el in doc.iter("a", "area"):
        if "nofollow" in _tokens(el.get("rel")):
            continue
        link = _absolute(base, el.get("href"))
        if link is None or link in seen:
            continue
        if len(seen) >= max_links:
            truncated = True
            break
        seen[link] = None
    return PageLinks(tuple(seen), canonical, noindex, False, truncated, named_base, text_chars)


def _text_chars(doc) -> int:
    """The characters of visible text in a parsed page (scripts and styles left out)."""
    n = 0
    for el in doc.iter():
        if el.tag in ("script", "style", "noscript", "head", "title"):
            n += len((el.tail or "").strip())
            continue
        if isinstance(el.tag, str):
            n += len((el.text or "").strip())
        n += len((el.tail or "").strip())
    return n


def links_to_json(links: PageLinks) -> str:
    """A page's links as kept between passes (a 304 page is not read again: these stand for it)."""
    d: dict = {"links": list(links.links)}
    if links.canonical:
        d["canonical"] = links.canonical
    if links.noindex:
        d["noindex"] = True
    if links.truncated:
        d["truncated"] = True
    return json.dumps(d, separators=(",", ":"))


def links_from_json(text: str) -> PageLinks | None:
    """`links_to_json`'s text back, or None when it is not one (as if nothing were kept)."""
    try:
        d = json.loads(text)
        links = tuple(str(u) for u in d["links"])
    except (ValueError, KeyError, TypeError):
        return None
    return PageLinks(links, d.get("canonical"), bool(d.get("noindex")), False, bool(d.get("truncated")))


def crawl_start(start: str) -> str:
    """A --crawl start page as the crawl fetches it: canonical, and a site's root given
    without its slash (`https://h`, `https://h?x`) as `https://h/`, the URL an HTTP
    request for it names and the one its pages link to (else the start page itself would
    lie outside its own directory, `https://h/`, and the crawl would reach nothing)."""
    url = canonical_url(start)
    parts = urlsplit(url)
    if parts.path:
        return url
    return parts._replace(path="/").geturl()


def crawl_prefix(start: str) -> str:
    """The part of the site a crawl from `start` stays in: its scheme, host and directory
    (`https://h/docs/en/index.html` -> `https://h/docs/en/`)."""
    parts = urlsplit(canonical_url(start))
    directory = parts.path[: parts.path.rfind("/") + 1] or "/"
    return f"{parts.scheme}://{parts.netloc}{directory}"


@dataclass(frozen=True)
class CrawlLimits:
    """The crawl's bounds. `max_pages` bounds the pages one crawl reaches (its memory and
    fetches); the others refuse the links of a trap, each URL alone or per pattern:
    `max_url_length` characters, `max_depth` path segments, a path segment repeated more than
    `max_segment_repeats` times (`a/b/a/b/a/b`), more than `max_query_variants` distinct query
    strings on one path (`?page=N`, sort orders), more than `max_pattern_variants` URLs whose
    path differs only in its numbers (`/calendar/2031/07/`)."""

    max_pages: int = 10000
    max_url_length: int = 1024
    max_depth: int = 16
    max_segment_repeats: int = 2
    max_query_variants: int = 32
    max_pattern_variants: int = 256


_DIGITS = re.compile(r"\d+")

# Paths ending so are files no page is made of (the fetcher reads only text types): a link
# to one is not followed, which spares a request per image, stylesheet or archive.
_NOT_PAGES = re.compile(
    r"\.(png|jpe?g|gif|svg|webp|avif|ico|bmp|tiff?|css|js|mjs|map|woff2?|ttf|otf|eot|pdf|zip|gz|tgz|bz2|xz|"
    r"tar|7z|rar|whl|egg|exe|msi|dmg|deb|rpm|apk|iso|mp3|mp4|m4a|ogg|webm|avi|mov|wav|flac|inv|epub)$",
    re.IGNORECASE,
)


def _shape(path: str) -> str:
    """A path with its runs of digits folded: the pattern a calendar or pager repeats."""
    return _DIGITS.sub("0", path)


@dataclass
class CrawlRules:
    """Which links a crawl follows: in `in_scope` (the pass's scope check: None means in
    scope), under one of `prefixes` (`crawl_prefix` of each start page), passing `wanted`
    (a hook, e.g. include/exclude rules; None takes all) and within `limits`."""

    prefixes: Sequence[str]
    in_scope: Callable[[str], str | None] = lambda url: None
    wanted: Callable[[str], bool] | None = None
    limits: CrawlLimits = field(default_factory=CrawlLimits)

    def refusal(self, url: str) -> str | None:
        """Why `url` is no page of this crawl by itself (not counting the per-pattern caps),
        or None. Cheapest checks first: a trap's links are many."""
        lim = self.limits
        if len(url) > lim.max_url_length:
            return "url too long"
        if not any(url.startswith(p) for p in self.prefixes):
            return "outside the start pages' sites and directories"
        path = urlsplit(url).path
        if _NOT_PAGES.search(path):
            return "not a page (a file type the fetcher does not read)"
        segments = [s for s in path.split("/") if s]
        if len(segments) > lim.max_depth:
            return "path too deep"
        if segments and max(segments.count(s) for s in set(segments)) > lim.max_segment_repeats:
            return "repeated path segment"
        if self.wanted is not None and not self.wanted(url):
            return "excluded"
        if self.in_scope(url) is not None:
            return "out of scope"
        return None


class Frontier:
    """The URLs one crawl admits, breadth first from its start pages, each once.

    Memory: at most `limits.max_pages` URLs are ever admitted (the queue holds only admitted
    ones), and the per-pattern counters count admitted URLs only, so the whole is O(max_pages)
    however many links the site has. `tracked` (the pages the crawl holds already) keep their
    room: a URL not among them is admitted only while fewer than `max_pages - len(tracked)`
    such URLs are, so new links found early never crowd out a tracked page found later.
    `offer` past the bound drops the URL and sets `bound_hit`: the crawl did not see the whole
    site. A URL a rule refuses is no page of the crawl (counted in `refused` by reason); one a
    link-trap cap refused marks its series as cut (`cut_series`).
    """

    def __init__(self, rules: CrawlRules, starts: Iterable[str] = (), tracked: Collection[str] = ()):
        self.rules = rules
        self.admitted: dict[str, None] = {}  # insertion-ordered: the order of discovery
        self.queue: deque[str] = deque()
        self.bound_hit = False
        self.refused: dict[str, int] = {}
        self.last_refusal: str | None = None  # why the last `offer` refused its URL
        self._queries: dict[str, int] = {}  # path (scheme+host+path) -> distinct query strings admitted
        self._shapes: dict[str, int] = {}  # scheme+host+folded path -> URLs admitted
        self._cut: set[str] = set()  # the paths and folded paths a cap refused a URL of
        self._tracked = tracked
        self._new_room = rules.limits.max_pages - len(tracked)  # URLs not tracked that may still be admitted
        for url in starts:
            self.offer(url)

    def __len__(self) -> int:
        return len(self.admitted)

    def __contains__(self, url: str) -> bool:
        return url in self.admitted

    def _refuse(self, reason: str) -> bool:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        self.last_refusal = reason
        return False

    def offer(self, url: str) -> bool:
        """Admit `url` (canonical) to the crawl; True when it is new and admitted."""
        if url in self.admitted:
            return False
        reason = self.rules.refusal(url)
        if reason is not None:
            return self._refuse(reason)
        lim = self.rules.limits
        base, _, query = url.partition("?")
        shape = _shape(base)
        if query and self._queries.get(base, 0) >= lim.max_query_variants:
            self._cut.add(base)
            return self._refuse("too many query strings on one path")
        if self._shapes.get(shape, 0) >= lim.max_pattern_variants:
            self._cut.add(shape)
            return self._refuse("too many pages of one numbered pattern")
        known = url in self._tracked
        if len(self.admitted) >= lim.max_pages or (not known and self._new_room <= 0):
            self.bound_hit = True
            return self._refuse("over --max-pages")
        if not known:
            self._new_room -= 1
        self.admitted[url] = None
        self.queue.append(url)
        if query:
            self._queries[base] = self._queries.get(base, 0) + 1
        self._shapes[shape] = self._shapes.get(shape, 0) + 1
        return True

    def cut_series(self, url: str) -> bool:
        """Whether a cap refused a URL of `url`'s series (its path with another query string,
        or a path of its numbered pattern): what `url` listed may have moved on past the cut
        (a pager's `?page=33`), where this crawl does not look."""
        base = url.partition("?")[0]
        return base in self._cut or _shape(base) in self._cut

    def take_level(self) -> list[str]:
        """Every URL queued now (one breadth-first level), in discovery order."""
        level = list(self.queue)
        self.queue.clear()
        return level

    def __iter__(self) -> Iterator[str]:
        return iter(self.admitted)
