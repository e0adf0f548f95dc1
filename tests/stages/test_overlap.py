"""The engine overlaps the model with extraction, and stays crash-safe doing it.

The gated embedder below holds one model call until the engine extracts another page
meanwhile, or a timeout passes: an engine that extracts nothing while the model works
fails the assertion after the timeout instead of hanging.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from sync.stages.embed import EmbedQueue
import sync.stages.visit as visit
from chunking.split import embedded_text
from embedders import HashEmbedder
from sync.edges.state import LIVE, StateDB
from tests.helpers import page_html, para

GATE_TIMEOUT = 10.0


class GatedEmbedder(HashEmbedder):
    """Model call number `gate` waits until a page is extracted after the call was handed
    over (at most GATE_TIMEOUT s); call `fail` then raises (an embed failing while later
    pages are being extracted)."""

    def __init__(self, gate: int = 1, fail: int | None = None):
        super().__init__(16)
        self.gate, self.fail, self.n = gate, fail, 0
        self.cond = threading.Condition()
        self.extractions = 0  # extract_page calls started
        self.marks: list[int] = []  # extractions when each batch with texts was handed over
        self.overlapped: bool | None = None

    def embed(self, texts):
        self.n += 1
        if self.n == self.gate:
            mark = self.marks[self.n - 1]
            with self.cond:
                self.overlapped = self.cond.wait_for(lambda: self.extractions > mark, GATE_TIMEOUT)
        if self.n == self.fail:
            raise RuntimeError("injected failure of the batch in flight")
        return super().embed(texts)


def gate_extraction(monkeypatch, emb: GatedEmbedder) -> None:
    """Count extractions; note the count when `EmbedQueue.flush` hands a batch over (in the event loop,
    before any worker thread runs, so there is no race with the model call)."""
    real_extract, real_flush = visit.extract_page, EmbedQueue.flush

    def extract(*args, **kw):
        with emb.cond:
            emb.extractions += 1
            emb.cond.notify_all()
        return real_extract(*args, **kw)

    async def flush(self):
        if self.queue:  # in these tests every batch handed over has texts for the model
            emb.marks.append(emb.extractions)
        await real_flush(self)

    monkeypatch.setattr(visit, "extract_page", extract)
    monkeypatch.setattr(EmbedQueue, "flush", flush)


def build(site, n: int) -> None:
    # Every page shares its "## Section N" chunks with the others: batches depend on each other.
    for i in range(n):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}") for j in range(3)]))


def assert_consistent(harness) -> dict:
    """Store and state agree: a LIVE page's points carry its hash, nothing is left pending,
    every point's vector is its own text's, and a page without a hash has no points."""
    pts = harness.points()
    vecs = harness.vectors()
    with StateDB(harness.state_path) as st:
        pages = {p.url: p for p in st.all_pages()}
    ref = HashEmbedder(16)
    by_url: dict[str, list[dict]] = {}
    for pid, p in pts.items():
        by_url.setdefault(p["url"], []).append(p)
        want = ref.embed([embedded_text(p["text"], p.get("headings") or [])])[0]  # stored as float32
        assert max(abs(a - b) for a, b in zip(vecs[pid], want, strict=True)) < 1e-6
    for url, page in pages.items():
        assert page.pending_hash is None
        if page.status == LIVE and page.content_hash:
            assert {p["content_hash"] for p in by_url[url]} == {page.content_hash}
            assert sorted(p["chunk_index"] for p in by_url[url]) == list(range(page.chunk_count))
        else:
            assert url not in by_url
    return by_url


def test_model_call_overlaps_extraction_of_later_pages(site, harness, monkeypatch):
    build(site, 8)
    emb = GatedEmbedder(gate=1)
    gate_extraction(monkeypatch, emb)
    rep = harness.run(embedder=emb, embed_batch=3)
    assert emb.overlapped, f"no page was extracted while the model worked ({GATE_TIMEOUT:.0f} s)"
    assert rep.pages_added == 8 and rep.pages_failed == 0
    by_url = assert_consistent(harness)
    assert len(by_url) == 8
    # Texts of a batch in flight are not embedded again by the next one: each text once.
    texts = {p["text"] for ps in by_url.values() for p in ps}
    assert rep.chunks_embedded == emb.texts_embedded == len(texts)
    assert rep.chunks_embedded + rep.chunks_reused == rep.chunks_written


def test_failure_of_the_batch_in_flight_keeps_store_and_state_consistent(site, harness, monkeypatch):
    build(site, 8)
    harness.run(embedder=HashEmbedder(16), embed_batch=3)
    before = harness.points()
    for i in range(8):  # every page changed, every section shared: later batches wait on the failing one
        site.set(f"/p{i}.html", page_html(f"Page {i} v2", [para(f"v2-p{i}-s{j}") for j in range(3)]))
    emb = GatedEmbedder(gate=2, fail=2)
    gate_extraction(monkeypatch, emb)
    rep = harness.run(embedder=emb, embed_batch=3, full=True)
    assert emb.overlapped
    assert 0 < rep.pages_failed < 8 and rep.pages_changed == 8 - rep.pages_failed
    by_url = assert_consistent(harness)
    failed = {e["url"] for e in rep.changes if e["action"] == "failed"}
    assert len(failed) == rep.pages_failed
    for url in failed:  # old points kept, untouched
        assert {p["content_hash"] for p in by_url[url]} == {
            b["content_hash"] for b in before.values() if b["url"] == url
        }
    monkeypatch.undo()
    rep = harness.run(embedder=HashEmbedder(16), advance=timedelta(hours=2))  # retry backoff elapsed
    assert rep.pages_changed == len(failed) and rep.pages_failed == 0
    by_url = assert_consistent(harness)
    assert len(by_url) == 8 and all(p["title"].endswith(" v2") for ps in by_url.values() for p in ps)
