"""The Qdrant Edge requests a store makes, built from the engine module (`qe`) and plain values:
points to write, url filters, the dense, keyword and hybrid searches, the keyword repair."""

from __future__ import annotations

from typing import Any, Sequence

from .keywords import SPARSE_VECTOR, Sparse, document_vector
from .point_records import keywords_of
from .store import RRF_K, StoredPoint, prefetch_size

__all__ = ["edge_points", "url_filter", "where_url", "search_request", "without_keywords", "keyword_vectors"]


def edge_points(qe: Any, points: Sequence[StoredPoint], keywords: bool) -> list[Any]:
    """The points as Qdrant Edge writes them: dense only, or with their keyword vector."""
    if not keywords:
        return [qe.Point(id=p.id, vector=list(p.vector or []), payload=p.payload) for p in points]
    out = []
    for p in points:
        kw = keywords_of(p)
        out.append(
            qe.Point(
                id=p.id,
                payload=p.payload,
                vector={"": list(p.vector or []), SPARSE_VECTOR: qe.SparseVector(list(kw.indices), list(kw.values))},
            )
        )
    return out


def url_filter(qe: Any, url: str) -> Any:
    """The points of one page (through the `url` keyword index)."""
    return qe.Filter(must=[qe.FieldCondition(key="url", match=qe.MatchValue(url))])


def where_url(qe: Any, match: Any, embedder: str | None) -> list[Any]:
    """Conditions: the `url` matches (one value or any of several), and the embedder when given."""
    must = [qe.FieldCondition(key="url", match=match)]
    if embedder is not None:
        must.append(qe.FieldCondition(key="embedder", match=qe.MatchValue(embedder)))
    return must


def search_request(qe: Any, vector: Sequence[float] | None, limit: int, keywords: Sparse | None, mode: str) -> Any:
    """`dense` by `vector`, `keyword` by `keywords`, `hybrid` both fused by reciprocal rank;
    without keywords, dense whatever the mode."""
    dense = qe.Query.Nearest(list(vector or []))
    kw = (
        qe.Query.Nearest(qe.SparseVector(list(keywords.indices), list(keywords.values)), using=SPARSE_VECTOR)
        if keywords is not None
        else None
    )
    if mode == "dense" or kw is None:
        return qe.QueryRequest(limit=limit, query=dense, with_payload=True)
    if mode == "keyword":
        return qe.QueryRequest(limit=limit, query=kw, with_payload=True)
    n = prefetch_size(limit)
    return qe.QueryRequest(
        limit=limit,
        prefetches=[qe.Prefetch(limit=n, query=dense), qe.Prefetch(limit=n, query=kw)],
        query=qe.Fusion.Rrf(k=RRF_K),
        with_payload=True,
    )


def without_keywords(qe: Any) -> Any:
    """The points that have no keyword vector yet."""
    return qe.Filter(must_not=[qe.HasVectorCondition(SPARSE_VECTOR)])


def keyword_vectors(qe: Any, records: Sequence[Any]) -> Any:
    """The update that gives each record its keyword vector, from its stored payload."""
    ops = []
    for r in records:
        kw = document_vector(r.payload or {})
        ops.append(qe.PointVectors(r.id, {SPARSE_VECTOR: qe.SparseVector(list(kw.indices), list(kw.values))}))
    return qe.UpdateOperation.update_vectors(ops)
