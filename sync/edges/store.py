"""The vector store seam: one protocol, two backends.

- `EdgeStore`: the embedded default, Qdrant Edge (the Qdrant engine in-process, one shard
  directory per collection). Delete-by-url goes through a keyword payload index, so
  replacing a page costs the same at 10k or 1M points.
- `ClientStore`: qdrant-client, for a real Qdrant server (`--qdrant-url`); its `:memory:`
  mode stands in for the server API in tests when no server is reachable.

Replacing a page is `delete every point with this url` then `upsert the new points`,
in that order, confirmed before returning (server: one `batch_update_points` request
with `wait=True`; edge: every `update` is in the shard's write-ahead log when it returns,
which is what makes it durable; segments are flushed on close).
`vectors_for_url` reads one page's stored vectors (keyed by embedder and exact chunk
text) so that a changed page re-embeds only the chunks whose text is new;
`reuse_keys_for_urls` reads the same keys for many pages without their vectors, so a pass
can learn which texts pages leaving it hold and read vectors only where a new page needs
them.
Every point also carries a BM25 keyword vector (`sync.edges.keywords`), computed here from
its payload when it is written (so a page's keyword vectors are replaced with it, as one
unit), in a collection that has the sparse vector; an older collection without it is
written dense only until `add_keywords` (audit --fix) gives it one.
Every backend error is raised as `StoreError`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence

from .disk_space import (MIN_FREE_BYTES, MIN_FREE_ENV, full_error, min_free_default,  # noqa: F401 (MIN_FREE_*: read from here)
                         out_of_space, refuse_when_short)
from .aliasfile import resolve_alias
from .lease import Holder, iso, this_process
from ..errors import (CollectionMismatchError, ConfigError, PagesyncError, StateError, StateUnusableError,
                     StoreError, StoreFullError, StoreHeldError, StoreReadOnlyError, StoreUnavailableError)
from chunking.split import embedded_text

from ..core.hashing import reuse_key
from ..core.secrets import public_url, url_secrets
from ..core.secrets import redact as _redact
from .keywords import SPARSE_VECTOR, Sparse, document_vector

try:
    import fcntl
except ImportError:  # not POSIX: no advisory lock, Qdrant Edge's own WAL lock only
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "StoredPoint",
    "PageWrite",
    "Store",
    "EdgeStore",
    "ClientStore",
    "INDEXED_FIELDS",
    "redact",
    "qdrant_boundary",
    "RetryingClient",
    "SEARCH_MODES",
    "KEYWORD_FIELDS",
]

INDEXED_FIELDS = ("url", "content_hash")
_NOT_WRITABLE = ("Permission denied (os error 13)", "Read-only file system (os error 30)",
                 "Operation not permitted (os error 1)")  # Qdrant Edge's words for EACCES, EROFS, EPERM
SHARD_LOCK = "pagesync.lock"  # in the shard directory: taken before Qdrant Edge touches a segment
_COLLECTION_RE = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")


SEARCH_MODES = ("hybrid", "dense", "keyword")
KEYWORD_FIELDS = ("text", "title", "headings")  # what `keyword_text` reads
PREFETCH_MIN = 50  # candidates each side of a hybrid search brings to the fusion (at least)
RRF_K = 60  # reciprocal rank fusion's constant (Qdrant's default)


@dataclass
class StoredPoint:
    id: str
    payload: dict[str, Any]
    vector: list[float] | None = None
    sparse: Sparse | None = None  # the keyword vector; None: computed from the payload on write


def _keywords_of(p: StoredPoint) -> Sparse:
    return p.sparse if p.sparse is not None else document_vector(p.payload)


def _split_vectors(vec: Any) -> tuple[list[float] | None, Sparse | None]:
    """(dense, keyword vector) of a record's vector: a bare list, or a named-vectors dict."""
    if not isinstance(vec, dict):
        return (list(vec) if vec is not None else None), None
    dense, sparse = vec.get(""), vec.get(SPARSE_VECTOR)
    kw = Sparse(tuple(sparse.indices), tuple(sparse.values)) if sparse is not None else None
    return (list(dense) if dense is not None else None), kw


def _prefetch(limit: int) -> int:
    return max(PREFETCH_MIN, 4 * limit)


@dataclass
class PageWrite:
    """All of one page's new points: the unit a replace writes."""

    url: str
    points: list[StoredPoint] = field(default_factory=list)


