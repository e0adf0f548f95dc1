"""Sitemaps: parse (urlset, sitemap index, gzip) and diff against what we tracked.

Parsing and diffing are pure. Fetching goes through `Fetcher.fetch_bytes`, in
`collect_sitemaps`, which walks index files breadth-first with a depth and file cap.

A parse can be remembered between passes (`parse_key`, `pack_parsed`, `unpack_parsed`):
what `parse_sitemap` returns depends only on the body's bytes and on this parser, so a
kept result whose key matches today's body is the parse itself (a sitemap answering 304
costs a digest and a lookup instead of XML parsing and 20,000 canonical URLs). A kept
result that cannot be read is no result, never an empty sitemap.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Awaitable, Callable, Iterable, Mapping
from urllib.parse import urljoin, urlsplit

from ..errors import FetchError, NotASitemapError, SitemapError
from .ids import canonical_url

__all__ = [
    "SitemapEntry",
    "ParsedSitemap",
    "SitemapDiff",
    "parse_sitemap",
    "parse_lastmod",
    "lastmod_in_time",
    "LASTMOD_SKEW",
    "diff_sitemap",
    "lastmod_trusted",
    "lastmod_state",
    "feed_hosts",
    "lastmod_advanced",
    "lastmod_to_record",
    "lastmods_to_record",
    "collect_sitemaps",
    "SitemapCollection",
    "MAX_SITEMAP_BYTES",
    "MAX_SITEMAP_URLS",
    "MAX_TOTAL_SITEMAP_URLS",
    "robots_sitemaps",
    "PARSE_VERSION",
    "parse_key",
    "pack_parsed",
    "unpack_parsed",
]

MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # the protocol's limit, uncompressed
MAX_SITEMAP_URLS = 50_000
# URLs of all the sitemaps of a pass (an index's files together) kept at most: each costs
# memory (~200 B) before any page is fetched, and 1,000 files of 50,000 would be 50M.
MAX_TOTAL_SITEMAP_URLS = 500_000
_MAX_SITEMAP_FILES = 1_000
_YEAR = re.compile(r"^\d{4}(-\d{2})?$")


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    url: str  # canonical
    lastmod: str | None  # ISO 8601 UTC; None when the sitemap gives none or an unreadable one


@dataclass
class ParsedSitemap:
    entries: list[SitemapEntry] = field(default_factory=list)
    sitemaps: list[str] = field(default_factory=list)  # children when this is an index
    # More <url> entries than the protocol allows (MAX_SITEMAP_URLS): the rest were not read.
    truncated: bool = False
    # <url> entries whose <loc> is no absolute http(s) URL: (the <loc> as written, why),
    # each <loc> once. Never tracked; the run report counts them as skipped pages.
    invalid: list[tuple[str, str]] = field(default_factory=list)


# An HTML document's start, as a server answering a sitemap URL with a web page sends it.
_HTML = re.compile(rb"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]", re.IGNORECASE)
NOT_A_SITEMAP = (
    "not a sitemap: the answer is an HTML page (a sitemap is XML with <urlset> or <sitemapindex>); "
    "give the sitemap's own URL (often /sitemap.xml; robots.txt names it)"
)


def _gunzip(data: bytes) -> bytes:
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
        out = f.read(MAX_SITEMAP_BYTES + 1)
    if len(out) > MAX_SITEMAP_BYTES:
        raise SitemapError("sitemap exceeds 50 MB uncompressed")
    return out


def parse_lastmod(value: str | None) -> datetime | None:
    """W3C datetime (the sitemap protocol's lastmod) to an aware UTC datetime, or None.

    The HTTP date format (`Tue, 02 Jan 2024 10:00:00 GMT`), which some generators write,
    is read too; anything else (`2025-13-45`, `garbage`) is None: treated as no lastmod."""
    if not value:
        return None
    v = value.strip()
    if _YEAR.match(v):  # W3C Datetime's reduced precisions: YYYY and YYYY-MM
        v = v + "-01-01" if len(v) == 4 else v + "-01"
    if v.endswith("Z"):
        v = v[:-1] + "+00:00"
    try:
        try:
            dt = datetime.fromisoformat(v)
        except ValueError:
            dt = parsedate_to_datetime(v)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        # `9999-12-31T23:59:59-01:00` and `0001-01-01T00:00:00+01:00` have no UTC instant.
        return dt.astimezone(timezone.utc)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


LASTMOD_SKEW = timedelta(days=1)  # how far ahead of the pass's clock a site's clock may run


def lastmod_in_time(value: str | None, now: datetime | None) -> str | None:
    """`value` (a stamp as `parse_sitemap` writes it), or None when it is later than `now`
    plus `LASTMOD_SKEW`: a stamp in the future (a `2999` placeholder) is no stamp. Kept, it
    would stay later than every real edit's stamp and hide them all; clamped to the clock, it
    would advance on every pass. `now` None: no check."""
    if value is None or now is None:
        return value
    when = parse_lastmod(value)
    try:
        return None if when is not None and when > now + LASTMOD_SKEW else value
    except OverflowError:  # a pass clock at the end of time: nothing is later
        return value


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _invalid_loc(loc: str) -> str | None:
    """Why a <loc> (stripped) cannot be a page: None for an absolute http(s) URL."""
    if not loc:
        return "invalid <loc>: empty"
    if loc.lower().startswith(("http://", "https://")):
        return None
    try:
        scheme = urlsplit(loc).scheme
    except ValueError:
        scheme = ""
    if not scheme:  # "/a.html", "a.html", "//host/a.html"
        return "invalid <loc>: relative URL (a sitemap lists absolute URLs)"
    return f"invalid <loc>: scheme {scheme.lower()}, not http(s)"


def parse_sitemap(data: bytes) -> ParsedSitemap:
    """Parse one sitemap file (plain or gzipped bytes). Raises SitemapError when unreadable."""
    from lxml import etree  # here, not at the top: a pass whose sitemaps are all kept parses never loads lxml

    if data[:2] == b"\x1f\x8b":
        try:
            data = _gunzip(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise SitemapError(f"bad gzip: {exc}") from exc
    if len(data) > MAX_SITEMAP_BYTES:
        raise SitemapError("sitemap exceeds 50 MB")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=False)
    try:
        root = etree.fromstring(data, parser=parser)
    except etree.XMLSyntaxError as exc:
        if _HTML.search(data[:4096]):
            raise NotASitemapError(NOT_A_SITEMAP) from None  # lxml's complaint about <meta> says nothing useful
        raise SitemapError(f"not XML: {exc}") from exc
    kind = _local(root.tag)
    if kind.lower() == "html":  # XHTML parses as XML
        raise NotASitemapError(NOT_A_SITEMAP)
    out = ParsedSitemap()
    if kind == "sitemapindex":
        for sm in root:
            if _local(sm.tag) != "sitemap":
                continue
            loc = next((c.text for c in sm if _local(c.tag) == "loc" and c.text), None)
            if loc:
                out.sitemaps.append(loc.strip())
        return out
    if kind != "urlset":
        raise SitemapError(f"root element is <{kind}>, expected <urlset> or <sitemapindex>")
    seen: set[str] = set()
    bad: dict[str, str] = {}  # invalid <loc> -> why, each once (first wins, as for valid URLs)
    # A stamp as written -> as normalised: many URLs share a stamp, and then one string.
    stamps: dict[str | None, str | None] = {None: None}
    for u in root:
        if _local(u.tag) != "url":
            continue
        loc = lastmod = None
        for c in u:
            name = _local(c.tag)
            if name == "loc" and c.text:
                loc = c.text.strip()
            elif name == "lastmod" and c.text:
                lastmod = c.text.strip()
        loc = loc or ""
        why = _invalid_loc(loc)
        if why is None:
            try:
                url = canonical_url(loc)
            except ValueError as exc:  # one malformed <loc> (bad IPv6 literal, bad port) is skipped alone
                why = f"invalid <loc>: malformed URL ({exc})"
        if why is not None:
            if len(bad) < MAX_SITEMAP_URLS:  # as bounded as the entries
                bad.setdefault(loc, why)
            continue
        if url in seen:
            continue
        seen.add(url)
        if len(out.entries) >= MAX_SITEMAP_URLS:
            out.truncated = True  # a URL past the limit: the caller must not read absence as removal
            break
        if lastmod in stamps:
            stamp = stamps[lastmod]
        else:
            parsed = parse_lastmod(lastmod)
            # An unreadable stamp is no stamp: a changed typo is not a change of the page.
            stamp = stamps[lastmod] = parsed.isoformat() if parsed else None
        out.entries.append(SitemapEntry(url, stamp))
    out.invalid = list(bad.items())
    return out


# Bump whenever parse_sitemap, canonical_url or parse_lastmod would return something
# different for the same bytes: every kept parse then misses once and is redone.
PARSE_VERSION = 3  # 3: invalid <loc> entries are kept (ParsedSitemap.invalid)


def parse_key(body: bytes) -> str:
    """The key a kept parse of `body` is filed under: this parser's version and the body's SHA-256.

    Any change of the body (or of the parser) changes the key, whatever the server's
    validators say, so a kept parse is never applied to a body it was not made from.
    """
    return f"v{PARSE_VERSION}:{hashlib.sha256(body).hexdigest()}"


def pack_parsed(parsed: ParsedSitemap) -> bytes:
    """A parse result as compact bytes (zlib-compressed JSON), the inverse of `unpack_parsed`."""
    doc = {
        "urls": [e.url for e in parsed.entries],
        "lastmods": [e.lastmod for e in parsed.entries],
        "sitemaps": list(parsed.sitemaps),
        "truncated": parsed.truncated,
        "invalid": [list(pair) for pair in parsed.invalid],
    }
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode("ascii"), 1)


_STR = {str}
_STR_OR_NONE = {str, type(None)}


def unpack_parsed(packed: bytes) -> ParsedSitemap | None:
    """Inverse of `pack_parsed`; None for anything damaged or not of its shape."""
    try:
        doc = json.loads(zlib.decompress(packed))
        urls, lastmods, children, truncated = doc["urls"], doc["lastmods"], doc["sitemaps"], doc["truncated"]
        invalid = [(loc, why) for loc, why in doc["invalid"] if type(loc) is str and type(why) is str]
        if type(doc["invalid"]) is not list or len(invalid) != len(doc["invalid"]):
            return None
    except (zlib.error, UnicodeDecodeError, ValueError, TypeError, KeyError):
        return None
    if not (
        type(urls) is list
        and type(lastmods) is list
        and type(children) is list
        and len(urls) == len(lastmods)
        and type(truncated) is bool
    ):
        return None
    # Type checks over whole lists at C speed: a 20,000-URL sitemap is read in a few ms.
    if not (
        set(map(type, urls)) <= _STR and set(map(type, lastmods)) <= _STR_OR_NONE and set(map(type, children)) <= _STR
    ):
        return None
    return ParsedSitemap(list(map(SitemapEntry, urls, lastmods)), children, truncated, invalid)


def lastmod_trusted(lastmods: Iterable[str | None]) -> bool:
    """lastmod carries information only when URLs do not all share one stamp.

    A site that stamps every URL with the deploy date says nothing about which page
    changed; with one URL there is nothing to compare, so it is trusted.
    """
    return lastmod_state(lastmods) == "varied"


def lastmod_state(lastmods: Iterable[str | None]) -> str:
    """What the sitemaps' lastmod says, for the run report and `status`: "none" (no URL
    has one), "same" (two URLs or more, every one stamped with one and the same stamp:
    ignored) or "varied" (usable: stamps that differ, some URLs without one, or a single
    URL)."""
    n = 0
    stamps: set[str] = set()
    missing = False
    for v in lastmods:
        n += 1
        if v:
            stamps.add(v)
        else:
            missing = True
    if not stamps:
        return "none"
    return "same" if n >= 2 and not missing and len(stamps) == 1 else "varied"


def _netloc(url: str) -> str:
    """`urlsplit(url).netloc` for the absolute URLs a sitemap holds, at a fraction of its
    cost (it runs on every sitemap URL of every pass)."""
    parts = url.split("/", 3)
    return parts[2].lower() if len(parts) > 2 else ""


def feed_hosts(entries: Mapping[str, str | None]) -> frozenset[str]:
    """The hosts (netlocs) whose sitemap `lastmod` can serve as a change feed: the
    `lastmod_state` of that host's own URLs is "varied". Judged per host, because one
    site stamping every URL with its deploy date says nothing about which of its pages
    changed, whatever another site's sitemap in the same run does."""
    by_host: dict[str, list[str | None]] = {}
    for url, lastmod in entries.items():
        host = _netloc(url)
        group = by_host.get(host)
        if group is None:
            group = by_host[host] = []
        group.append(lastmod)
    return frozenset(h for h, lastmods in by_host.items() if lastmod_state(lastmods) == "varied")


