"""What the Fetcher remembers between passes: robots.txt answers and sitemap copies.

robots.txt: RFC 9309 (2.4) lets a crawler reuse an answer for up to 24 hours. Only answers
that say something about the site are kept (2xx rules, 4xx "no robots.txt"); a 5xx, a 429
or no answer at all is never kept, so the next pass asks again instead of treating the
site as closed for a day.

Sitemaps: the body of each sitemap file is kept with its validators (ETag exactly as
received, Last-Modified), so the next pass can send a conditional GET and, on 304, parse
the kept body exactly as if it had been downloaded again. Bodies are stored
zlib-compressed; a copy that cannot be unpacked within the sitemap size limit reads as
no copy at all.

Parsed sitemaps: a cache may also keep, per sitemap URL, the last parse result filed under
`sitemaps.parse_key(body)` (an optional extra: `cached_parse` / `cache_parse`, see
`ParseCache`). `memo_parser` reads a body through it: a kept parse is used only when its
key is today's body's, so a changed body (or parser) is always parsed afresh; a kept parse
that cannot be read is parsed afresh too, never taken as an empty sitemap.

Pure: the records, the freshness rule and the packing. `StateDB` implements `FetchCache`
in SQLite; `ReadOnlyCache` wraps one for dry runs, which must write nothing.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Protocol, runtime_checkable

from ..core.sitemaps import MAX_SITEMAP_BYTES, ParsedSitemap, pack_parsed, parse_key, parse_sitemap, unpack_parsed

__all__ = [
    "FetchCache",
    "ParseCache",
    "ReadOnlyCache",
    "memo_parser",
    "RobotsAnswer",
    "SitemapCopy",
    "ROBOTS_MAX_AGE",
    "robots_cacheable",
    "robots_fresh",
    "keep_sitemap",
    "refresh_sitemap",
    "pack_body",
    "unpack_body",
]

ROBOTS_MAX_AGE = timedelta(hours=24)  # RFC 9309 2.4: "SHOULD NOT use the cached version for more than 24 hours"


@dataclass(frozen=True)
class RobotsAnswer:
    """One robots.txt answer as received: status, body (capped) and the pass clock it came at."""

    status: int
    body: bytes
    fetched_at: datetime


@dataclass(frozen=True)
class SitemapCopy:
    """One sitemap file kept for conditional GETs: its validators and its packed body."""

    etag: str | None
    last_modified: str | None
    packed: bytes  # pack_body(body)
    fetched_at: datetime

    @classmethod
    def of(cls, body: bytes, etag: str | None, last_modified: str | None, fetched_at: datetime) -> "SitemapCopy":
        return cls(etag, last_modified, pack_body(body), fetched_at)

    def body(self, limit: int = MAX_SITEMAP_BYTES) -> bytes | None:
        """The body as it was received, or None when the copy is unreadable or too large."""
        return unpack_body(self.packed, limit)


@runtime_checkable
class FetchCache(Protocol):
    """Where the Fetcher keeps robots.txt answers (per origin) and sitemap copies (per URL)."""

    def cached_robots(self, origin: str) -> RobotsAnswer | None: ...

    def cache_robots(self, origin: str, answer: RobotsAnswer) -> None: ...

    def cached_sitemap(self, url: str) -> SitemapCopy | None: ...

    def cache_sitemap(self, url: str, copy: SitemapCopy) -> None: ...

    def forget_sitemap(self, url: str) -> None: ...


@runtime_checkable
class ParseCache(Protocol):
    """An optional extra of a FetchCache: the last parse of each sitemap URL, under its key."""

    def cached_parse(self, url: str) -> tuple[str, bytes] | None:
        """(key, pack_parsed bytes) kept for this sitemap URL, or None."""

    def cache_parse(self, url: str, key: str, packed: bytes) -> None: ...


def memo_parser(cache: object) -> Callable[[str, bytes], ParsedSitemap]:
    """`parse(url, body)` for `collect_sitemaps`: `parse_sitemap(body)`, remembered in `cache`
    when it is a `ParseCache` (else plain parsing).

    Raises what `parse_sitemap` raises; an unreadable body is never remembered.
    """
    if not isinstance(cache, ParseCache):
        return lambda url, body: parse_sitemap(body)

    def parse(url: str, body: bytes) -> ParsedSitemap:
        key = parse_key(body)
        kept = cache.cached_parse(url)
        if kept is not None and kept[0] == key:
            parsed = unpack_parsed(kept[1])
            if parsed is not None:
                return parsed
        parsed = parse_sitemap(body)
        cache.cache_parse(url, key, pack_parsed(parsed))
        return parsed

    return parse


class ReadOnlyCache:
    """A cache that answers from `inner` and keeps nothing new (dry runs write no state)."""

    def __init__(self, inner: FetchCache):
        self.inner = inner

    def cached_robots(self, origin: str) -> RobotsAnswer | None:
        return self.inner.cached_robots(origin)

    def cache_robots(self, origin: str, answer: RobotsAnswer) -> None:
        pass

    def cached_sitemap(self, url: str) -> SitemapCopy | None:
        return self.inner.cached_sitemap(url)

    def cache_sitemap(self, url: str, copy: SitemapCopy) -> None:
        pass

    def forget_sitemap(self, url: str) -> None:
        pass

    def cached_parse(self, url: str) -> tuple[str, bytes] | None:
        get = getattr(self.inner, "cached_parse", None)
        return get(url) if get is not None else None

    def cache_parse(self, url: str, key: str, packed: bytes) -> None:
        pass


def keep_sitemap(
    cache: FetchCache,
    url: str,
    kept: SitemapCopy | None,
    body: bytes,
    etag: str | None,
    last_modified: str | None,
    now: datetime,
) -> None:
    """Keep a 200's body with its validators; without validators there is nothing to ask with."""
    if etag or last_modified:
        cache.cache_sitemap(url, SitemapCopy.of(body, etag, last_modified, now))
    elif kept is not None:
        cache.forget_sitemap(url)


def refresh_sitemap(
    cache: FetchCache, url: str, kept: SitemapCopy, etag: str | None, last_modified: str | None, now: datetime
) -> None:
    """A 304 updates the validators it carries and keeps the others (RFC 9111 4.3.4)."""
    etag, last_modified = etag or kept.etag, last_modified or kept.last_modified
    if (etag, last_modified) != (kept.etag, kept.last_modified):
        cache.cache_sitemap(url, SitemapCopy(etag, last_modified, kept.packed, now))


def robots_cacheable(status: int | None) -> bool:
    """Whether a robots.txt answer may be kept across passes: not a failure (5xx, 429, none)."""
    return status is not None and status < 500 and status != 429


def robots_fresh(answer: RobotsAnswer, now: datetime, max_age: timedelta = ROBOTS_MAX_AGE) -> bool:
    """A kept answer is reused while younger than `max_age` at the pass clock `now`.

    An answer from the pass clock's future (a replay with an earlier `--now`) is not reused.
    """
    age = now - answer.fetched_at
    return timedelta(0) <= age < max_age


def pack_body(body: bytes) -> bytes:
    return zlib.compress(body, 6)


def unpack_body(packed: bytes, limit: int = MAX_SITEMAP_BYTES) -> bytes | None:
    """Inverse of `pack_body`; None for damaged data or more than `limit` bytes."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(packed, limit + 1)
    except zlib.error:
        return None
    if len(out) > limit or not d.eof:
        return None
    return out
