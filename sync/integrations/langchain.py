"""A LangChain retriever over a synced collection (embedded store or server).

    from sync.integrations.langchain import PagesyncRetriever
    retriever = PagesyncRetriever.open(".pagesync/qdrant", "pages", k=4)  # mode="hybrid" (default), "dense", "keyword"
    docs = retriever.invoke("how do retries back off?")  # Documents: chunk text, metadata url/title/...

The query is embedded with the collection's own embedder (`open_collection`); on the
embedded store each query opens the shard for its search only, and during a pass it is
refused at once (`sync.errors.StoreHeldError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError as exc:  # pragma: no cover - exercised by tests/integration/test_read_api.py
    raise ImportError('the LangChain retriever needs langchain-core: pip install "pagesync[langchain]"') from exc

from ..commands.read import Collection, Hit, check_mode, open_collection

__all__ = ["PagesyncRetriever", "to_document"]


def to_document(hit: Hit) -> Document:
    """A hit as LangChain's Document: the chunk's text, its metadata payload plus the score."""
    return Document(page_content=hit.text, metadata={**hit.metadata, "score": hit.score})


class PagesyncRetriever(BaseRetriever):
    """The `k` chunks of a pagesync collection that best match the query, as Documents, by
    `mode`: hybrid (default), dense or keyword, as `Collection.search` takes it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection: Collection
    k: int = 4
    mode: str = "hybrid"

    @classmethod
    def open(
        cls,
        path_or_url: str | Path = ".pagesync/qdrant",
        collection: str = "pages",
        *,
        k: int = 4,
        mode: str = "hybrid",
        **kwargs: Any,
    ) -> "PagesyncRetriever":
        """`open_collection(path_or_url, collection, **kwargs)` wrapped as a retriever."""
        return cls(collection=open_collection(path_or_url, collection, **kwargs), k=k, mode=check_mode(mode))

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [to_document(h) for h in self.collection.search(query, limit=self.k, mode=self.mode)]

    def close(self) -> None:
        self.collection.close()
