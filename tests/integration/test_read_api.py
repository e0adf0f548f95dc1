"""End to end: sync a small site, then read it back as an app would, through the read API
(`open_collection`) and the LangChain and LlamaIndex retrievers over it, on the embedded
default, on qdrant-client's local mode and on a real server; and a search during a pass."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import sync.edges.shard_lock as store_mod
from chunking import Splitter
from chunking.split import embedded_text
from demo.site_server import Site, SiteServer
from embedders import HashEmbedder
from sync import open_collection
from sync.edges.client_store import ClientStore
from sync.errors import StoreHeldError
from tests.helpers import Harness, page_html, para, store_clock

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo"


def python(code: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter that imports this checkout's pagesync."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def a_chunk(harness, path: str) -> dict:
    """One stored chunk of the page at `path` (its payload), to search for (`as_embedded`)."""
    url = harness.site.server.url(path)
    return next(p for p in harness.points().values() if p["url"] == url and p["chunk_index"] == 0)


def as_embedded(chunk: dict) -> str:
    """What was embedded for a stored chunk: its heading path, then its text. The fake
    embedder's vectors match for equal texts only, so a query finds its chunk at cosine 1
    by this text (the chunk's text alone is another vector)."""
    return embedded_text(chunk["text"], chunk["headings"])


@pytest.fixture
def synced(site, harness):
    site.set("/install.html", page_html("Install", [para("install-a"), para("install-b")]))
    site.set("/retries.html", page_html("Retries", [para("retries-a"), para("retries-b")]))
    rep = harness.run()
    assert rep.pages_added == 2 and rep.pages_failed == 0
    return harness


def test_open_collection_finds_the_synced_chunk_with_url_and_title(synced):
    chunk = a_chunk(synced, "/retries.html")
    with open_collection(synced.store_path) as coll:
        top = coll.search(as_embedded(chunk), limit=3, mode="dense")[0]  # dense: the score is the cosine
    assert (top.url, top.title, top.text) == (chunk["url"], "Retries", chunk["text"])
    assert (top.chunk_id, top.chunk_index) == (chunk["chunk_id"], 0) and top.score == pytest.approx(1.0, abs=1e-5)


def test_the_langchain_retriever_returns_the_chunk_as_a_document(synced):
    pytest.importorskip("langchain_core", reason='pip install "pagesync[langchain]"')
    from langchain_core.documents import Document

    from sync.integrations.langchain import PagesyncRetriever

    chunk = a_chunk(synced, "/install.html")
    retriever = PagesyncRetriever.open(synced.store_path, "pages", k=2)
    try:
        docs = retriever.invoke(chunk["text"])
    finally:
        retriever.close()
    assert len(docs) == 2 and isinstance(docs[0], Document)
    assert docs[0].page_content == chunk["text"]
    meta = docs[0].metadata
    assert (meta["url"], meta["title"], meta["chunk_id"]) == (chunk["url"], "Install", chunk["chunk_id"])
    assert meta["score"] > docs[1].metadata["score"]  # hybrid (the default): a fused rank score


def test_the_llamaindex_retriever_returns_the_chunk_as_a_node(synced):
    pytest.importorskip("llama_index.core", reason='pip install "pagesync[llamaindex]"')
    from llama_index.core.schema import NodeWithScore

    from sync.integrations.llamaindex import PagesyncRetriever

    chunk = a_chunk(synced, "/install.html")
    retriever = PagesyncRetriever.open(synced.store_path, "pages", similarity_top_k=2, mode="dense")
    try:
        nodes = retriever.retrieve(as_embedded(chunk))
    finally:
        retriever.close()
    assert len(nodes) == 2 and isinstance(nodes[0], NodeWithScore)
    node = nodes[0]
    assert node.node.get_content() == chunk["text"] and node.node.node_id == chunk["chunk_id"]
    assert (node.node.metadata["url"], node.node.metadata["title"]) == (chunk["url"], "Install")
    assert node.score == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("harness", ["qdrant"], indirect=True)
def test_reading_a_qdrant_client_collection_local_mode(synced):
    from qdrant_client import QdrantClient

    chunk = a_chunk(synced, "/retries.html")
    client = QdrantClient(path=str(synced.tmp / "qdrant-local"))  # the harness's local-mode "server"
    try:
        with open_collection(client=client) as coll:
            top = coll.search(as_embedded(chunk))[0]
    finally:
        client.close()
    assert (top.url, top.title, top.chunk_id) == (chunk["url"], "Retries", chunk["chunk_id"])


@pytest.mark.server
def test_reading_a_server_collection_by_url(site, harness, qdrant_server):
    url, key = qdrant_server
    name = f"pagesync_read_{uuid.uuid4().hex[:10]}"
    site.set("/retries.html", page_html("Retries", [para("retries-a")]))
    assert harness.run(store=ClientStore.connect(url, name, api_key=key)).pages_added == 1
    chunk = harness.points(store=ClientStore.connect(url, name, api_key=key)).popitem()[1]
    text = chunk["text"]
    try:
        with open_collection(url, name, api_key=key) as coll:
            top = coll.search(as_embedded(chunk))[0]
        assert top.title == "Retries" and top.text == text
    finally:
        store = ClientStore.connect(url, name, api_key=key)
        store.client.delete_collection(name)
        store.close()


class SearchingEmbedder(HashEmbedder):
    """Embeds like the fake embedder, and on its first call (the pass holds the shard:
    it read the changed page's stored vectors first) searches the collection as an app
    would, recording what happened."""

    def __init__(self, reader):
        super().__init__(16)
        self.reader, self.outcome = reader, None

    def embed(self, texts):
        if self.outcome is None:
            try:
                self.outcome = self.reader.search("anything")
            except StoreHeldError as exc:
                self.outcome = exc
        return super().embed(texts)


def test_a_search_during_a_pass_is_refused_at_once_and_works_after_it(synced, monkeypatch):
    reader = open_collection(synced.store_path)
    synced.site.set("/retries.html", page_html("Retries", [para("retries-a"), para("retries-c")]))

    def sleep(_):
        raise AssertionError("the search waited for the pass")

    monkeypatch.setattr(store_mod, "time", store_clock(sleep))
    embedder = SearchingEmbedder(reader)
    rep = synced.run(embedder=embedder, full=True)
    assert rep.pages_changed == 1 and rep.pages_failed == 0
    assert isinstance(embedder.outcome, StoreHeldError), embedder.outcome
    assert "for writing" in str(embedder.outcome) and "\n" not in str(embedder.outcome)
    new = next(p["text"] for p in synced.points().values() if "retries-c" in p["text"])
    assert reader.search(new, limit=1)[0].text == new  # after the pass: the new text is read
    reader.close()


def test_importing_a_retriever_without_its_framework_names_the_extra():
    for module, blocked, extra in (
        ("sync.integrations.langchain", "langchain_core", "pagesync[langchain]"),
        ("sync.integrations.llamaindex", "llama_index", "pagesync[llamaindex]"),
    ):
        code = f"import sys\nsys.modules[{blocked!r}] = None\nimport {module}"
        r = python(code)
        assert r.returncode == 1 and f'pip install "{extra}"' in r.stderr, r.stderr


def test_import_sync_loads_no_framework():
    code = (
        "import sys, sync\nsync.open_collection\n"
        "print([m for m in ('langchain_core', 'llama_index') if m in sys.modules])"
    )
    r = python(code)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


@pytest.mark.model
def test_the_bundled_model_finds_the_page_a_question_is_about(tmp_path, minilm):
    """The demo docs synced with the bundled model; a question in other words than the
    page's finds it, through the read API and both retrievers, the model chosen from the
    points' `embedder` payload."""
    site = Site.from_dir(DEMO / "site")
    with SiteServer(site) as server:
        site.server = server  # type: ignore[attr-defined]
        h = Harness(site, tmp_path, embedder=minilm)
        h.splitter = Splitter()
        assert h.run().pages_failed == 0
    question = "How do I install it with pipx?"
    with open_collection(h.store_path) as coll:
        assert coll.embedder.model_id == minilm.model_id
        top = coll.search(question, limit=1)[0]
        assert top.url.endswith("/install.html") and top.title
        from sync.integrations.langchain import PagesyncRetriever as LangChainRetriever
        from sync.integrations.llamaindex import PagesyncRetriever as LlamaIndexRetriever

        assert LangChainRetriever(collection=coll, k=1).invoke(question)[0].metadata["url"] == top.url
        assert LlamaIndexRetriever(coll, similarity_top_k=1).retrieve(question)[0].node.metadata["url"] == top.url


def test_the_read_api_page_snippets_run(synced):
    """The Python snippets of docs/tasks/read-api.md, as written, against a synced store (its
    path substituted for the default one)."""
    import re

    text = (ROOT / "docs" / "tasks" / "read-api.md").read_text()
    snippets = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(snippets) == 3 and all(".pagesync/qdrant" in s for s in snippets)
    code = "\n".join(snippets).replace(".pagesync/qdrant", str(synced.store_path))
    code += "\nassert docs[0].metadata['url'] and nodes[0].node.metadata['url']\nprint('ok')"
    r = python(code)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]
