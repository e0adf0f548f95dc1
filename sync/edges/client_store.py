"""The client store: a collection on a Qdrant server (or qdrant-client's `:memory:` mode), via
qdrant-client, each call retried on transient errors (`RetryingClient`)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from ..core.secrets import public_url, url_secrets
from ..errors import CollectionMismatchError, ConfigError
from .keywords import SPARSE_VECTOR, Sparse, document_vector
from .point_records import PagedScroll, keywords_of, reuse_entry, reuse_key_of
from .store import (
    INDEXED_FIELDS,
    KEY_FIELDS,
    KEYWORD_FIELDS,
    REUSE_FIELDS,
    RRF_K,
    URLS_PER_READ,
    PageWrite,
    StoredPoint,
    check_collection_name,
    prefetch_size,
)
from .store_errors import Secrets, error_cause, is_transient, qdrant_boundary, redact

__all__ = ["RetryingClient", "ClientStore"]


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
                    if attempt == self._tries - 1 or not is_transient(exc):
                        raise
                    self._sleep(self._backoff * 2**attempt)

        return call


class ClientStore(PagedScroll):
    """A collection on a Qdrant server (or qdrant-client's `:memory:` mode) via qdrant-client."""

    def __init__(self, client: Any, collection: str, *, api_key: Secrets = None):
        check_collection_name(collection)
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
            raise ConfigError(redact(f"bad Qdrant URL {public_url(url)!r}: {error_cause(exc)}", secrets)) from None
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
        kw = keywords_of(p)
        return m.PointStruct(
            id=p.id,
            payload=p.payload,
            vector={
                "": list(p.vector or []),
                SPARSE_VECTOR: m.SparseVector(indices=list(kw.indices), values=list(kw.values)),
            },
        )

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
                    self.collection,
                    vectors_config=m.VectorParams(size=dimension, distance=m.Distance.COSINE),
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
                        m.UpsertOperation(upsert=m.PointsList(points=[self._point(p, keywords) for p in page.points]))
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
                recs, offset = self.client.scroll(
                    self.collection,
                    scroll_filter=url_only,
                    limit=256,
                    offset=offset,
                    with_payload=list(REUSE_FIELDS),
                    with_vectors=True,
                )
            for r in recs:
                if embedder is not None and (r.payload or {}).get("embedder") != embedder:
                    continue
                entry = reuse_entry(r.payload, r.vector)
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
                    recs, offset = self.client.scroll(
                        self.collection,
                        scroll_filter=f,
                        limit=1024,
                        offset=offset,
                        with_payload=list(KEY_FIELDS),
                        with_vectors=False,
                    )
                for r in recs:
                    if embedder is not None and (r.payload or {}).get("embedder") != embedder:
                        continue
                    entry = reuse_key_of(r.payload)
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
                self.client.delete(
                    self.collection, points_selector=m.PointIdsList(points=list(ids[i : i + 1024])), wait=True
                )

    def set_payloads(self, items: Sequence[tuple[Any, dict[str, Any]]]) -> None:
        from qdrant_client import models as m

        with self._guard("set payload"):
            for i in range(0, len(items), 256):  # one request of 256 operations
                ops = [
                    m.SetPayloadOperation(set_payload=m.SetPayload(payload=fields, points=[pid]))
                    for pid, fields in items[i : i + 256]
                ]
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

    def search(
        self, vector: Sequence[float] | None, limit: int = 5, *, keywords: Sparse | None = None, mode: str = "dense"
    ) -> list[tuple[float, dict[str, Any]]]:
        from qdrant_client import models as m

        kw = m.SparseVector(indices=list(keywords.indices), values=list(keywords.values)) if keywords else None
        with self._guard("search"):
            if mode == "dense" or kw is None:
                res = self.client.query_points(
                    self.collection, query=list(vector or []), limit=limit, with_payload=True
                )
            elif mode == "keyword":
                res = self.client.query_points(
                    self.collection, query=kw, using=SPARSE_VECTOR, limit=limit, with_payload=True
                )
            else:
                n = prefetch_size(limit)
                res = self.client.query_points(
                    self.collection,
                    prefetch=[
                        m.Prefetch(query=list(vector or []), limit=n),
                        m.Prefetch(query=kw, using=SPARSE_VECTOR, limit=n),
                    ],
                    query=m.RrfQuery(rrf=m.Rrf(k=RRF_K)),
                    limit=limit,
                    with_payload=True,
                )
        return [(p.score, dict(p.payload or {})) for p in res.points]

    def keywords_missing(self) -> int:
        from qdrant_client import models as m

        if not self.has_keywords():
            return self.count()
        with self._guard("count"):
            return self.client.count(
                self.collection,
                exact=True,
                count_filter=m.Filter(must_not=[m.HasVectorCondition(has_vector=SPARSE_VECTOR)]),
            ).count

    def add_keywords(self) -> int:
        from qdrant_client import models as m

        if not self.exists():
            return 0
        if not self.has_keywords():
            with self._guard("add keyword vectors"):
                self.client.create_vector_name(
                    self.collection,
                    SPARSE_VECTOR,
                    m.SparseVectorNameConfig(sparse=m.SparseVectorConfig(modifier=m.Modifier.IDF)),
                    wait=True,
                )
            self._keywords = True
        without = m.Filter(must_not=[m.HasVectorCondition(has_vector=SPARSE_VECTOR)])
        done, offset = 0, None
        while True:  # only points still without one: a repair cut short resumes where it was
            with self._guard("read texts"):
                recs, offset = self.client.scroll(
                    self.collection,
                    scroll_filter=without,
                    limit=256,
                    offset=offset,
                    with_payload=list(KEYWORD_FIELDS),
                    with_vectors=False,
                )
            if not recs:
                return done
            vectors = []
            for r in recs:
                kw = document_vector(r.payload or {})
                vectors.append(
                    m.PointVectors(
                        id=r.id,
                        vector={SPARSE_VECTOR: m.SparseVector(indices=list(kw.indices), values=list(kw.values))},
                    )
                )
            with self._guard("add keyword vectors"):
                self.client.update_vectors(self.collection, points=vectors, wait=True)
            done += len(recs)
            if offset is None:
                return done

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
