"""Page state in SQLite: one row per URL, the memory that makes a pass incremental.

A row is written only after the store confirmed the page's points (the engine's write
order), so the state never claims more than the collection holds. `pending_hash` marks
a page whose write began: if the pass dies before confirming it, the next pass sees
the mark and revisits the page at once.

Concurrency: `lock()` takes an exclusive advisory lock on the database file itself (so
a symlink, a hard link or any other path to it meets the same lock) and on `<db>.lock`
beside the resolved file, which names the holder; a second pass on the same state waits
up to `wait` seconds, then refuses with `StateLockedError` naming the holder (host, pid, start). The OS drops the lock when a process dies, so a
crashed pass never blocks the next one. The lock covers one machine; for passes on
several machines sharing one collection, see `sync.edges.qdrant_state` (a lease).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import sqlite3
import time
import zlib
from datetime import datetime
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ..errors import StateError, StateLockedError, StateUnusableError
from .httpcache import RobotsAnswer, SitemapCopy
from ..core.page import _FIELD_NAMES, GONE, LIVE, NEW, PageState, from_epoch, to_epoch
from .lease import Holder, locked_message, this_process

__all__ = ["PageState", "StateDB", "LIVE", "GONE", "NEW", "to_epoch", "from_epoch"]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    url TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    source TEXT NOT NULL,              -- 'sitemap' | 'url' | 'crawl'
    in_sitemap INTEGER NOT NULL DEFAULT 0,
    sitemap_lastmod TEXT,
    etag TEXT,
    last_modified TEXT,
    content_hash TEXT,
    fingerprint TEXT,
    pending_hash TEXT,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    title TEXT,
    interval_s REAL,
    due_at REAL,
    first_seen_at REAL,
    last_fetched_at REAL,
    last_changed_at REAL,
    failures INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    history TEXT,                      -- JSON visit history for the revisit policy
    lastmod_pending INTEGER NOT NULL DEFAULT 0, -- a sitemap lastmod advance awaits confirmation
    moved_to TEXT,                     -- a gone page's 301/308 target, as last seen
    unlinked_since REAL,               -- a crawl page a complete crawl did not reach: since when
    unlinked_by TEXT,                  -- the page that stopped linking it (sync.core.unlinked)
    unlinked_misses INTEGER NOT NULL DEFAULT 0, -- the crawls that missed it since unlinked_since
    text_chars INTEGER,                -- characters of the extracted text last written
    page_kind TEXT                     -- 'guide' | 'reference', as its points say
);
CREATE INDEX IF NOT EXISTS pages_due ON pages(status, due_at);
CREATE INDEX IF NOT EXISTS pages_pending ON pages(pending_hash) WHERE pending_hash IS NOT NULL;
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    report TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS hosts (
    host TEXT PRIMARY KEY,
    lastmod_advances INTEGER NOT NULL DEFAULT 0,
    lastmod_confirmed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS robots_cache (
    origin TEXT PRIMARY KEY,           -- scheme://host[:port], a robots.txt's scope (RFC 9309)
    status INTEGER NOT NULL,
    body BLOB NOT NULL,                -- at most MAX_ROBOTS_BYTES
    fetched_at REAL NOT NULL           -- the pass clock
);
CREATE TABLE IF NOT EXISTS sitemap_cache (
    url TEXT PRIMARY KEY,              -- the sitemap file as requested
    etag TEXT,                         -- exactly as received
    last_modified TEXT,
    body BLOB NOT NULL,                -- zlib-compressed (sync.edges.httpcache.pack_body)
    fetched_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sitemap_parses (
    url TEXT PRIMARY KEY,              -- the sitemap file as requested
    key TEXT NOT NULL,                 -- sync.core.sitemaps.parse_key of the body this parse was made from
    parsed BLOB NOT NULL               -- sync.core.sitemaps.pack_parsed
);
CREATE TABLE IF NOT EXISTS page_texts (
    url TEXT PRIMARY KEY,              -- a page written to the collection
    content_hash TEXT NOT NULL,        -- the hash of this text: used only while it equals the page's
    text BLOB NOT NULL                 -- zlib-compressed extracted markdown (pagesync reindex rebuilds from it)
);
CREATE TABLE IF NOT EXISTS page_feed (
    url TEXT PRIMARY KEY,              -- a page its host's change feed (sync.core.feeds) names
    digest TEXT NOT NULL               -- the feed's digest of its text when the page was last visited
);
CREATE TABLE IF NOT EXISTS page_links (
    url TEXT PRIMARY KEY,              -- a page a crawl read
    links BLOB NOT NULL                -- zlib-compressed sync.core.links.links_to_json: what it linked to when last read
);
"""
# Columns added after the first release: (name, declaration) for ALTER TABLE on old files.
_ADDED_COLUMNS = [
    ("history", "TEXT"),
    ("lastmod_pending", "INTEGER NOT NULL DEFAULT 0"),
    ("moved_to", "TEXT"),
    ("unlinked_since", "REAL"),
    ("unlinked_by", "TEXT"),
    ("unlinked_misses", "INTEGER NOT NULL DEFAULT 0"),
    ("text_chars", "INTEGER"),
    ("page_kind", "TEXT"),
]
_LOCK_POLL_S = 0.2  # how often a waiting pass (--wait-lock) tries the lock again