def lastmod_advanced(previous: str | None, current: str | None, now: datetime | None = None) -> bool:
    """Whether a URL's `lastmod` moved forward: today's stamp is later than the one recorded.

    A stamp that appears where none was recorded counts (it is news about the page); one
    that disappears or moves backwards does not (a restored backup, a sitemap served by a
    stale node, a deploy-date night's stamp still on record: the page did not change
    because its stamp went back). Stamps are compared as instants when both read as dates,
    else as the normalised strings the parser writes, which order the same way. With the
    pass's clock `now`, a stamp in the future on either side is no stamp (`lastmod_in_time`).
    """
    previous, current = lastmod_in_time(previous, now), lastmod_in_time(current, now)
    if not current or current == previous:
        return False
    if previous is None:
        return True
    before, now = parse_lastmod(previous), parse_lastmod(current)
    if before is not None and now is not None:
        return now > before
    return current > previous


def lastmod_to_record(previous: str | None, current: str | None, feed: bool, now: datetime | None = None) -> str | None:
    """The `lastmod` the state keeps for a listed URL after this pass: what the next pass's
    diff compares against. `previous`: the one recorded (None when none is, or the URL is
    new); `current`: today's; `feed`: whether the URL's host is a feed today (`feed_hosts`).

    Only a feed's stamps become the baseline. A host whose sitemap says nothing today (one
    stamp on every URL, or no stamps at all) keeps its last feed stamps, so the night after
    a deploy-date night compares against the stamps before it, not against the deploy date;
    a URL that lost its own stamp keeps its last one for the same reason. A URL with no
    stamp on record takes today's even from a deploy-date night: its page was read after
    that deploy (it was new), so only a later stamp is news about it. With the pass's clock
    `now`, a stamp in the future on either side is no stamp (`lastmod_in_time`): one on
    record is dropped.
    """
    previous, current = lastmod_in_time(previous, now), lastmod_in_time(current, now)
    if current is None:
        return previous
    if feed or previous is None:
        return current
    return previous


