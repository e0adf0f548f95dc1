"""BM25 keyword vectors: one tokenisation for both stores, the frameworks and the query.

Every point carries a sparse vector named `SPARSE_VECTOR` beside its dense one: Qdrant
Edge's built-in BM25 (qdrant-edge-py's `Bm25`, Rust, no model download) over the chunk's
page title, heading path and text (`keyword_text`), weighted by term frequency here and by
IDF in the engine (the sparse vector's IDF modifier), so a document's vector never depends
on the rest of the collection. The same `Bm25` computes the server store's vectors on the
client, so an Edge shard and a server collection hold identical indices and values, and
`export`/`import` between them recomputes nothing. A query is the same tokens, weight 1 each.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "SPARSE_VECTOR",
    "BM25_SETTINGS",
    "Sparse",
    "keyword_text",
    "document_vector",
    "document_vectors",
    "text_vector",
    "query_vector",
    "encode_documents",
    "encode_queries",
    "sparse_from_json",
]

SPARSE_VECTOR = "bm25"  # the sparse vector's name in both stores (the frameworks' sparse_vector_name)
# Qdrant's BM25 defaults (k 1.2, b 0.75, avg_len 256, English stopwords and stemmer) with the
# code tokenizer: `auto_envvar_prefix` and `CliRunner` are kept whole and also split in parts.
BM25_SETTINGS: dict[str, Any] = {"tokenizer": "code", "k": 1.2, "b": 0.75, "avg_len": 256.0, "language": "english"}


@dataclass(frozen=True)
class Sparse:
    """A sparse vector: token ids (ascending, as the tokenizer gives them) and their weights."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def to_json(self) -> dict[str, list[Any]]:
        return {"indices": list(self.indices), "values": list(self.values)}


@functools.lru_cache(maxsize=1)
def _model() -> Any:
    import qdrant_edge as qe

    return qe.Bm25(
        qe.Bm25Config(
            k=BM25_SETTINGS["k"],
            b=BM25_SETTINGS["b"],
            avg_len=BM25_SETTINGS["avg_len"],
            tokenizer=qe.TokenizerType.Code,
            language=str(BM25_SETTINGS["language"]),
        )
    )


def keyword_text(payload: Mapping[str, Any]) -> str:
    """What a point's keyword vector is made of, from its stored payload alone: its heading
    path (`headings`, which starts with the page title) or else its `title`, then its `text`.
    A repair rebuilds the vector from the same fields, so it always equals a pass's."""
    headings = payload.get("headings")
    if isinstance(headings, str):
        head = headings
    elif isinstance(headings, (list, tuple)) and all(isinstance(h, str) for h in headings):
        head = " ".join(headings)
    else:
        head = str(payload.get("title") or "")
    text = payload.get("text")
    return f"{head}\n{text if isinstance(text, str) else ''}".strip()


def _sparse(vec: Any) -> Sparse:
    return Sparse(tuple(vec.indices), tuple(vec.values))


def document_vector(payload: Mapping[str, Any]) -> Sparse:
    """The keyword vector of one point (term-frequency weights; the engine applies IDF)."""
    return _sparse(_model().embed_document(keyword_text(payload)))


def document_vectors(payloads: Iterable[Mapping[str, Any]]) -> list[Sparse]:
    return [document_vector(p) for p in payloads]


def text_vector(text: str) -> Sparse:
    """A document's keyword vector from its text alone (a framework writing its own points)."""
    return _sparse(_model().embed_document(text))


def _columns(vectors: list[Sparse]) -> tuple[list[list[int]], list[list[float]]]:
    return [list(v.indices) for v in vectors], [list(v.values) for v in vectors]


def encode_documents(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    """Documents' keyword vectors as LlamaIndex's `sparse_doc_fn` returns them: (indices, values)."""
    return _columns([text_vector(t) for t in texts])


def encode_queries(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    """Queries' keyword vectors as LlamaIndex's `sparse_query_fn` returns them: (indices, values)."""
    return _columns([query_vector(t) for t in texts])


def query_vector(text: str) -> Sparse:
    """A query's keyword vector: each of its distinct tokens, weight 1."""
    return _sparse(_model().embed_query(text))


def sparse_from_json(value: Any) -> Sparse | None:
    """`{"indices": [...], "values": [...]}` (as `Sparse.to_json` and qdrant-client write it) as a
    Sparse; None when it is not one (equal lengths, integer indices, numeric values)."""
    if not isinstance(value, Mapping):
        return None
    indices, values = value.get("indices"), value.get("values")
    if not isinstance(indices, Sequence) or not isinstance(values, Sequence) or len(indices) != len(values):
        return None
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices):
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None
    return Sparse(tuple(indices), tuple(float(v) for v in values))
