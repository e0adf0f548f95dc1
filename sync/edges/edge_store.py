"""The embedded store: a Qdrant Edge shard on disk, one directory per collection.

It composes the shard's lock (`sync.edges.shard_lock`), the reads of its config file
(`sync.edges.edge_config`) and the requests it sends (`sync.edges.edge_queries`); its
failures are mapped by `sync.edges.store_errors.edge_boundary`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Sequence

from ..errors import CollectionMismatchError, StoreError, StoreHeldError, StoreReadOnlyError
from .aliasfile import resolve_alias
from .disk_space import min_free_default, refuse_when_short
from .edge_config import CONFIG_FILE, config_has_keywords, config_vector_size, create_config, load_config
from .edge_queries import edge_points, keyword_vectors, search_request, url_filter, where_url, without_keywords
from .keywords import SPARSE_VECTOR, Sparse
from .point_records import PagedScroll, reuse_entry, reuse_key_of
from .shard_lock import ShardLock
from .store import INDEXED_FIELDS, KEY_FIELDS, KEYWORD_FIELDS, REUSE_FIELDS, URLS_PER_READ, PageWrite, StoredPoint
from .store import check_collection_name
from .store_errors import edge_boundary, read_only_error

__all__ = ["EdgeStore"]

_NOT_WRITABLE = (
    "Permission denied (os error 13)",
    "Read-only file system (os error 30)",
    "Operation not permitted (os error 1)",
)  # Qdrant Edge's words for EACCES, EROFS, EPERM


def _write_size(points: Sequence[StoredPoint]) -> int:
    """Roughly what `points` take on disk: 4-byte floats, the chunk text and ~512 bytes of
    other payload (no JSON encoding: this runs on every write)."""
    return sum(4 * len(p.vector or ()) + len(str(p.payload.get("text", ""))) + 512 for p in points)


class EdgeStore(PagedScroll):
    """Qdrant Edge shard at `<path>/<collection>/`, or at the shard an alias names.

    `collection` may be an alias kept in `<path>/aliases.json` (`sync.edges.aliasfile`, written
    by `pagesync reindex`): it is resolved each time the store is about to touch the disk
    and pinned while the shard is open (`resolve_alias=False`: the name is the directory).
    A shard can be open in one place at a time: every opening first takes the shard's
    `ShardLock` (which says why), waited for up to `lock_wait` seconds, and only then loads
    or creates the shard; a shard whose WAL is still locked under that lock (a holder that is
    not pagesync) is refused at once, never load-polled. `reading=True` marks an opener that
    only reads: a shard held for writing is refused at once with one line.

    `search_threads` is the shard's `max_search_threads` (written to its config when it
    differs). Qdrant Edge runs reads (count, scroll, query) on that pool, one task per
    segment; the default of one thread keeps the per-page reads of a pass (the count
    before a delete, the stored vectors of a changed page) at tens of microseconds: with
    a pool of two on a busy two-core machine, one read in ten waited 2-5 ms for a pool
    thread (count median 0.15 ms against 0.03, bench/store_replace.py). A shard of
    one segment (what bulk loads make: Edge runs no background optimizer) searches no
    faster with more threads. `None`: Qdrant's default, one per CPU.
    """

    def __init__(
        self,
        path: str | Path,
        collection: str,
        *,
        resolve_alias: bool = True,
        lock_wait: float = 10.0,
        search_threads: int | None = 1,
        min_free_bytes: int | None = None,
        reading: bool = False,
    ):
        check_collection_name(collection)
        self.collection = collection
        self.min_free_bytes = min_free_default() if min_free_bytes is None else min_free_bytes  # see MIN_FREE_BYTES
        self.root = Path(path)
        self.search_threads = search_threads
        self._resolve = resolve_alias
        self._pinned: Path | None = None
        self._shard_lock = ShardLock(reading=reading, wait=lock_wait)
        # qdrant_edge is imported at the first open (a command that never opens the store does not
        # load it): the module and its EdgeShard are untyped to mypy, hence Any.
        self._shard: Any = None
        self._qe: Any = None
        self._keywords: bool | None = None  # the open shard has the keyword vector (None: not read yet)

    @property
    def dir(self) -> Path:
        """The shard directory: the alias's target (as of now, or as opened)."""
        if self._pinned is not None:
            return self._pinned
        return self.root / (resolve_alias(self.root, self.collection) if self._resolve else self.collection)

    def _read_only(self, cause: object) -> StoreReadOnlyError:
        return read_only_error(self.dir, cause)

    def _load(self, qe, path: Path):
        config = load_config(qe, path, self.search_threads)
        try:
            return qe.EdgeShard.load(str(path), config)
        except Exception as exc:
            if any(sign in str(exc) for sign in _NOT_WRITABLE):
                raise self._read_only(exc) from None
            if "WouldBlock" not in str(exc):
                raise
            # Held, but not under pagesync.lock: another program (or a pagesync from before
            # the lock). Not polled: each attempt maps the held shard's segments read-write.
            raise StoreHeldError(
                f"embedded store ({path}) is open in another process or thread (its write-ahead log is locked)"
            ) from None

    def _guard(self, what: str):
        return edge_boundary(f"embedded store ({self.dir})", what)

    def _check_space(self, what: str, nbytes: int = 0) -> None:
        refuse_when_short(self.dir, self.min_free_bytes, f"embedded store ({self.dir})", what, nbytes)

    def exists(self) -> bool:
        return (self.dir / CONFIG_FILE).exists()

    def has_keywords(self) -> bool:
        """From the shard's config file (the shard is not opened); known while it is open."""
        if self._keywords is not None:
            return self._keywords
        found = config_has_keywords(self.dir)
        if self._shard is not None:
            self._keywords = found
        return found

    @property
    def location(self) -> str:
        return str(self.root)

    def vector_size(self) -> int | None:
        """The collection's vector size, from its config file (the shard is not opened)."""
        return config_vector_size(self.dir)

    def _check_size(self, dimension: int) -> None:
        size = self.vector_size()
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
                self._shard_lock.release()

    def _open_pinned(self, qe, dimension: int | None):
        with self._guard("open"):
            if dimension is None and not self.exists():
                raise StoreError(f"collection {self.collection!r} does not exist at {self.dir}")
            self._shard_lock.take(self.dir)
            if self.exists():  # asked again under the lock: another process may have created it
                if dimension is not None:
                    self._check_size(dimension)
                self._shard = self._load(qe, self.dir)
            else:
                if dimension is None:
                    raise StoreError(f"collection {self.collection!r} does not exist at {self.dir}")
                self._check_space("create")
                self.dir.mkdir(parents=True, exist_ok=True)
                self._shard = qe.EdgeShard.create(str(self.dir), create_config(qe, dimension, self.search_threads))
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

    def _points(self, points: Sequence[StoredPoint]):
        return edge_points(self._qe, points, self.has_keywords())

    def _delete_url(self, url: str) -> int:
        shard, qe = self._shard, self._qe
        f = url_filter(qe, url)
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

    def _scroll_where(
        self, must: list[Any], fields: Sequence[str], *, vectors: bool, limit: int, what: str
    ) -> Iterator[Any]:
        """The records meeting every condition of `must`, read a page of `limit` at a time."""
        shard, qe = self._open(), self._qe
        offset = None
        while True:
            with self._guard(what):
                recs, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset,
                        limit=limit,
                        filter=qe.Filter(must=must),
                        with_payload=list(fields),
                        with_vector=vectors,
                    )
                )
            yield from recs
            if offset is None:
                return

    def vectors_for_url(self, url: str, *, embedder: str | None = None) -> dict[str, list[float]]:
        if not self.exists():
            return {}
        self._open()  # loads the engine module (`_qe`) the conditions are made of
        out: dict[str, list[float]] = {}
        for r in self._scroll_where(
            where_url(self._qe, self._qe.MatchValue(url), embedder),
            REUSE_FIELDS,
            vectors=True,
            limit=256,
            what="read vectors",
        ):
            entry = reuse_entry(r.payload, r.vector)
            if entry is not None:
                out[entry[0]] = entry[1]
        return out

    def reuse_keys_for_urls(self, urls: Sequence[str], *, embedder: str | None = None) -> Iterator[tuple[str, str]]:
        if not urls or not self.exists():
            return
        self._open()
        for i in range(0, len(urls), URLS_PER_READ):
            must = where_url(self._qe, self._qe.MatchAny(list(urls[i : i + URLS_PER_READ])), embedder)
            for r in self._scroll_where(must, KEY_FIELDS, vectors=False, limit=1024, what="read reuse keys"):
                entry = reuse_key_of(r.payload)
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
            f = url_filter(self._qe, url) if url is not None else None
            return shard.count(self._qe.CountRequest(exact=True, filter=f))

    def search(
        self, vector: Sequence[float] | None, limit: int = 5, *, keywords: Sparse | None = None, mode: str = "dense"
    ) -> list[tuple[float, dict[str, Any]]]:
        shard = self._open()
        request = search_request(self._qe, vector, limit, keywords, mode)
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
            return shard.count(qe.CountRequest(exact=True, filter=without_keywords(qe)))

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
                recs, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset,
                        limit=512,
                        filter=without_keywords(qe),
                        with_payload=list(KEYWORD_FIELDS),
                        with_vector=False,
                    )
                )
            if not recs:
                return done
            self._check_space("add keyword vectors", 64 * len(recs))
            with self._guard("add keyword vectors"):
                shard.update(keyword_vectors(qe, recs))
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
                self._shard_lock.release()