def lastmods_to_record(
    previous: Mapping[str, str | None],
    current: Mapping[str, str | None],
    feed: frozenset[str] | None = None,
    now: datetime | None = None,
) -> dict[str, str | None]:
    """The listed URLs whose recorded `lastmod` (or sitemap membership) this pass changes:
    url -> `lastmod_to_record`, for URLs new to `previous` or whose recorded stamp moves.

    Everything else keeps its record untouched, so a pass over 20,000 unchanged entries (or
    a deploy-date night on a 20,000-URL host) records nothing. `feed`: `feed_hosts(current)`
    when the caller has it; `now`: the pass's clock (`lastmod_to_record`).
    """
    if feed is None:
        feed = feed_hosts(current)
    out: dict[str, str | None] = {}
    for url, lm in current.items() - previous.items():
        if url not in previous:
            out[url] = lastmod_to_record(None, lm, _netloc(url) in feed, now)
        else:
            keep = lastmod_to_record(previous[url], lm, _netloc(url) in feed, now)
            if keep != previous[url]:
                out[url] = keep
    return out


@dataclass(frozen=True)
class SitemapDiff:
    added: list[str]
    removed: list[str]
    lastmod_changed: list[str]
    lastmod_trusted: bool


def diff_sitemap(
    previous: Mapping[str, str | None],
    current: Mapping[str, str | None],
    feed: frozenset[str] | None = None,
    now: datetime | None = None,
) -> SitemapDiff:
    """Compare the sitemap URLs we tracked (url -> lastmod recorded) with today's.

    `lastmod_changed` lists URLs in both whose lastmod advanced (`lastmod_advanced`: later
    than the one recorded, never backwards), on the hosts whose lastmods today are a feed
    (`feed_hosts`; pass `feed` when already computed): a host with one stamp on every URL
    has none, and its stamps are no advance whatever they are. `lastmod_trusted`: some host
    has a feed. `previous` should be what `lastmods_to_record` left in the state, which
    keeps no deploy-date night's stamps as a baseline. `now`: the pass's clock, past which
    a stamp is no stamp (`lastmod_in_time`).
    """
    # Set operations on the mappings' views: 20,000 unchanged URLs are compared in C.
    added = sorted(current.keys() - previous.keys())
    removed = sorted(previous.keys() - current.keys())
    if feed is None:
        feed = feed_hosts(current)
    trusted = bool(feed)
    changed: list[str] = []
    if trusted:
        changed = sorted(
            u
            for u, lm in current.items() - previous.items()
            if lm and u in previous and _netloc(u) in feed and lastmod_advanced(previous[u], lm, now)
        )
    return SitemapDiff(added, removed, changed, trusted)


