"""LangChain, LlamaIndex and Haystack read a collection a pass wrote, with the constructor
arguments docs/tasks/frameworks.md states and no code between them.

A pass with the bundled model syncs a small docs site into qdrant-client's local mode (a
directory, standing in for the server), or into the server at QDRANT_URL when set. Each
framework's sample is then run as the page writes it (the connection, the collection name
and the model substituted: the local mode's client, this test's collection, the session's
already loaded model) and must put the chunk that answers the question first, with its
page's url and title.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from sync.edges.client_store import ClientStore
from tests.helpers import Harness, page_html

pytestmark = pytest.mark.model
# Haystack reports usage to its makers unless told not to; a test sends nothing anywhere.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tasks" / "frameworks.md"
SERVER_IN_DOCS = "http://localhost:6333"

# Three pages, each with sections on different things: the question is answered by one
# section of one page.
PAGES = {
    "/security/api-keys.html": (
        "API keys",
        [
            "Create an API key in the dashboard under Settings. Each key belongs to one project and can "
            "read or write that project's data, depending on the scopes you give it when you create it.",
            "To rotate an API key, create a second key, deploy your application with the new key, then "
            "revoke the old key. Requests signed with a revoked key are refused at once, so rotate keys "
            "before they leak, and rotate them every ninety days.",
        ],
    ),
    "/billing/invoices.html": (
        "Invoices",
        [
            "Invoices are issued on the first day of each month and list every project's usage. You can "
            "download them as PDF files from the billing page.",
            "Pay an invoice by card or by bank transfer. An unpaid invoice is reminded after seven days, "
            "and the account is suspended after thirty.",
        ],
    ),
    "/deploy/kubernetes.html": (
        "Deploy on Kubernetes",
        [
            "Install the Helm chart into its own namespace. The chart runs two replicas behind a service "
            "and mounts the configuration from a ConfigMap.",
            "Scale the deployment with kubectl scale, or let the horizontal pod autoscaler add replicas "
            "when the CPU load stays above seventy percent.",
        ],
    ),
}
ANSWER = ("/security/api-keys.html", "API keys", "To rotate an API key")


def sample(heading: str) -> str:
    """The first Python block under `## heading` of the frameworks page."""
    text = DOC.read_text()
    section = text[text.index(f"## {heading}\n") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def synced(site, tmp_path, minilm):
    """A pass of the bundled model over the site into a qdrant-client collection: where it is
    (`client()` opens it; `haystack_where` are QdrantDocumentStore's arguments for it)."""
    for path, (title, sections) in PAGES.items():
        site.set(path, page_html(title, sections))
    url = os.environ.get("QDRANT_URL")
    key = os.environ.get("QDRANT_API_KEY") or None
    h = Harness(site, tmp_path, embedder=minilm)
    if url:
        collection = f"pagesync_fw_{uuid.uuid4().hex[:12]}"
        where = Where(collection, url=url, api_key=key)
    else:
        collection = "pages"
        where = Where(collection, path=str(tmp_path / "qdrant-local"))
    store = ClientStore.connect(url, collection, api_key=key) if url else ClientStore(where.client(), collection)
    report = h.run(store=store)
    assert report.pages_added == 3 and not report.errors
    where.urls = {p: site.server.url(p) for p in PAGES}
    yield where
    if url:
        with contextlib.closing(where.client()) as c:
            c.delete_collection(collection)


class Where:
    """A collection in qdrant-client's local mode (`path`) or on a server (`url`)."""

    def __init__(self, collection: str, *, path: str | None = None, url: str | None = None, api_key: str | None = None):
        self.collection, self.path, self.url, self.api_key = collection, path, url, api_key
        self.urls: dict[str, str] = {}

    def client(self):
        from qdrant_client import QdrantClient

        if self.path:
            return QdrantClient(path=self.path)
        return QdrantClient(url=self.url, api_key=self.api_key, check_compatibility=False)

    def haystack_where(self) -> dict[str, Any]:
        if self.path:
            return {"path": self.path}
        from haystack.utils import Secret

        return {"url": self.url, **({"api_key": Secret.from_token(self.api_key)} if self.api_key else {})}


def run_sample(code: str, where: Where, minilm, **names: Any) -> dict[str, Any]:
    """Run a sample as written, but for the connection, the collection and the model."""
    assert code.count(f'QdrantClient(url="{SERVER_IN_DOCS}")') + code.count(f'url="{SERVER_IN_DOCS}"') >= 1
    assert 'collection_name="pages"' in code or 'index="pages"' in code
    assert "make_embedder(None)" in code
    code = code.replace(f'QdrantClient(url="{SERVER_IN_DOCS}")', "_client")
    code = code.replace(f'url="{SERVER_IN_DOCS}"', "**_haystack_where")
    code = code.replace('collection_name="pages"', "collection_name=_collection")
    code = code.replace('index="pages"', "index=_collection")
    code = code.replace("make_embedder(None)", "_model")
    ns: dict[str, Any] = {"__name__": "frameworks_sample", "_collection": where.collection, "_model": minilm, **names}
    exec(compile(code, str(DOC), "exec"), ns)
    return ns


def assert_answer(where: Where, url: Any, title: Any, text: Any) -> None:
    path, want_title, phrase = ANSWER
    assert (url, title) == (where.urls[path], want_title)
    assert isinstance(text, str) and phrase in text


def test_langchain_returns_the_chunk_with_its_url_and_title(synced, minilm, capsys):
    pytest.importorskip("langchain_qdrant", reason="langchain-qdrant is not installed (pip install -e '.[frameworks]')")
    with contextlib.closing(synced.client()) as client:
        ns = run_sample(sample("LangChain"), synced, minilm, _client=client)
    top = ns["docs"][0]
    assert_answer(synced, top.metadata["url"], top.metadata["title"], top.page_content)
    # The Document's metadata is the point's `metadata` object, plus LangChain's own two keys.
    assert set(top.metadata) == {
        "url",
        "title",
        "chunk_id",
        "chunk_index",
        "fetched_at",
        "headings",
        "_id",
        "_collection_name",
    }
    assert top.metadata["headings"][0] == top.metadata["title"]  # the heading path starts at the page title
    assert top.metadata["chunk_id"].endswith(f"_c{top.metadata['chunk_index']}")
    assert synced.urls[ANSWER[0]] in capsys.readouterr().out  # the sample's own print


def test_llamaindex_returns_the_chunk_with_its_url_and_title(synced, minilm):
    pytest.importorskip(
        "llama_index.vector_stores.qdrant",
        reason="llama-index-vector-stores-qdrant is not installed (pip install -e '.[frameworks]')",
    )
    with contextlib.closing(synced.client()) as client:
        ns = run_sample(sample("LlamaIndex"), synced, minilm, _client=client)
    top = ns["nodes"][0].node
    assert_answer(synced, top.metadata["url"], top.metadata["title"], top.text)
    assert top.metadata["metadata"]["url"] == top.metadata["url"]


def test_haystack_returns_the_chunk_with_its_url_and_title(synced, minilm):
    pytest.importorskip(
        "haystack_integrations.document_stores.qdrant",
        reason="qdrant-haystack is not installed (pip install -e '.[frameworks]')",
    )
    ns = run_sample(sample("Haystack"), synced, minilm, _haystack_where=synced.haystack_where())
    try:
        top = ns["documents"][0]
        assert_answer(synced, top.meta["url"], top.meta["title"], top.meta["text"])
        assert top.content is None  # Haystack reads only a `content` key (see the docs page)
    finally:
        client = getattr(ns["document_store"], "_client", None)
        if client is not None:
            client.close()  # local mode: let go of the directory's lock


def test_langchain_hybrid_mode_reads_the_keyword_vector(synced, minilm, capsys):
    pytest.importorskip("langchain_qdrant", reason="langchain-qdrant is not installed (pip install -e '.[frameworks]')")
    from langchain_qdrant import RetrievalMode

    with contextlib.closing(synced.client()) as client:
        ns = run_sample(sample("LangChain, hybrid"), synced, minilm, _client=client)
        assert ns["store"].retrieval_mode == RetrievalMode.HYBRID
        top = ns["docs"][0]
        assert_answer(synced, top.metadata["url"], top.metadata["title"], top.page_content)
        # The keyword side alone, through the same store: LangChain's sparse search finds it too.
        sparse = ns["QdrantVectorStore"](
            client=client,
            collection_name=synced.collection,
            sparse_embedding=ns["PagesyncKeywords"](),
            retrieval_mode=RetrievalMode.SPARSE,
            sparse_vector_name="bm25",
            content_payload_key="text",
        )
        hit = sparse.similarity_search("rotate API key", k=1)[0]
    assert_answer(synced, hit.metadata["url"], hit.metadata["title"], hit.page_content)
    assert synced.urls[ANSWER[0]] in capsys.readouterr().out


def test_llamaindex_hybrid_mode_reads_the_keyword_vector(synced, minilm):
    pytest.importorskip(
        "llama_index.vector_stores.qdrant",
        reason="llama-index-vector-stores-qdrant is not installed (pip install -e '.[frameworks]')",
    )
    with contextlib.closing(synced.client()) as client:
        ns = run_sample(sample("LlamaIndex, hybrid"), synced, minilm, _client=client)
    store = ns["vector_store"]
    assert store.enable_hybrid and (store.dense_vector_name, store.sparse_vector_name) == ("", "bm25")
    top = ns["nodes"][0].node
    assert_answer(synced, top.metadata["url"], top.metadata["title"], top.text)