class Store(Protocol):
    collection: str

    def ensure_collection(self, dimension: int) -> None:
        """Create the collection (cosine, payload indexes) or check an existing one fits."""

    def exists(self) -> bool: ...

    def replace_pages(self, pages: Sequence[PageWrite]) -> int:
        """For each page: delete all its points, insert the new ones. Returns points deleted."""

    def delete_pages(self, urls: Sequence[str]) -> int:
        """Delete every point of these urls. Returns points deleted."""

    def upsert(self, points: Sequence[StoredPoint]) -> None: ...

    def scroll(self, *, with_vectors: bool = False, batch: int = 256,
               payload_fields: Sequence[str] | None = None) -> Iterator[StoredPoint]:
        """Every point, in pages of `batch`; only `payload_fields` of the payload when given."""

    def scroll_payloads(self, fields: Sequence[str], *, batch: int = 1024) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        """Every point's id and `fields` of its payload, no vectors: one list of
        `(id, payload)` per page of `batch` points. The lean read for whole-collection
        scans (the audit): no `StoredPoint` and no payload copy per point. A point
        without those fields has an empty payload dict. No collection: nothing."""

    def delete_points(self, ids: Sequence[str]) -> None:
        """Delete points by id (audit repairs)."""

    def set_payloads(self, items: Sequence[tuple[Any, dict[str, Any]]]) -> None:
        """For each `(point id, fields)`: set those payload fields on that point, its other
        fields and its vector kept (audit repairs of a point's `metadata`: nothing embedded)."""

    def vectors_for_url(self, url: str, *, embedder: str | None = None) -> dict[str, list[float]]:
        """The vectors of one url's points, keyed by `reuse_key(payload embedder, payload text)`.

        Only that url's points are read (through the url index), with just the `text` and
        `embedder` payload fields; with `embedder`, only points that embedder made. Points
        without a text or an embedder name are left out. No collection: empty, nothing created.
        """

    def reuse_keys_for_urls(self, urls: Sequence[str], *, embedder: str | None = None) -> Iterator[tuple[str, str]]:
        """`(reuse key, url)` of every point of these urls, no vectors (optional: read with
        hasattr by the engine). Through the url index, `text`, `embedder` and `url` payload
        fields only; with `embedder`, only that embedder's points; points without a text or
        an embedder name are left out. No collection: nothing, nothing created.
        """

    def count(self, url: str | None = None) -> int: ...

    # Optional (read with getattr by sync.commands.checks): `vector_size() -> int | None`, the
    # collection's vector size (None: no collection), and `location`, where it lives.

    def search(self, vector: Sequence[float] | None, limit: int = 5, *, keywords: Sparse | None = None,
               mode: str = "dense") -> list[tuple[float, dict[str, Any]]]:
        """The `limit` nearest points: `dense` by `vector`, `keyword` by `keywords` (BM25),
        `hybrid` both fused by reciprocal rank. Keyword modes need `has_keywords()`."""

    def has_keywords(self) -> bool:
        """The collection has the keyword (sparse) vector; False when it has none or is missing."""

    def keywords_missing(self) -> int:
        """Points without a keyword vector (every point when the collection lacks it)."""

    def add_keywords(self) -> int:
        """Give the collection the keyword vector and every point lacking one its vector, from
        its stored payload (nothing fetched or embedded; dense vectors kept). Returns points set."""

    def close(self) -> None: ...


REUSE_FIELDS = ("text", "embedder", "headings")
KEY_FIELDS = ("url", "text", "embedder", "headings")
URLS_PER_READ = 256  # urls in one `reuse_keys_for_urls` filter (one request each on a server)


class _PagedScroll:
    """`scroll` and `scroll_payloads` for a store whose `_pages(with_payload, with_vectors,
    batch)` yields the collection's records a page at a time (Edge's and qdrant-client's
    records have the same shape: id, payload, vector)."""

    def _pages(self, with_payload: list[str] | bool, with_vectors: bool, batch: int) -> Iterator[list[Any]]:
        raise NotImplementedError

    def scroll(self, *, with_vectors: bool = False, batch: int = 256,
               payload_fields: Sequence[str] | None = None) -> Iterator[StoredPoint]:
        with_payload = list(payload_fields) if payload_fields is not None else True
        for recs in self._pages(with_payload, with_vectors, batch):
            for r in recs:
                dense, kw = _split_vectors(r.vector) if with_vectors else (None, None)
                yield StoredPoint(str(r.id), dict(r.payload or {}), dense, kw)

    def scroll_payloads(self, fields: Sequence[str], *, batch: int = 1024) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        # Payloads are handed out uncopied (callers only read them). Ids come as UUID, str or int.
        for recs in self._pages(list(fields), False, batch):
            yield [(str(r.id), r.payload or {}) for r in recs]


def _reuse_entry(payload: Any, vector: Any) -> tuple[str, list[float]] | None:
    """(reuse key, vector) of one stored point, or None when it cannot be reused."""
    if isinstance(vector, dict):
        vector = vector.get("")
    if not payload or vector is None:
        return None
    text, embedder = _embedded_of(payload), payload.get("embedder")
    if not isinstance(text, str) or not isinstance(embedder, str):
        return None
    return reuse_key(embedder, text), list(vector)


def _embedded_of(payload: Any) -> str | None:
    """What the point's vector was embedded from: its heading path and text
    (`chunking.embedded_text`); the text alone for a point without `headings`."""
    text, headings = payload.get("text"), payload.get("headings")
    if not isinstance(text, str):
        return None
    if isinstance(headings, list) and all(isinstance(h, str) for h in headings):
        return embedded_text(text, headings)
    return text


def _reuse_key_of(payload: Any) -> tuple[str, str] | None:
    """(reuse key, url) of one stored point's payload, or None when it cannot be reused."""
    if not payload:
        return None
    text, embedder, url = _embedded_of(payload), payload.get("embedder"), payload.get("url")
    if not isinstance(text, str) or not isinstance(embedder, str) or not isinstance(url, str):
        return None
    return reuse_key(embedder, text), url


# What a Qdrant client must never print: its API key, and the userinfo of its URL.
Secrets = str | tuple[str, ...] | None


def redact(text: str, secret: str | Sequence[str | None] | None) -> str:
    """`text` with every form of the secret(s) a server or library may echo (as is,
    JSON-escaped, URL-encoded, repr'd, base64) and every URL's userinfo replaced by ***
    (`sync.core.secrets.redact`)."""
    return _redact(text, secret)


@contextlib.contextmanager
def qdrant_boundary(what: str, secret: Secrets, error: type[PagesyncError] = StoreError) -> Iterator[None]:
    """Map anything qdrant-client raises to one pagesync error, "<what> failed: <cause>",
    the secrets redacted (`redact`) and a server's answer said by its status and message,
    never its raw body (`_cause`). `from None`: the original may carry request headers
    (the key). Pagesync's own errors pass through unchanged."""
    try:
        yield
    except PagesyncError:
        raise
    except Exception as exc:
        cls = _UNAVAILABLE.get(error, error) if _unreachable(exc) else error
        raise cls(redact(f"{what} failed: {_cause(exc)}", secret)) from None