@dataclass
class SitemapCollection:
    entries: dict[str, str | None] = field(default_factory=dict)  # url -> lastmod
    errors: list[tuple[str, str]] = field(default_factory=list)  # (sitemap url, error)
    not_sitemaps: list[str] = field(default_factory=list)  # roots given that answered no sitemap (an HTML page)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (sitemap url, why not read)
    invalid: dict[str, str] = field(default_factory=dict)  # <loc> that is no http(s) URL -> why (first file wins)
    bytes_downloaded: int = 0

    @property
    def complete(self) -> bool:
        """False when any sitemap failed: then absence from it proves nothing."""
        return not self.errors


def robots_sitemaps(body: bytes) -> list[str]:
    """The `Sitemap:` lines of a robots.txt (sitemap discovery)."""
    from protego import Protego

    return list(Protego.parse(body[: 500 * 1024].decode("utf-8", errors="replace")).sitemaps)


async def collect_sitemaps(
    roots: Iterable[str],
    fetch_bytes: Callable[[str], Awaitable[tuple[bytes, int]]],
    max_depth: int = 3,
    scope: Callable[[str], str | None] | None = None,
    parse: Callable[[str, bytes], ParsedSitemap] | None = None,
    now: datetime | None = None,
    max_urls: int = MAX_TOTAL_SITEMAP_URLS,
) -> SitemapCollection:
    """Fetch the given sitemaps (and, for index files, their children) and merge their URLs.

    A root ending in `/robots.txt` is read for its `Sitemap:` lines. `fetch_bytes(url)
    -> (body, wire_bytes)` raises FetchError. A failed file is recorded, never read as
    "no URLs"; a child sitemap that `scope` refuses is skipped and recorded. `parse(url,
    body)` reads one sitemap file (default `parse_sitemap(body)`; a caller may remember parses).
    `now`: the pass's clock; a stamp later than it (and `LASTMOD_SKEW`) is no stamp.
    `max_urls`: the URLs kept in all; past them the walk stops with an error (so nothing
    is removed: the URLs not read are unknown, not gone).
    """
    out = SitemapCollection()
    stamps: dict[str | None, str | None] = {}  # a stamp -> it checked (`lastmod_in_time`), one string each
    frontier = [(u, 0) for u in roots]
    visited: set[str] = set()
    while frontier and len(visited) < _MAX_SITEMAP_FILES:
        url, depth = frontier.pop(0)
        if url in visited:
            continue
        visited.add(url)
        if depth > 0 and scope is not None and (reason := scope(url)):
            out.skipped.append((url, f"sitemap out of scope: {reason}"))
            continue
        try:
            body, wire = await fetch_bytes(url)
            out.bytes_downloaded += wire
            if url.split("?", 1)[0].endswith("/robots.txt"):
                found = robots_sitemaps(body)
                if not found:
                    out.errors.append((url, "robots.txt names no Sitemap"))
                # RFC 9309 wants absolute URLs, but `Sitemap: /sitemap.xml` is common: it
                # means the file beside robots.txt (read as is, it was a URL with no scheme).
                frontier.extend((urljoin(url, u.strip()), depth + 1) for u in found)
                continue
            parsed = parse(url, body) if parse is not None else parse_sitemap(body)
        except FetchError as exc:
            out.errors.append((url, str(exc)))
            if depth == 0 and isinstance(exc, NotASitemapError):
                out.not_sitemaps.append(url)
            continue
        for child in parsed.sitemaps:
            if depth + 1 > max_depth:
                out.errors.append((child, "sitemap index nested too deep"))
            else:
                frontier.append((child, depth + 1))
        if parsed.truncated:
            # The URLs past the limit are unknown, so this pass removes nothing (an error
            # makes the collection incomplete) rather than purge pages it did not read.
            out.errors.append(
                (
                    url,
                    f"lists more than {MAX_SITEMAP_URLS:,} URLs, the protocol's limit: "
                    f"the first {MAX_SITEMAP_URLS:,} are tracked and nothing is removed; "
                    "split it with a sitemap index",
                )
            )
        for loc, why in parsed.invalid:
            if len(out.invalid) < max_urls:
                out.invalid.setdefault(loc, why)
        if not _merge_entries(out.entries, parsed.entries, max_urls, now, stamps):
            out.errors.append(
                (
                    url,
                    f"the sitemaps list more than {max_urls:,} URLs in all (the limit, "
                    f"max_sitemap_urls): the first {max_urls:,} are tracked, no further "
                    "sitemap is read and nothing is removed",
                )
            )
            break
    return out


def _merge_entries(
    entries: dict[str, str | None],
    new: Iterable[SitemapEntry],
    max_urls: int,
    now: datetime | None,
    stamps: dict[str | None, str | None],
) -> bool:
    """Add one file's entries (the first listing of a URL wins) with their stamps checked
    against the clock, each distinct stamp once (`stamps`, shared by the pass's files: many
    URLs share a stamp, and then one string); False when a URL new to `entries` is past
    `max_urls` (not added)."""
    for e in new:
        if e.url in entries:
            continue
        if len(entries) >= max_urls:
            return False
        if e.lastmod in stamps:
            stamp = stamps[e.lastmod]
        else:
            stamp = stamps[e.lastmod] = lastmod_in_time(e.lastmod, now)
        entries[e.url] = stamp
    return True
