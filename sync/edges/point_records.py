"""What both stores read from a stored record: its dense and keyword vectors and its reuse
key; and `PagedScroll`, the whole-collection reads over a store's pages of records."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from chunking.split import embedded_text

from ..core.hashing import reuse_key
from .keywords import SPARSE_VECTOR, Sparse, document_vector
from .store import StoredPoint

__all__ = ["keywords_of", "split_vectors", "PagedScroll", "reuse_entry", "embedded_of", "reuse_key_of"]


def keywords_of(p: StoredPoint) -> Sparse:
    """The point's keyword vector: the one it carries, else computed from its payload."""
    return p.sparse if p.sparse is not None else document_vector(p.payload)


def split_vectors(vec: Any) -> tuple[list[float] | None, Sparse | None]:
    """(dense, keyword vector) of a record's vector: a bare list, or a named-vectors dict."""
    if not isinstance(vec, dict):
        return (list(vec) if vec is not None else None), None
    dense, sparse = vec.get(""), vec.get(SPARSE_VECTOR)
    kw = Sparse(tuple(sparse.indices), tuple(sparse.values)) if sparse is not None else None
    return (list(dense) if dense is not None else None), kw


class PagedScroll:
    """`scroll` and `scroll_payloads` for a store whose `_pages(with_payload, with_vectors,
    batch)` yields the collection's records a page at a time (Edge's and qdrant-client's
    records have the same shape: id, payload, vector)."""

    def _pages(self, with_payload: list[str] | bool, with_vectors: bool, batch: int) -> Iterator[list[Any]]:
        raise NotImplementedError

    def scroll(
        self, *, with_vectors: bool = False, batch: int = 256, payload_fields: Sequence[str] | None = None
    ) -> Iterator[StoredPoint]:
        with_payload = list(payload_fields) if payload_fields is not None else True
        for recs in self._pages(with_payload, with_vectors, batch):
            for r in recs:
                dense, kw = split_vectors(r.vector) if with_vectors else (None, None)
                yield StoredPoint(str(r.id), dict(r.payload or {}), dense, kw)

    def scroll_payloads(
        self, fields: Sequence[str], *, batch: int = 1024
    ) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        # Payloads are handed out uncopied (callers only read them). Ids come as UUID, str or int.
        for recs in self._pages(list(fields), False, batch):
            yield [(str(r.id), r.payload or {}) for r in recs]


def reuse_entry(payload: Any, vector: Any) -> tuple[str, list[float]] | None:
    """(reuse key, vector) of one stored point, or None when it cannot be reused."""
    if isinstance(vector, dict):
        vector = vector.get("")
    if not payload or vector is None:
        return None
    text, embedder = embedded_of(payload), payload.get("embedder")
    if not isinstance(text, str) or not isinstance(embedder, str):
        return None
    return reuse_key(embedder, text), list(vector)


def embedded_of(payload: Any) -> str | None:
    """What the point's vector was embedded from: its heading path and text
    (`chunking.embedded_text`); the text alone for a point without `headings`."""
    text, headings = payload.get("text"), payload.get("headings")
    if not isinstance(text, str):
        return None
    if isinstance(headings, list) and all(isinstance(h, str) for h in headings):
        return embedded_text(text, headings)
    return text


def reuse_key_of(payload: Any) -> tuple[str, str] | None:
    """(reuse key, url) of one stored point's payload, or None when it cannot be reused."""
    if not payload:
        return None
    text, embedder, url = embedded_of(payload), payload.get("embedder"), payload.get("url")
    if not isinstance(text, str) or not isinstance(embedder, str) or not isinstance(url, str):
        return None
    return reuse_key(embedder, text), url
