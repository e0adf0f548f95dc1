"""The page-state seam: what the engine, status, audit, the state transfer and the CLI use.

Two implementations: `sync.edges.state.StateDB` (SQLite, the default; one machine) and
`sync.edges.qdrant_state.QdrantState` (a payload-only companion collection on the same Qdrant
server as the pages, for CI runners that keep nothing between runs).

Optional extras that a state may offer and callers must treat as optional (look them up
with `getattr`), e.g. a robots.txt or sitemap conditional-GET cache, are not listed here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Protocol, runtime_checkable

from .state import PageState

__all__ = ["FeedDigests", "LinkKeeper", "State", "TextKeeper"]


@runtime_checkable
class State(Protocol):
    """What a pass needs of its state store: the pass lock, page rows, links and kept texts."""

    # -- lifecycle and the pass lock ------------------------------------------------------
    def lock(self, wait: float = 0.0) -> None:
        """Take the exclusive pass lock, waiting up to `wait` seconds for another holder.

        Re-entrant for the holder. Raises `StateLockedError` (exit 2) naming the holder
        (host, pid, started at, expires at) when it is still held after `wait`."""

    def unlock(self) -> None:
        """Release the pass lock (a no-op when not held)."""

    def close(self) -> None:
        """Release the lock and any resources of the state itself."""

    def __enter__(self) -> "State": ...

    def __exit__(self, *exc: object) -> None: ...

    # -- pages --------------------------------------------------------------------------
    def get(self, url: str) -> PageState | None: ...

    def get_many(self, urls: Iterable[str]) -> dict[str, PageState]: ...

    def all_pages(self) -> list[PageState]:
        """Every page, ordered by url."""

    def sitemap_urls(self) -> dict[str, str | None]:
        """URLs the sitemaps listed last pass (url -> lastmod), for the sitemap diff."""

    def due_urls(self, now: datetime) -> list[str]:
        """Pages due at `now` (not gone, or gone but still in a sitemap; due time null or
        reached) plus every page with a pending write; each url once."""

    def tracked_count(self) -> int:
        """Pages tracked and not gone."""

    def put_many(self, pages: Iterable[PageState]) -> None:
        """Insert or replace these pages (every field)."""

    # -- hosts ---------------------------------------------------------------------------
    def host_trust_counts(self) -> dict[str, tuple[int, int]]:
        """host -> (lastmod advances seen, advances a text change confirmed)."""

    def add_host_trust(self, counts: dict[str, tuple[int, int]]) -> None:
        """Add these increments to the hosts' counts."""

    # -- runs ----------------------------------------------------------------------------
    def record_run(self, report: dict) -> None: ...

    def last_run(self) -> dict | None: ...

    # -- whole-state transfer (`pagesync state export/import`) -----------------------------
    def runs(self) -> list[dict]:
        """Every recorded run report, oldest first."""

    def clear(self) -> None:
        """Forget every page, host and run (not the lock)."""


@runtime_checkable
class LinkKeeper(Protocol):
    """A state that keeps each crawled page's links as last read (the SQLite state does), so
    a page that answers 304, or is not due, still stands for what it linked to."""

    def put_links(self, items: Iterable[tuple[str, str]]) -> None:
        """Keep each page's links: (url, `sync.core.links.links_to_json` text)."""

    def get_links(self, urls: Iterable[str]) -> dict[str, str]:
        """url -> the kept links text, for the urls that have a readable one."""

    def drop_links(self, urls: Iterable[str]) -> None:
        """Forget these pages' links (a 404/410 links to nothing)."""


@runtime_checkable
class TextKeeper(Protocol):
    """A state that keeps each written page's extracted text (the SQLite state does): what
    `pagesync reindex` rebuilds a collection from without fetching the site again."""

    def put_texts(self, items: Iterable[tuple[str, str, str]]) -> None:
        """Keep each page's text: (url, content_hash, markdown)."""

    def text_hashes(self) -> dict[str, str]:
        """url -> content hash of every kept text (no text is read)."""

    def get_texts(self, urls: Iterable[str]) -> dict[str, tuple[str, str]]:
        """url -> (content_hash, markdown) for the urls that have a readable kept text."""

    def drop_texts(self, urls: Iterable[str]) -> None:
        """Forget these pages' texts (they left the site)."""


@runtime_checkable
class FeedDigests(Protocol):
    """A state that records, per page, the digest of its change feed's text when last visited."""

    def feed_digests(self) -> dict[str, str]:
        """url -> the feed digest recorded for the page."""

    def put_feed_digests(self, items: dict[str, str]) -> None:
        """Record (url -> digest) for these pages."""
