"""A LlamaIndex retriever over a synced collection (embedded store or server).

    from sync.integrations.llamaindex import PagesyncRetriever
    retriever = PagesyncRetriever.open(".pagesync/qdrant", "pages", similarity_top_k=4)  # mode="hybrid" (default)
    nodes = retriever.retrieve("how do retries back off?")  # NodeWithScore: TextNode + score

The query is embedded with the collection's own embedder (`open_collection`), not with
LlamaIndex's `Settings.embed_model`; the retriever plugs into a `RetrieverQueryEngine`
like any other. On the embedded store a query during a pass is refused at once
(`sync.errors.StoreHeldError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - exercised by tests/integration/test_read_api.py
    raise ImportError('the LlamaIndex retriever needs llama-index-core: pip install "pagesync[llamaindex]"') from exc

from ..commands.read import Collection, Hit, check_mode, open_collection

__all__ = ["PagesyncRetriever", "to_node"]


def to_node(hit: Hit) -> NodeWithScore:
    """A hit as LlamaIndex's NodeWithScore: a TextNode (id: the chunk id) with the chunk's
    metadata payload, and the score."""
    return NodeWithScore(node=TextNode(id_=hit.chunk_id or None, text=hit.text, metadata=hit.metadata), score=hit.score)


class PagesyncRetriever(BaseRetriever):
    """The `similarity_top_k` chunks of a pagesync collection that best match the query, by
    `mode`: hybrid (default), dense or keyword, as `Collection.search` takes it."""

    def __init__(self, collection: Collection, *, similarity_top_k: int = 4, mode: str = "hybrid", **kwargs: Any):
        self.collection = collection
        self.similarity_top_k = similarity_top_k
        self.mode = check_mode(mode)
        super().__init__(**kwargs)

    @classmethod
    def open(
        cls,
        path_or_url: str | Path = ".pagesync/qdrant",
        collection: str = "pages",
        *,
        similarity_top_k: int = 4,
        mode: str = "hybrid",
        **kwargs: Any,
    ) -> "PagesyncRetriever":
        """`open_collection(path_or_url, collection, **kwargs)` wrapped as a retriever."""
        return cls(open_collection(path_or_url, collection, **kwargs), similarity_top_k=similarity_top_k, mode=mode)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            to_node(h)
            for h in self.collection.search(query_bundle.query_str, limit=self.similarity_top_k, mode=self.mode)
        ]

    def close(self) -> None:
        self.collection.close()
