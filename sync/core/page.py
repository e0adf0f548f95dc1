"""The page record: what pagesync knows of one URL between passes, as plain data.

Every layer reads and writes `PageState`; the states (`sync.edges.state`, `sync.edges.qdrant_state`)
only store it. It lives in the core so the pure rules (plan, points check, policy) can take it
without importing a database.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    import sqlite3

__all__ = ["PageState", "LIVE", "GONE", "NEW", "to_epoch", "from_epoch"]

LIVE = "live"  # fetched and indexed (possibly with zero chunks)
GONE = "gone"  # 404/410, moved by 301/308 (`moved_to` says where) or left the sitemap: no points
NEW = "new"  # known (sitemap or --url) but never indexed yet


def to_epoch(dt: datetime | None) -> float | None:
    return None if dt is None else dt.timestamp()


@overload
def from_epoch(ts: float) -> datetime: ...
@overload
def from_epoch(ts: None) -> None: ...
def from_epoch(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc)


@dataclass
class PageState:
    """What the state remembers of one page between passes: hashes, validators, schedule."""

    url: str
    status: str = NEW
    source: str = "sitemap"  # what tracks it: "sitemap", "url" (--url, a redirect's target) or "crawl" (--crawl)
    in_sitemap: bool = False
    sitemap_lastmod: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    fingerprint: str | None = None
    pending_hash: str | None = None
    chunk_count: int = 0
    title: str | None = None
    interval: timedelta | None = None
    due_at: datetime | None = None
    first_seen_at: datetime | None = None
    last_fetched_at: datetime | None = None
    last_changed_at: datetime | None = None
    failures: int = 0
    last_error: str | None = None
    history: str | None = None  # sync.core.history.history_to_json
    lastmod_pending: bool = False
    # A gone page that answered 301/308: the canonical target, tracked in its place. The
    # page stays on the schedule while a sitemap lists it (a redirect can be undone).
    moved_to: str | None = None
    # A crawl page a complete crawl did not reach: since when, and the page that stopped
    # linking it (`sync.core.unlinked`). It leaves only when a later complete crawl agrees.
    unlinked_since: datetime | None = None
    unlinked_by: str | None = None
    unlinked_misses: int = 0  # the crawls that missed it since `unlinked_since`, that one included
    # The length in characters of the extracted text last written (None: written before
    # it was kept). The broken-deploy rule tells a page cut to a stub from an edit by it.
    text_chars: int | None = None
    # What its points say it is (`chunking.extract.PAGE_KINDS`: a guide or an API reference),
    # as last written; None: written before it was told.
    page_kind: str | None = None

    @property
    def indexed(self) -> bool:
        """The collection holds this page's points (as of the last confirmed write)."""
        return self.status == LIVE and self.content_hash is not None

    def to_row(self) -> dict:
        # Every field is a scalar (str, number, datetime, timedelta): a shallow read, not
        # dataclasses.asdict's recursive deep copy (15 % of a 20,000 x 304 pass's CPU).
        d = {name: getattr(self, name) for name in _FIELD_NAMES}
        d["in_sitemap"] = int(self.in_sitemap)
        d["lastmod_pending"] = int(self.lastmod_pending)
        d["interval_s"] = self.interval.total_seconds() if self.interval is not None else None
        del d["interval"]
        for k in _TIMES:
            d[k] = to_epoch(d[k])
        return d

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "PageState":
        d = dict(row)
        d["in_sitemap"] = bool(d["in_sitemap"])
        d["lastmod_pending"] = bool(d["lastmod_pending"])
        iv = d.pop("interval_s")
        d["interval"] = timedelta(seconds=iv) if iv is not None else None
        for k in _TIMES:
            d[k] = from_epoch(d[k])
        return cls(**d)

    # The SQLite state reads and writes rows as plain tuples in `_FIELD_NAMES` order
    # (`_SELECT`, `_UPSERT`): the same conversions as from_row/to_row without a dict per
    # row, which a --full pass does 20,000 times each way (from_row's dict and keyword
    # call were ~15 us of the ~23 us a row took to read).
    @classmethod
    def _from_values(cls, v: tuple) -> "PageState":
        return cls(
            v[0],
            v[1],
            v[2],
            bool(v[3]),
            v[4],
            v[5],
            v[6],
            v[7],
            v[8],
            v[9],
            v[10],
            v[11],
            None if v[12] is None else timedelta(seconds=v[12]),
            None if v[13] is None else datetime.fromtimestamp(v[13], timezone.utc),
            None if v[14] is None else datetime.fromtimestamp(v[14], timezone.utc),
            None if v[15] is None else datetime.fromtimestamp(v[15], timezone.utc),
            None if v[16] is None else datetime.fromtimestamp(v[16], timezone.utc),
            v[17],
            v[18],
            v[19],
            bool(v[20]),
            v[21],
            None if v[22] is None else datetime.fromtimestamp(v[22], timezone.utc),
            v[23],
            v[24] or 0,
            v[25],
            v[26],
        )

    def _values(self) -> tuple:
        iv, due, first, fetched, changed, unlinked = (
            self.interval,
            self.due_at,
            self.first_seen_at,
            self.last_fetched_at,
            self.last_changed_at,
            self.unlinked_since,
        )
        return (
            self.url,
            self.status,
            self.source,
            int(self.in_sitemap),
            self.sitemap_lastmod,
            self.etag,
            self.last_modified,
            self.content_hash,
            self.fingerprint,
            self.pending_hash,
            self.chunk_count,
            self.title,
            None if iv is None else iv.total_seconds(),
            None if due is None else due.timestamp(),
            None if first is None else first.timestamp(),
            None if fetched is None else fetched.timestamp(),
            None if changed is None else changed.timestamp(),
            self.failures,
            self.last_error,
            self.history,
            int(self.lastmod_pending),
            self.moved_to,
            None if unlinked is None else unlinked.timestamp(),
            self.unlinked_by,
            self.unlinked_misses,
            self.text_chars,
            self.page_kind,
        )


_FIELD_NAMES = tuple(f.name for f in fields(PageState))
_TIMES = ("due_at", "first_seen_at", "last_fetched_at", "last_changed_at", "unlinked_since")  # epoch seconds in a row