def _corrupt(exc: BaseException) -> bool:
    """SQLite says the file is not a database, or a damaged one; or a text pagesync wrote
    (always UTF-8) reads back as bytes that are not UTF-8: damage SQLite's page checks
    did not catch, which the sqlite3 module reports as OperationalError."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.OperationalError) and "Could not decode to UTF-8" in str(exc):
        return True
    return code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or type(exc) is sqlite3.DatabaseError


def state_error(path: Path, exc: sqlite3.Error, doing: str) -> StateError:
    """The pagesync error for a SQLite error on the state at `path`: a damaged file is
    `StateUnusableError` (exit 2) with what to do about it; anything else (a full disk, a
    locked file) is a `StateError` saying what failed."""
    if _corrupt(exc):
        return damaged(path, exc)
    return StateError(f"{doing} {path}: {exc}")


def damaged(path: Path, cause: object) -> StateUnusableError:
    """The one line for a state file that is damaged or not a pagesync state (exit 2)."""
    return StateUnusableError(
        f"page state {path} is damaged or not a pagesync state ({cause}): move it aside and restore it "
        f"('pagesync state import --state {path} --file DUMP' from a 'pagesync state export' dump, or a "
        f"backup), or delete it to start over (the next pass visits every page again)"
    )


def _can(path: Path, mode: int) -> bool:
    """os.access with this process's effective ids where the OS offers it (a setuid or
    capability-dropped process is judged as it will be treated)."""
    effective = os.access in os.supports_effective_ids
    return os.access(path, mode, effective_ids=effective)


def access_problem(path: Path) -> str | None:
    """Why this process cannot open a SQLite state at `path` read-write, in words (the
    path and the permission named), or None when the permissions are not the cause."""
    parent = path.parent
    there = os.path.exists(parent)  # os.path: False, not an exception, where stat is refused
    if there and not os.path.isdir(parent):
        return f"{parent} is not a directory"
    if there and not _can(parent, os.X_OK):
        return f"permission denied to enter its directory {parent}"
    if os.path.exists(path):
        for mode, word in ((os.R_OK, "read"), (os.W_OK, "write")):
            if not _can(path, mode):
                return f"no permission to {word} {path}"
    if there and not _can(parent, os.W_OK):
        return (
            f"no permission to write in its directory {parent} (SQLite keeps {path.name}-wal and "
            f"{path.name}-shm beside the file, pagesync {path.name}.lock)"
        )
    return None


def unusable(path: Path, exc: BaseException) -> StateUnusableError:
    """The error for a state at `path` that cannot be opened: its permission problem when
    there is one (fix it, or give --state a path this user can write), else the cause."""
    problem = access_problem(path)
    if problem is None:
        return StateUnusableError(f"cannot open state database {path}: {exc}")
    return StateUnusableError(
        f"cannot open state database {path}: {problem} (uid {os.geteuid()}); fix the "
        f"permissions or give --state a path this user can write ({exc})"
    )


def _connect_ro(uri: str) -> sqlite3.Connection:
    """A read-only connection to the state at `uri`, tried on its pages table."""
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        db.row_factory = sqlite3.Row
        db.execute("SELECT count(*) FROM pages").fetchone()  # fails here, not in the report
    except BaseException:
        db.close()
        raise
    return db


def _mapped(fn):
    """A StateDB method whose SQLite errors leave it as pagesync errors (`state_error`)."""

    @functools.wraps(fn)
    def method(self: "StateDB", *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, f"page state {fn.__name__} failed on") from exc

    return method


_UNMAPPED = {"close", "lock", "unlock", "transaction"}  # no SQL, or (transaction) wrapped by its callers
_COLUMNS = [name for name in _FIELD_NAMES if name != "interval"] + ["interval_s"]
# The page columns in field order (interval as interval_s), as `_from_values`/`_values` take
# them (tests/edges/test_state.py holds them to from_row/to_row, field by field).
_ROW_COLUMNS = tuple("interval_s" if name == "interval" else name for name in _FIELD_NAMES)
_SELECT = f"SELECT {', '.join(_ROW_COLUMNS)} FROM pages"
_UPSERT = (
    f"INSERT INTO pages ({', '.join(_ROW_COLUMNS)}) VALUES ({', '.join('?' * len(_ROW_COLUMNS))}) "
    f"ON CONFLICT(url) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in _ROW_COLUMNS[1:])}"
)


def _in_batches(urls: Iterable[str], size: int = 500) -> Iterator[tuple[list[str], str]]:
    """`urls` in parts of `size` (under SQLite's host-parameter limit), each with its "?,?,..."."""
    urls = list(urls)
    for i in range(0, len(urls), size):
        part = urls[i : i + size]
        yield part, ",".join("?" * len(part))


def _flock_all(fds: Sequence[int]) -> int | None:
    """Take an exclusive flock on every fd, in order, without waiting: None when all are
    taken, else the index of the first one held elsewhere (those taken before it are let go)."""
    for i, fd in enumerate(fds):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            for taken in fds[:i]:
                fcntl.flock(taken, fcntl.LOCK_UN)
            return i
    return None


def _holder(fd: int) -> Holder | str:
    """The holder a lock file describes, as written (`Holder.to_json`), or its raw text."""
    try:
        raw = os.pread(fd, 500, 0).decode(errors="replace").strip()
    except OSError:
        return ""
    try:
        return Holder.from_dict(json.loads(raw))
    except (ValueError, TypeError, AttributeError):
        return raw  # written by an older pagesync: shown as it is


class StateDB:
    """The page-state database. Use as a context manager or call `close()`.

    It is also the Fetcher's `FetchCache` (robots.txt answers, sitemap copies), so what a
    pass learnt about the site's files lives and travels with the page state.
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False):
        """`read_only`: open an existing file for reading only (SQLite's mode=ro), for reports
        on a state this user may read but not write; nothing is created or migrated."""
        self.memory = str(path) == ":memory:"  # a throw-away state (dry runs with no state yet)
        self.path = Path(path)
        self.read_only = read_only
        self._lock_fds: tuple[int, int] | None = None
        if read_only:
            self._connect_read_only()
            return
        try:
            if not self.memory:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            have = {r["name"] for r in self._db.execute("PRAGMA table_info(pages)")}
            for name, decl in _ADDED_COLUMNS:
                if name not in have:
                    self._db.execute(f"ALTER TABLE pages ADD COLUMN {name} {decl}")
        except (sqlite3.Error, OSError) as exc:
            raise self._open_error(exc) from exc

    def _open_error(self, exc: BaseException) -> Exception:
        """What opening the database failed with, as the error hierarchy says it: a damaged
        file, or a path this user cannot use ("unable to open database file": a --state that
        cannot hold a database, a directory without write permission)."""
        if isinstance(exc, sqlite3.Error) and _corrupt(exc):
            return state_error(self.path, exc, "")
        return unusable(self.path, exc)

    def _connect_read_only(self) -> None:
        """mode=ro; where SQLite cannot even set up its WAL index for that (no -shm file, and
        a directory it may not create one in) and no -wal file holds unmerged writes, the
        file alone is the whole state: read it as immutable."""
        uri = self.path.resolve().as_uri()
        try:
            try:
                self._db = _connect_ro(uri + "?mode=ro")
            except sqlite3.OperationalError:
                if os.path.exists(str(self.path) + "-wal"):
                    raise
                self._db = _connect_ro(uri + "?mode=ro&immutable=1")
        except (sqlite3.Error, OSError) as exc:
            raise self._open_error(exc) from exc

    # -- lifecycle -----------------------------------------------------------------
    def close(self) -> None:
        self.unlock()
        self._db.close()

    def __enter__(self) -> "StateDB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lock(self, wait: float = 0.0) -> None:
        """Take the exclusive pass lock, waiting up to `wait` seconds; else StateLockedError.

        The refusal names the holder as the Qdrant state's lease does (host, pid, started
        at); an OS file lock has no expiry: it is released when the holder process exits.
        """
        if self._lock_fds is not None or self.memory:
            return
        # Both locks are flock(2) locks, held by open file descriptions: SQLite's own locks
        # on the database are POSIX byte-range locks, which flock neither takes nor drops.
        # `<db>.lock` beside the resolved file holds the holder's description (a symlink
        # meets it); the database file's own lock is keyed on its inode (a hard link meets it).
        real = os.path.realpath(self.path)
        opened: list[int] = []
        try:
            opened.append(os.open(real + ".lock", os.O_RDWR | os.O_CREAT, 0o644))
            opened.append(os.open(real, os.O_RDONLY))
        except OSError as exc:
            for fd in opened:
                os.close(fd)
            raise unusable(self.path, exc) from exc  # e.g. a directory this user may read but not write
        fds = (opened[0], opened[1])
        deadline = time.monotonic() + max(0.0, wait)
        while (busy := _flock_all(fds)) is not None:
            if time.monotonic() < deadline:
                time.sleep(min(_LOCK_POLL_S, max(0.0, deadline - time.monotonic())))
                continue
            # Only a held `<db>.lock` describes its holder; one we could take is stale (a pass
            # through another hard link holds the database, and wrote its own file).
            holder = _holder(fds[0]) if busy == 0 else ""
            for fd in fds:
                os.close(fd)
            raise StateLockedError(locked_message(str(self.path), holder)) from None
        os.ftruncate(fds[0], 0)
        os.pwrite(fds[0], this_process(time.time()).to_json().encode(), 0)
        self._lock_fds = fds

    def unlock(self) -> None:
        if self._lock_fds is not None:
            for fd in reversed(self._lock_fds):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            self._lock_fds = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            self._db.execute("BEGIN")
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    # -- pages -----------------------------------------------------------------------
    def _pages(self, where: str = "", params: Sequence = ()) -> Iterator[PageState]:
        """Page rows as PageStates, read as plain tuples (`_SELECT`, `PageState._from_values`)."""
        cur = self._db.cursor()
        cur.row_factory = None
        return map(PageState._from_values, cur.execute(f"{_SELECT} {where}", params))

    def get(self, url: str) -> PageState | None:
        return next(self._pages("WHERE url = ?", (url,)), None)

    def get_many(self, urls: Iterable[str]) -> dict[str, PageState]:
        out: dict[str, PageState] = {}
        for part, marks in _in_batches(urls):
            for page in self._pages(f"WHERE url IN ({marks})", part):
                out[page.url] = page
        return out

    def all_pages(self) -> list[PageState]:
        return list(self._pages("ORDER BY url"))

    def sitemap_urls(self) -> dict[str, str | None]:
        """URLs the sitemaps listed last pass (url -> lastmod), for the sitemap diff."""
        cur = self._db.cursor()
        cur.row_factory = None  # plain (url, lastmod) tuples straight into the dict: 20,000 rows in a few ms
        return dict(cur.execute("SELECT url, sitemap_lastmod FROM pages WHERE in_sitemap = 1"))

    def due_urls(self, now: datetime) -> list[str]:
        """Pages whose due time has come, or whose write was left pending.

        Gone pages still listed in a sitemap (they answered 404/410) stay on the schedule,
        so a page that comes back is noticed; pages that left the sitemap do not.
        """
        rows = self._db.execute(
            "SELECT url FROM pages WHERE (status != ? OR in_sitemap = 1) AND (due_at IS NULL OR due_at <= ?) "
            "UNION SELECT url FROM pages WHERE pending_hash IS NOT NULL",
            (GONE, to_epoch(now)),
        )
        return [r["url"] for r in rows]

    def tracked_urls(self) -> list[str]:
        return [r["url"] for r in self._db.execute("SELECT url FROM pages WHERE status != ?", (GONE,))]

    def tracked_count(self) -> int:
        """Pages tracked and not gone (the base of the mass-deletion guard's share)."""
        return self._db.execute("SELECT COUNT(*) FROM pages WHERE status != ?", (GONE,)).fetchone()[0]

    def recorded_chunks(self) -> int:
        """The chunks of the pages whose write was confirmed (live, a hash, no pending mark):
        the points the collection should hold for them, summed here, not listed."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(chunk_count), 0) FROM pages WHERE status = ? AND "
            "content_hash IS NOT NULL AND pending_hash IS NULL",
            (LIVE,),
        ).fetchone()
        return int(row[0])

    def put(self, page: PageState) -> None:
        self.put_many([page])

    def put_many(self, pages: Iterable[PageState]) -> None:
        rows = [p._values() for p in pages]
        if not rows:
            return
        try:
            with self.transaction():
                self._db.executemany(_UPSERT, rows)
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, "cannot write page state to") from exc

    def counts(self) -> dict[str, int]:
        return {
            r["status"]: r["n"] for r in self._db.execute("SELECT status, COUNT(*) AS n FROM pages GROUP BY status")
        }

    # -- hosts ------------------------------------------------------------------------
    def host_trust_counts(self) -> dict[str, tuple[int, int]]:
        """host -> (lastmod advances seen, advances a text change confirmed)."""
        return {
            r["host"]: (r["lastmod_advances"], r["lastmod_confirmed"]) for r in self._db.execute("SELECT * FROM hosts")
        }

    def add_host_trust(self, counts: dict[str, tuple[int, int]]) -> None:
        for host, (adv, conf) in counts.items():
            self._db.execute(
                "INSERT INTO hosts (host, lastmod_advances, lastmod_confirmed) VALUES (?, ?, ?) "
                "ON CONFLICT(host) DO UPDATE SET lastmod_advances = lastmod_advances + excluded.lastmod_advances, "
                "lastmod_confirmed = lastmod_confirmed + excluded.lastmod_confirmed",
                (host, adv, conf),
            )

    # -- the Fetcher's cache (sync.edges.httpcache.FetchCache) ---------------------------------
    def cached_robots(self, origin: str) -> RobotsAnswer | None:
        row = self._db.execute("SELECT * FROM robots_cache WHERE origin = ?", (origin,)).fetchone()
        if row is None:
            return None
        return RobotsAnswer(row["status"], bytes(row["body"]), from_epoch(row["fetched_at"]))

    def cache_robots(self, origin: str, answer: RobotsAnswer) -> None:
        self._write_cache(
            "INSERT INTO robots_cache (origin, status, body, fetched_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(origin) DO UPDATE SET status = excluded.status, body = excluded.body, "
            "fetched_at = excluded.fetched_at",
            (origin, answer.status, answer.body, to_epoch(answer.fetched_at)),
        )

    def cached_sitemap(self, url: str) -> SitemapCopy | None:
        row = self._db.execute("SELECT * FROM sitemap_cache WHERE url = ?", (url,)).fetchone()
        if row is None:
            return None
        return SitemapCopy(row["etag"], row["last_modified"], bytes(row["body"]), from_epoch(row["fetched_at"]))

    def cache_sitemap(self, url: str, copy: SitemapCopy) -> None:
        self._write_cache(
            "INSERT INTO sitemap_cache (url, etag, last_modified, body, fetched_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(url) DO UPDATE SET etag = excluded.etag, last_modified = excluded.last_modified, "
            "body = excluded.body, fetched_at = excluded.fetched_at",
            (url, copy.etag, copy.last_modified, copy.packed, to_epoch(copy.fetched_at)),
        )

    def forget_sitemap(self, url: str) -> None:
        self._write_cache("DELETE FROM sitemap_cache WHERE url = ?", (url,))

    # the parse of each kept sitemap (sync.edges.httpcache.ParseCache): a 304 costs no XML parsing
    def cached_parse(self, url: str) -> tuple[str, bytes] | None:
        row = self._db.execute("SELECT key, parsed FROM sitemap_parses WHERE url = ?", (url,)).fetchone()
        return None if row is None else (row["key"], bytes(row["parsed"]))

    def cache_parse(self, url: str, key: str, packed: bytes) -> None:
        self._write_cache(
            "INSERT INTO sitemap_parses (url, key, parsed) VALUES (?, ?, ?) "
            "ON CONFLICT(url) DO UPDATE SET key = excluded.key, parsed = excluded.parsed",
            (url, key, packed),
        )

    def _write_cache(self, query: str, params: tuple) -> None:
        try:
            self._db.execute(query, params)
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, "cannot write the fetch cache to") from exc

    # -- runs -------------------------------------------------------------------------
    def record_run(self, report: dict) -> None:
        self._db.execute(
            "INSERT INTO runs (started_at, finished_at, report) VALUES (?, ?, ?)",
            (report["started_at"], report["finished_at"], json.dumps(report)),
        )

    def last_run(self) -> dict | None:
        row = self._db.execute("SELECT report FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return self._report(row["report"]) if row else None

    def runs(self) -> list[dict]:
        """Every recorded run report, oldest first."""
        return [self._report(r["report"]) for r in self._db.execute("SELECT report FROM runs ORDER BY id")]

    def _report(self, text: str) -> dict:
        """A recorded run report; one that is no JSON object is a damaged state (pagesync wrote it)."""
        try:
            report = json.loads(text)
        except ValueError as exc:
            raise damaged(self.path, f"a run report is not JSON: {exc}") from None
        if not isinstance(report, dict):
            raise damaged(self.path, "a run report is not a JSON object")
        return report

    # -- whole state ------------------------------------------------------------------
    def clear(self) -> None:
        """Forget every page, host and run, the HTTP caches and the kept texts (the lock file stays)."""
        try:
            with self.transaction():
                for table in (
                    "pages",
                    "hosts",
                    "runs",
                    "robots_cache",
                    "sitemap_cache",
                    "sitemap_parses",
                    "page_texts",
                    "page_links",
                    "page_feed",
                ):
                    self._db.execute(f"DELETE FROM {table}")
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, "cannot clear page state") from exc

    # -- page texts (what `pagesync reindex` rebuilds from without a re-crawl) ----------------
    # Kept apart from `pages`: rows there are read whole by every pass and status, and
    # rewritten on every visit; a text is written only when its page is, read only by reindex.
    def put_texts(self, items: Iterable[tuple[str, str, str]]) -> None:
        """Keep each page's extracted markdown: (url, content_hash, markdown)."""
        rows = [(url, h, zlib.compress(text.encode("utf-8"), 6)) for url, h, text in items]
        if not rows:
            return
        try:
            with self.transaction():
                self._db.executemany(
                    "INSERT INTO page_texts (url, content_hash, text) VALUES (?, ?, ?) "
                    "ON CONFLICT(url) DO UPDATE SET content_hash = excluded.content_hash, text = excluded.text",
                    rows,
                )
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, "cannot write page texts to") from exc

    def text_hashes(self) -> dict[str, str]:
        """url -> content hash of every kept text (no text is read)."""
        return {r["url"]: r["content_hash"] for r in self._db.execute("SELECT url, content_hash FROM page_texts")}

    def get_texts(self, urls: Iterable[str]) -> dict[str, tuple[str, str]]:
        """url -> (content_hash, markdown) for the urls that have a readable kept text."""
        out: dict[str, tuple[str, str]] = {}
        for part, marks in _in_batches(urls):
            q = f"SELECT url, content_hash, text FROM page_texts WHERE url IN ({marks})"
            for row in self._db.execute(q, part):
                try:
                    out[row["url"]] = (row["content_hash"], zlib.decompress(bytes(row["text"])).decode("utf-8"))
                except (zlib.error, UnicodeDecodeError):
                    continue  # unreadable: as if never kept
        return out

    def drop_texts(self, urls: Iterable[str]) -> None:
        try:
            for part, marks in _in_batches(urls):
                self._db.execute(f"DELETE FROM page_texts WHERE url IN ({marks})", part)
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, "cannot drop page texts from") from exc

    # -- change feed digests (sync.core.feeds): what the feed said of a page at its last visit --
    def feed_digests(self) -> dict[str, str]:
        """url -> the feed digest recorded for the page."""
        return {r["url"]: r["digest"] for r in self._db.execute("SELECT url, digest FROM page_feed")}

    def put_feed_digests(self, items: dict[str, str]) -> None:
        """Record (url -> digest) for these pages."""
        if not items:
            return
        try:
            with self.transaction():
                self._db.executemany(
                    "INSERT INTO page_feed (url, digest) VALUES (?, ?) "
                    "ON CONFLICT(url) DO UPDATE SET digest = excluded.digest",
                    sorted(items.items()),
                )
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, "cannot write feed digests to") from exc

    # -- page links (what a crawl follows from a page it does not read again: a 304, a page not due) --
    def put_links(self, items: Iterable[tuple[str, str]]) -> None:
        """Keep each page's links as last read: (url, `links_to_json` text)."""
        rows = [(url, zlib.compress(text.encode("utf-8"), 6)) for url, text in items]
        if not rows:
            return
        try:
            with self.transaction():
                self._db.executemany(
                    "INSERT INTO page_links (url, links) VALUES (?, ?) "
                    "ON CONFLICT(url) DO UPDATE SET links = excluded.links",
                    rows,
                )
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, "cannot write page links to") from exc

    def get_links(self, urls: Iterable[str]) -> dict[str, str]:
        """url -> the kept `links_to_json` text, for the urls that have a readable one."""
        out: dict[str, str] = {}
        for part, marks in _in_batches(urls):
            q = f"SELECT url, links FROM page_links WHERE url IN ({marks})"
            for row in self._db.execute(q, part):
                try:
                    out[row["url"]] = zlib.decompress(bytes(row["links"])).decode("utf-8")
                except (zlib.error, UnicodeDecodeError):
                    continue  # unreadable: as if never kept (the page is read again)
        return out

    def drop_links(self, urls: Iterable[str]) -> None:
        try:
            for part, marks in _in_batches(urls):
                self._db.execute(f"DELETE FROM page_links WHERE url IN ({marks})", part)
        except sqlite3.Error as exc:
            raise state_error(self.path, exc, "cannot drop page links from") from exc


# Every SQL-reading method maps SQLite errors (a damaged file surfaces on the first read of a
# damaged page, in whichever method that is) to pagesync errors.
for _name, _fn in list(vars(StateDB).items()):
    if callable(_fn) and not _name.startswith("__") and _name not in _UNMAPPED:
        setattr(StateDB, _name, _mapped(_fn))