def _cause(exc: BaseException) -> str:
    """What went wrong, in one line: a server's answer as `HTTP 403 (Forbidden): <its
    status.error>` (at most 200 characters of it, never the raw body qdrant-client's
    message quotes), anything else as its message."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    if not isinstance(exc, UnexpectedResponse):
        return " ".join(str(exc).split()) or type(exc).__name__
    said = ""
    try:
        body = json.loads(exc.content)
        status = body.get("status") if isinstance(body, dict) else None
        err = status.get("error") if isinstance(status, dict) else None
        said = err if isinstance(err, str) else ""
    except (ValueError, TypeError):
        pass
    said = " ".join("".join(c if c.isprintable() else " " for c in said).split())[:200]
    head = f"HTTP {exc.status_code} ({exc.reason_phrase or 'unrecognised status'})"
    return f"{head}: {said}" if said else head


# An error of the server's reach, not of one operation: a configuration/environment error (exit 2).
_UNAVAILABLE: dict[type, type[PagesyncError]] = {StoreError: StoreUnavailableError, StateError: StateUnusableError}


def _unreachable(exc: BaseException) -> bool:
    """The server does not answer (connection refused, DNS, timeout) or refuses the API key."""
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in (401, 403)
    return isinstance(exc, (ResponseHandlingException, httpx.TransportError, ConnectionError, TimeoutError))


def _write_size(points: Sequence[StoredPoint]) -> int:
    """Roughly what `points` take on disk: 4-byte floats, the chunk text and ~512 bytes of
    other payload (no JSON encoding: this runs on every write)."""
    return sum(4 * len(p.vector or ()) + len(str(p.payload.get("text", ""))) + 512 for p in points)


def _check_name(collection: str) -> None:
    if not _COLLECTION_RE.match(collection):
        raise ConfigError(f"invalid collection name {collection!r} (letters, digits, _ . - only)")


def _holder_record(reading: bool) -> bytes:
    """What the holder of a shard's lock writes in it: who (`sync.edges.lease.Holder`) and
    whether it only reads."""
    record = this_process(time.time()).to_dict()
    del record["token"], record["expires_at"]
    return json.dumps({**record, "reading": reading}, sort_keys=True).encode()


def _lock_holder(fd: int) -> tuple[Holder | None, bool]:
    """The holder a shard's lock file describes and whether it only reads; (None, False)
    when it describes none (released, just taken, or a pagesync from before the record)."""
    try:
        record = json.loads(os.pread(fd, 1000, 0) or b"null")
        return Holder.from_dict(record), record.get("reading") is True
    except (OSError, ValueError, TypeError, AttributeError):
        return None, False


def _who(holder: Holder) -> str:
    return f"host {holder.hostname}, pid {holder.pid}, since {iso(holder.started_at)}"


def _held_for_writing(path: Path, holder: Holder) -> str:
    return (f"embedded store ({path}) is open in another process for writing (a pagesync pass, import or "
            f"repair: {_who(holder)}); Qdrant Edge opens a shard in one process at a time: read it when "
            f"that process is done, or keep the collection on a Qdrant server (--qdrant-url) to read it while "
            f"passes run")


# ---------------------------------------------------------------------------------------
class EdgeStore(_PagedScroll):
    """Qdrant Edge shard at `<path>/<collection>/`, or at the shard an alias names.

    `collection` may be an alias kept in `<path>/aliases.json` (`sync.edges.aliasfile`, written
    by `pagesync reindex`): it is resolved each time the store is about to touch the disk
    and pinned while the shard is open (`resolve_alias=False`: the name is the directory).
    A shard can be open in one place at a time. Qdrant Edge locks its write-ahead log, but
    only after `EdgeShard.load` has mapped the segment files read-write and loaded them: a
    load attempt against a shard another process has open, even one that then fails with
    WouldBlock, races that process's writes and flushes and can lose points it wrote
    (reproduced by bench/kill_stress.py: a pass's pages gone while its state records them).
    So every opening first takes an exclusive lock on `<shard>/pagesync.lock` (flock,
    released by `close` or when the process dies), waited for up to `lock_wait` seconds,
    and only then loads or creates the shard; a shard whose WAL is still locked under that
    lock (a holder that is not pagesync) is refused at once, never load-polled.

    The holder of the lock describes itself in the lock file (host, pid, start, and whether
    it only reads). `reading=True` marks an opener that only reads (search, export, the
    read API): it waits, like any opener, while another reader holds the shard for a
    moment, but a shard held for writing (a pass, an import, a repair) is refused at once
    with one line: a pass holds it for minutes, and Qdrant Edge's Python API has no
    read-only opening that could read beside it.

    `search_threads` is the shard's `max_search_threads` (written to its config when it
    differs). Qdrant Edge runs reads (count, scroll, query) on that pool, one task per
    segment; the default of one thread keeps the per-page reads of a pass (the count
    before a delete, the stored vectors of a changed page) at tens of microseconds: with
    a pool of two on a busy two-core machine, one read in ten waited 2-5 ms for a pool
    thread (count median 0.15 ms against 0.03, bench/store_replace.py). A shard of
    one segment (what bulk loads make: Edge runs no background optimizer) searches no
    faster with more threads. `None`: Qdrant's default, one per CPU.
    """

    def __init__(self, path: str | Path, collection: str, *, resolve_alias: bool = True, lock_wait: float = 10.0,
                 search_threads: int | None = 1, min_free_bytes: int | None = None, reading: bool = False):
        _check_name(collection)
        self.collection = collection
        self.reading = reading
        self.min_free_bytes = min_free_default() if min_free_bytes is None else min_free_bytes  # see MIN_FREE_BYTES
        self.root = Path(path)
        self.lock_wait = lock_wait
        self.search_threads = search_threads
        self._resolve = resolve_alias
        self._pinned: Path | None = None
        # qdrant_edge is imported at the first open (a command that never opens the store does not
        # load it): the module and its EdgeShard are untyped to mypy, hence Any.
        self._shard: Any = None
        self._qe: Any = None
        self._lock_fd: int | None = None
        self._keywords: bool | None = None  # the open shard has the keyword vector (None: not read yet)

    @property
    def dir(self) -> Path:
        """The shard directory: the alias's target (as of now, or as opened)."""
        if self._pinned is not None:
            return self._pinned
        return self.root / (resolve_alias(self.root, self.collection) if self._resolve else self.collection)

    def _read_only(self, cause: object) -> StoreReadOnlyError:
        return StoreReadOnlyError(
            f"embedded store ({self.dir}) is not writable for this user ({cause}): Qdrant Edge opens a shard "
            f"read-write even to read it (it maps its files and locks its write-ahead log), so it cannot be used "
            f"in place; make it writable, or copy it somewhere writable and point --qdrant-path there")

    def _load(self, qe, path: Path):
        config = self._load_config(qe, path)
        try:
            return qe.EdgeShard.load(str(path), config)
        except Exception as exc:
            if any(sign in str(exc) for sign in _NOT_WRITABLE):
                raise self._read_only(exc) from None
            if "WouldBlock" not in str(exc):
                raise
            # Held, but not under pagesync.lock: another program (or a pagesync from before
            # the lock). Not polled: each attempt maps the held shard's segments read-write.
            raise StoreHeldError(f"embedded store ({path}) is open in another process or thread "
                                        f"(its write-ahead log is locked)") from None

    def _lock(self, path: Path) -> None:
        """Take `<path>/pagesync.lock` (exclusive), waiting up to `lock_wait` seconds, before
        anything opens the shard's files, and describe this holder in it; `_unlock` (from
        `close`) releases it. A reader meeting a writer is refused at once (class doc)."""
        if fcntl is None or self._lock_fd is not None:
            return
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path / SHARD_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and (path / "edge_config.json").exists():
                raise self._read_only(exc) from None  # a shard that is there, but not ours to write
            raise
        deadline = time.monotonic() + self.lock_wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder, reads = _lock_holder(fd)
                if self.reading and holder is not None and not reads:
                    os.close(fd)
                    raise StoreHeldError(_held_for_writing(path, holder)) from None
                if time.monotonic() >= deadline:
                    os.close(fd)
                    shown = f"{'a reader: ' if reads else ''}{_who(holder)}; " if holder is not None else ""
                    raise StoreHeldError(f"embedded store ({path}) is open in another process or thread "
                                         f"({shown}waited {self.lock_wait:g}s)") from None
                time.sleep(0.05)
            except BaseException:
                os.close(fd)
                raise
        with contextlib.suppress(OSError):  # the description is for others' messages only
            os.ftruncate(fd, 0)
            os.pwrite(fd, _holder_record(self.reading), 0)
        self._lock_fd = fd

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # released: no holder to describe (a crashed one's stays, and is overwritten)
            os.close(fd)  # closing the only descriptor releases the flock

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except (StoreError, ConfigError):
            raise
        except OSError as exc:  # a --qdrant-path that cannot hold a shard (missing, read-only, ...)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise self._full(what, exc) from exc
            raise StoreUnavailableError(f"embedded store ({self.dir}): {what} failed: {exc}") from exc
        except Exception as exc:
            if out_of_space(exc):  # Qdrant Edge's own I/O errors
                raise self._full(what, exc) from exc
            raise StoreError(f"embedded store ({self.dir}): {what} failed: {exc}") from exc

    def _full(self, what: str, exc: BaseException) -> StoreFullError:
        return full_error(f"embedded store ({self.dir})", what, exc)

    def _check_space(self, what: str, nbytes: int = 0) -> None:
        refuse_when_short(self.dir, self.min_free_bytes, f"embedded store ({self.dir})", what, nbytes)

    def exists(self) -> bool:
        return (self.dir / "edge_config.json").exists()

    def _load_config(self, qe, path: Path):
        """The config to load the shard with: None (as persisted) unless its search pool
        size differs from `search_threads`; then the persisted vector params plus that size
        (Qdrant Edge checks them against the segments and rewrites edge_config.json)."""
        try:
            cfg = json.loads((path / "edge_config.json").read_text())
            vec = cfg["vectors"][""]
            size, distance = int(vec["size"]), getattr(qe.Distance, str(vec["distance"]))
        except (OSError, KeyError, ValueError, TypeError, AttributeError):
            return None
        if self.search_threads is None or cfg.get("max_search_threads") == self.search_threads:
            return None  # None: whatever the shard has
        return qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=size, distance=distance),
                             max_search_threads=self.search_threads)

    def _config_size(self) -> int | None:
        try:
            cfg = json.loads((self.dir / "edge_config.json").read_text())
            return int(cfg["vectors"][""]["size"])
        except (OSError, KeyError, ValueError, TypeError):
            return None

    def has_keywords(self) -> bool:
        """From the shard's config file (the shard is not opened); known while it is open."""
        if self._keywords is not None:
            return self._keywords
        try:
            cfg = json.loads((self.dir / "edge_config.json").read_text())
            found = SPARSE_VECTOR in (cfg.get("sparse_vectors") or {})
        except (OSError, ValueError, TypeError, AttributeError):
            return False
        if self._shard is not None:
            self._keywords = found
        return found

    @property
    def location(self) -> str:
        return str(self.root)

    def vector_size(self) -> int | None:
        """The collection's vector size, from its config file (the shard is not opened)."""
        return self._config_size()

    def _check_size(self, dimension: int) -> None:
        size = self._config_size()
        if size is not None and size != dimension:
            raise CollectionMismatchError(
                f"collection {self.collection!r} holds {size}-dimensional vectors but the "
                f"embedder makes {dimension}; use another --collection or reindex"
            )

    def _open(self, dimension: int | None = None):
        if self._shard is not None:
            if dimension is not None:
                self._check_size(dimension)
            return self._shard
        import qdrant_edge as qe

        self._qe = qe
        self._pinned = self.dir  # one resolution of the alias for this opening
        try:
            return self._open_pinned(qe, dimension)
        finally:
            if self._shard is None:
                self._pinned = None
                self._unlock()

    def _open_pinned(self, qe, dimension: int | None):
        with self._guard("open"):
            if dimension is None and not self.exists():
                raise StoreError(f"collection {self.collection!r} does not exist at {self.dir}")
            self._lock(self.dir)
            if self.exists():  # asked again under the lock: another process may have created it
                if dimension is not None:
                    self._check_size(dimension)
                self._shard = self._load(qe, self.dir)
            else:
                if dimension is None:
                    raise StoreError(f"collection {self.collection!r} does not exist at {self.dir}")
                self._check_space("create")
                self.dir.mkdir(parents=True, exist_ok=True)
                cfg = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine),
                                    sparse_vectors={SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
                                    max_search_threads=self.search_threads)
                self._shard = qe.EdgeShard.create(str(self.dir), cfg)
                for name in INDEXED_FIELDS:
                    self._shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        return self._shard

    def ensure_collection(self, dimension: int) -> None:
        # An existing shard is checked from its config file and opened only when a pass
        # first reads or writes it: opening loads the shard (GBs at a million points), and
        # a pass with nothing to write should not pay for that.
        if self._shard is None and self.exists():
            self._check_size(dimension)
            return
        self._open(dimension)

    def _url_filter(self, url: str):
        qe = self._qe
        return qe.Filter(must=[qe.FieldCondition(key="url", match=qe.MatchValue(url))])

    def _points(self, points: Sequence[StoredPoint]):
        qe = self._qe
        if not self.has_keywords():
            return [qe.Point(id=p.id, vector=list(p.vector or []), payload=p.payload) for p in points]
        out = []
        for p in points:
            kw = _keywords_of(p)
            out.append(qe.Point(id=p.id, payload=p.payload, vector={
                "": list(p.vector or []), SPARSE_VECTOR: qe.SparseVector(list(kw.indices), list(kw.values))}))
        return out

    def _delete_url(self, url: str) -> int:
        shard, qe = self._shard, self._qe
        f = self._url_filter(url)
        n = shard.count(qe.CountRequest(exact=True, filter=f))
        if n:
            shard.update(qe.UpdateOperation.delete_points_by_filter(f))
        return n

    def replace_pages(self, pages: Sequence[PageWrite]) -> int:
        shard = self._open()
        self._check_space("replace", sum(_write_size(p.points) for p in pages))
        deleted = 0
        with self._guard("replace"):
            for page in pages:
                # Delete first, then insert: ids are stable, so an insert-then-delete-by-url
                # would delete the new points too. Both steps are in the WAL before returning.
                deleted += self._delete_url(page.url)
                if page.points:
                    shard.update(self._qe.UpdateOperation.upsert_points(self._points(page.points)))
        return deleted

    def delete_pages(self, urls: Sequence[str]) -> int:
        if not self.exists():
            return 0
        self._open()
        self._check_space("delete")  # a delete is appended to the write-ahead log first
        with self._guard("delete"):
            deleted = sum(self._delete_url(u) for u in urls)
        return deleted

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        shard = self._open()
        with self._guard("upsert"):
            for i in range(0, len(points), 512):
                self._check_space("upsert", _write_size(points[i : i + 512]))
                shard.update(self._qe.UpdateOperation.upsert_points(self._points(points[i : i + 512])))

    def _pages(self, with_payload: list[str] | bool, with_vectors: bool, batch: int) -> Iterator[list[Any]]:
        """The collection's records, one list per page of `batch` (nothing without a collection)."""
        if not self.exists():
            return
        shard = self._open()
        qe = self._qe
        offset = None
        while True:
            with self._guard("scroll"):
                recs, offset = shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=batch, with_payload=with_payload, with_vector=with_vectors)
                )
            yield recs
            if offset is None:
                return

    def _where_url(self, match: Any, embedder: str | None) -> list[Any]:
        """Conditions: the `url` matches (one value or any of several), and the embedder when given."""
        qe = self._qe
        must = [qe.FieldCondition(key="url", match=match)]
        if embedder is not None:
            must.append(qe.FieldCondition(key="embedder", match=qe.MatchValue(embedder)))
        return must

    def _scroll_where(self, must: list[Any], fields: Sequence[str], *, vectors: bool, limit: int,
                      what: str) -> Iterator[Any]:
        """The records meeting every condition of `must`, read a page of `limit` at a time."""
        shard, qe = self._open(), self._qe
        offset = None
        while True:
            with self._guard(what):
                recs, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=limit, filter=qe.Filter(must=must),
                                                             with_payload=list(fields), with_vector=vectors))
            yield from recs
            if offset is None:
                return

    def vectors_for_url(self, url: str, *, embedder: str | None = None) -> dict[str, list[float]]:
        if not self.exists():
            return {}
        self._open()  # loads the engine module (`_qe`) the conditions are made of
        out: dict[str, list[float]] = {}
        for r in self._scroll_where(self._where_url(self._qe.MatchValue(url), embedder), REUSE_FIELDS,
                                    vectors=True, limit=256, what="read vectors"):
            entry = _reuse_entry(r.payload, r.vector)
            if entry is not None:
                out[entry[0]] = entry[1]
        return out

    def reuse_keys_for_urls(self, urls: Sequence[str], *, embedder: str | None = None) -> Iterator[tuple[str, str]]:
        if not urls or not self.exists():
            return
        self._open()
        for i in range(0, len(urls), URLS_PER_READ):
            must = self._where_url(self._qe.MatchAny(list(urls[i : i + URLS_PER_READ])), embedder)
            for r in self._scroll_where(must, KEY_FIELDS, vectors=False, limit=1024, what="read reuse keys"):
                entry = _reuse_key_of(r.payload)
                if entry is not None:
                    yield entry

    def delete_points(self, ids: Sequence[str]) -> None:
        if not ids or not self.exists():
            return
        shard = self._open()
        self._check_space("delete points")
        with self._guard("delete points"):
            for i in range(0, len(ids), 1024):
                shard.update(self._qe.UpdateOperation.delete_points(list(ids[i : i + 1024])))

    def set_payloads(self, items: Sequence[tuple[Any, dict[str, Any]]]) -> None:
        if not items or not self.exists():
            return
        shard = self._open()
        set_payload = self._qe.UpdateOperation.set_payload
        for i in range(0, len(items), 512):
            part = items[i : i + 512]
            # Each grows the write-ahead log by a few hundred bytes (a `metadata` object).
            self._check_space("set payload", 512 * len(part))
            with self._guard("set payload"):
                for pid, fields in part:  # one operation a point: each point's fields differ
                    shard.update(set_payload([pid], fields))

    def is_empty(self) -> bool | None:
        """Missing or without points: True/False when known cheaply, None when only loading
        the shard would tell (a pass does not load a large shard just for this; audit does)."""
        if not self.exists():
            return True
        if self._shard is None:
            return None
        return self.count() == 0

    def count_if_open(self) -> int | None:
        """The exact point count when the shard is loaded already, else None: a pass does
        not load a shard only to count it (a pass with nothing to write never opens it)."""
        return self.count() if self._shard is not None else None

    def count(self, url: str | None = None) -> int:
        if not self.exists():
            return 0
        shard = self._open()
        with self._guard("count"):
            f = self._url_filter(url) if url is not None else None
            return shard.count(self._qe.CountRequest(exact=True, filter=f))

    def search(self, vector: Sequence[float] | None, limit: int = 5, *, keywords: Sparse | None = None,
               mode: str = "dense") -> list[tuple[float, dict[str, Any]]]:
        shard = self._open()
        qe = self._qe
        dense = qe.Query.Nearest(list(vector or []))
        kw = qe.Query.Nearest(qe.SparseVector(list(keywords.indices), list(keywords.values)),
                              using=SPARSE_VECTOR) if keywords is not None else None
        if mode == "dense" or kw is None:
            request = qe.QueryRequest(limit=limit, query=dense, with_payload=True)
        elif mode == "keyword":
            request = qe.QueryRequest(limit=limit, query=kw, with_payload=True)
        else:
            n = _prefetch(limit)
            request = qe.QueryRequest(limit=limit, prefetches=[qe.Prefetch(limit=n, query=dense),
                                                               qe.Prefetch(limit=n, query=kw)],
                                      query=qe.Fusion.Rrf(k=RRF_K), with_payload=True)
        with self._guard("search"):
            hits = shard.query(request)
        return [(h.score, dict(h.payload or {})) for h in hits]

    def keywords_missing(self) -> int:
        if not self.exists():
            return 0
        if not self.has_keywords():
            return self.count()
        shard, qe = self._open(), self._qe
        with self._guard("count"):
            return shard.count(qe.CountRequest(exact=True, filter=self._without_keywords()))

    def _without_keywords(self):
        qe = self._qe
        return qe.Filter(must_not=[qe.HasVectorCondition(SPARSE_VECTOR)])

    def add_keywords(self) -> int:
        if not self.exists():
            return 0
        shard, qe = self._open(), self._qe
        self._check_space("add keyword vectors")
        with self._guard("add keyword vectors"):
            if not self.has_keywords():
                shard.update(qe.UpdateOperation.create_sparse_vector(SPARSE_VECTOR, modifier=qe.Modifier.Idf))
                self._keywords = True
        done, offset = 0, None
        while True:  # only points still without one: a repair cut short resumes where it was
            with self._guard("read texts"):
                recs, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=512, filter=self._without_keywords(),
                                                             with_payload=list(KEYWORD_FIELDS), with_vector=False))
            if not recs:
                return done
            self._check_space("add keyword vectors", 64 * len(recs))
            with self._guard("add keyword vectors"):
                ops = []
                for r in recs:
                    kw = document_vector(r.payload or {})
                    ops.append(qe.PointVectors(r.id, {SPARSE_VECTOR: qe.SparseVector(list(kw.indices), list(kw.values))}))
                shard.update(qe.UpdateOperation.update_vectors(ops))
            done += len(recs)
            if offset is None:
                return done

    def close(self) -> None:
        if self._shard is not None:
            try:
                with self._guard("close"):
                    self._shard.flush()
                    self._shard.close()
            finally:
                self._shard = None
                self._pinned = None
                self._keywords = None
                self._unlock()


# ---------------------------------------------------------------------------------------
def _transient(exc: BaseException) -> bool:
    """Worth another try: connection trouble, timeouts, 429 and 502-504 answers."""
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in (429, 502, 503, 504)
    return isinstance(exc, (ResponseHandlingException, httpx.TransportError, ConnectionError, TimeoutError))


class RetryingClient:
    """Wraps a QdrantClient: every call is retried on transient errors with backoff.

    Safe because every call pagesync makes is idempotent (upserts of fixed ids, deletes
    by filter or id, reads), so a request that did land and is sent again changes nothing.
    """

    def __init__(self, client: Any, *, tries: int = 4, backoff: float = 0.5, sleep=None):
        import time

        self._client, self._tries, self._backoff = client, tries, backoff
        self._sleep = sleep or time.sleep

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            for attempt in range(self._tries):
                try:
                    return attr(*args, **kwargs)
                except Exception as exc:
                    if attempt == self._tries - 1 or not _transient(exc):
                        raise
                    self._sleep(self._backoff * 2**attempt)

        return call


class ClientStore(_PagedScroll):
    """A collection on a Qdrant server (or qdrant-client's `:memory:` mode) via qdrant-client."""

    def __init__(self, client: Any, collection: str, *, api_key: Secrets = None):
        _check_name(collection)
        self.client = client
        self.collection = collection
        self._secret = api_key
        self._keywords: bool | None = None  # the collection has the keyword vector (None: not asked yet)

    @classmethod
    def connect(cls, url: str, collection: str, *, api_key: str | None = None, timeout: int = 30) -> "ClientStore":
        from qdrant_client import QdrantClient

        if url == ":memory:":
            return cls(QdrantClient(location=":memory:"), collection)
        # The URL's userinfo is a secret like the key: never in a message (`Secrets`).
        secrets = tuple(s for s in (api_key, *url_secrets(url)) if s)
        try:
            # No version probe: it costs a round trip and prints a warning when the server is down.
            client = QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)
        except Exception as exc:
            raise ConfigError(redact(f"bad Qdrant URL {public_url(url)!r}: {_cause(exc)}", secrets)) from None
        store = cls(RetryingClient(client), collection, api_key=secrets or None)
        store.url = public_url(url)
        return store

    def _guard(self, what: str):
        at = f" at {self.url}" if self.url else ""
        return qdrant_boundary(f"Qdrant {what} on {self.collection!r}{at}", self._secret)

    def exists(self) -> bool:
        with self._guard("collection check"):
            return self.client.collection_exists(self.collection)

    url: str | None = None  # the server's, when connected by URL

    @property
    def location(self) -> str:
        return f"the Qdrant server at {self.url}" if self.url else "Qdrant"

    def has_keywords(self) -> bool:
        """Asked once (one request), then remembered: only a repair adds the vector."""
        if self._keywords is None:
            with self._guard("collection check"):
                if not self.client.collection_exists(self.collection):
                    return False
                sparse = self.client.get_collection(self.collection).config.params.sparse_vectors or {}
            self._keywords = SPARSE_VECTOR in sparse
        return self._keywords

    def _point(self, p: StoredPoint, keywords: bool):
        from qdrant_client import models as m

        if not keywords:
            return m.PointStruct(id=p.id, vector=list(p.vector or []), payload=p.payload)
        kw = _keywords_of(p)
        return m.PointStruct(id=p.id, payload=p.payload, vector={
            "": list(p.vector or []), SPARSE_VECTOR: m.SparseVector(indices=list(kw.indices), values=list(kw.values))})

    def vector_size(self) -> int | None:
        """The collection's vector size (None: no collection, or named vectors only)."""
        from qdrant_client import models as m

        with self._guard("collection check"):
            if not self.client.collection_exists(self.collection):
                return None
            params = self.client.get_collection(self.collection).config.params.vectors
        return params.size if isinstance(params, m.VectorParams) else None

    def ensure_collection(self, dimension: int) -> None:
        from qdrant_client import models as m

        with self._guard("create collection"):
            if self.client.collection_exists(self.collection):
                params = self.client.get_collection(self.collection).config.params.vectors
                size = params.size if isinstance(params, m.VectorParams) else None
                if size != dimension:
                    raise CollectionMismatchError(
                        f"collection {self.collection!r} holds vectors of size {size} but the "
                        f"embedder makes {dimension}; use another --collection or reindex"
                    )
            else:
                self.client.create_collection(
                    self.collection, vectors_config=m.VectorParams(size=dimension, distance=m.Distance.COSINE),
                    sparse_vectors_config={SPARSE_VECTOR: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                )
                self._keywords = True
            for name in INDEXED_FIELDS:
                self.client.create_payload_index(self.collection, name, m.PayloadSchemaType.KEYWORD, wait=True)

    @staticmethod
    def _url_filter(url: str):
        from qdrant_client import models as m

        return m.Filter(must=[m.FieldCondition(key="url", match=m.MatchValue(value=url))])

    def _count_url(self, url: str) -> int:
        return self.client.count(self.collection, count_filter=self._url_filter(url), exact=True).count

    def replace_pages(self, pages: Sequence[PageWrite]) -> int:
        from qdrant_client import models as m

        ops: list[Any] = []
        deleted = 0
        keywords = self.has_keywords() if any(page.points for page in pages) else False
        with self._guard("replace"):
            for page in pages:
                deleted += self._count_url(page.url)
                # Order inside the one request: delete the page's points, then insert.
                ops.append(m.DeleteOperation(delete=m.FilterSelector(filter=self._url_filter(page.url))))
                if page.points:
                    ops.append(
                        m.UpsertOperation(
                            upsert=m.PointsList(points=[self._point(p, keywords) for p in page.points])
                        )
                    )
            if ops:
                self.client.batch_update_points(self.collection, update_operations=ops, wait=True)
        return deleted

    def delete_pages(self, urls: Sequence[str]) -> int:
        from qdrant_client import models as m

        with self._guard("delete"):
            if not self.client.collection_exists(self.collection):
                return 0
            deleted = sum(self._count_url(u) for u in urls)
            ops = [m.DeleteOperation(delete=m.FilterSelector(filter=self._url_filter(u))) for u in urls]
            if ops:
                self.client.batch_update_points(self.collection, update_operations=ops, wait=True)
        return deleted

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        keywords = self.has_keywords() if points else False
        with self._guard("upsert"):
            for i in range(0, len(points), 256):
                part = points[i : i + 256]
                self.client.upsert(self.collection, points=[self._point(p, keywords) for p in part], wait=True)

    def _pages(self, with_payload: list[str] | bool, with_vectors: bool, batch: int) -> Iterator[list[Any]]:
        """The collection's records, one list per page of `batch` (nothing without a collection)."""
        if not self.exists():
            return
        offset = None
        while True:
            with self._guard("scroll"):
                recs, offset = self.client.scroll(
                    self.collection, limit=batch, offset=offset, with_payload=with_payload, with_vectors=with_vectors
                )
            yield recs
            if offset is None:
                return

    def vectors_for_url(self, url: str, *, embedder: str | None = None) -> dict[str, list[float]]:
        from qdrant_client import models as m

        if not self.exists():
            return {}
        # Filtered by url only (indexed): a server in strict mode refuses filters on fields
        # without an index, such as `embedder`; that one is checked here instead.
        url_only = m.Filter(must=[m.FieldCondition(key="url", match=m.MatchValue(value=url))])
        out: dict[str, list[float]] = {}
        offset = None
        while True:
            with self._guard("read vectors"):
                recs, offset = self.client.scroll(self.collection, scroll_filter=url_only, limit=256,
                                                  offset=offset, with_payload=list(REUSE_FIELDS), with_vectors=True)
            for r in recs:
                if embedder is not None and (r.payload or {}).get("embedder") != embedder:
                    continue
                entry = _reuse_entry(r.payload, r.vector)
                if entry is not None:
                    out[entry[0]] = entry[1]
            if offset is None:
                return out

    def reuse_keys_for_urls(self, urls: Sequence[str], *, embedder: str | None = None) -> Iterator[tuple[str, str]]:
        from qdrant_client import models as m

        if not urls or not self.exists():
            return
        for i in range(0, len(urls), URLS_PER_READ):
            # By url only (indexed), as in vectors_for_url: the embedder is checked here.
            f = m.Filter(must=[m.FieldCondition(key="url", match=m.MatchAny(any=list(urls[i : i + URLS_PER_READ])))])
            offset = None
            while True:
                with self._guard("read reuse keys"):
                    recs, offset = self.client.scroll(self.collection, scroll_filter=f, limit=1024, offset=offset,
                                                      with_payload=list(KEY_FIELDS), with_vectors=False)
                for r in recs:
                    if embedder is not None and (r.payload or {}).get("embedder") != embedder:
                        continue
                    entry = _reuse_key_of(r.payload)
                    if entry is not None:
                        yield entry
                if offset is None:
                    break

    def delete_points(self, ids: Sequence[str]) -> None:
        from qdrant_client import models as m

        if not ids:
            return
        with self._guard("delete points"):
            for i in range(0, len(ids), 1024):
                self.client.delete(self.collection, points_selector=m.PointIdsList(points=list(ids[i : i + 1024])), wait=True)

    def set_payloads(self, items: Sequence[tuple[Any, dict[str, Any]]]) -> None:
        from qdrant_client import models as m

        with self._guard("set payload"):
            for i in range(0, len(items), 256):  # one request of 256 operations
                ops = [m.SetPayloadOperation(set_payload=m.SetPayload(payload=fields, points=[pid]))
                       for pid, fields in items[i : i + 256]]
                self.client.batch_update_points(self.collection, update_operations=ops, wait=True)

    def is_empty(self) -> bool | None:
        """Missing or without points (one existence check and one count on the server)."""
        return self.count() == 0

    def count_if_open(self) -> int | None:
        """The exact point count: one request, always cheap on a server."""
        return self.count()

    def count(self, url: str | None = None) -> int:
        with self._guard("count"):
            if not self.client.collection_exists(self.collection):
                return 0
            f = self._url_filter(url) if url is not None else None
            return self.client.count(self.collection, count_filter=f, exact=True).count

    def search(self, vector: Sequence[float] | None, limit: int = 5, *, keywords: Sparse | None = None,
               mode: str = "dense") -> list[tuple[float, dict[str, Any]]]:
        from qdrant_client import models as m

        kw = m.SparseVector(indices=list(keywords.indices), values=list(keywords.values)) if keywords else None
        with self._guard("search"):
            if mode == "dense" or kw is None:
                res = self.client.query_points(self.collection, query=list(vector or []), limit=limit, with_payload=True)
            elif mode == "keyword":
                res = self.client.query_points(self.collection, query=kw, using=SPARSE_VECTOR, limit=limit,
                                               with_payload=True)
            else:
                n = _prefetch(limit)
                res = self.client.query_points(
                    self.collection, prefetch=[m.Prefetch(query=list(vector or []), limit=n),
                                               m.Prefetch(query=kw, using=SPARSE_VECTOR, limit=n)],
                    query=m.RrfQuery(rrf=m.Rrf(k=RRF_K)), limit=limit, with_payload=True)
        return [(p.score, dict(p.payload or {})) for p in res.points]

    def keywords_missing(self) -> int:
        from qdrant_client import models as m

        if not self.has_keywords():
            return self.count()
        with self._guard("count"):
            return self.client.count(self.collection, exact=True, count_filter=m.Filter(
                must_not=[m.HasVectorCondition(has_vector=SPARSE_VECTOR)])).count

    def add_keywords(self) -> int:
        from qdrant_client import models as m

        if not self.exists():
            return 0
        if not self.has_keywords():
            with self._guard("add keyword vectors"):
                self.client.create_vector_name(self.collection, SPARSE_VECTOR, m.SparseVectorNameConfig(
                    sparse=m.SparseVectorConfig(modifier=m.Modifier.IDF)), wait=True)
            self._keywords = True
        without = m.Filter(must_not=[m.HasVectorCondition(has_vector=SPARSE_VECTOR)])
        done, offset = 0, None
        while True:  # only points still without one: a repair cut short resumes where it was
            with self._guard("read texts"):
                recs, offset = self.client.scroll(self.collection, scroll_filter=without, limit=256, offset=offset,
                                                  with_payload=list(KEYWORD_FIELDS), with_vectors=False)
            if not recs:
                return done
            vectors = []
            for r in recs:
                kw = document_vector(r.payload or {})
                vectors.append(m.PointVectors(id=r.id, vector={
                    SPARSE_VECTOR: m.SparseVector(indices=list(kw.indices), values=list(kw.values))}))
            with self._guard("add keyword vectors"):
                self.client.update_vectors(self.collection, points=vectors, wait=True)
            done += len(recs)
            if offset is None:
                return done

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
