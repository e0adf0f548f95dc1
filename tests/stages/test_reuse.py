"""Vector reuse: a changed page re-embeds only the chunks whose embedded text (heading path
and chunk, `chunking.split.embedded_text`) is new.

Against the local docs site with the deterministic HashEmbedder: a reused vector must be
exactly the vector the model would have computed, so after every pass the collection is
compared, vectors included, with a fresh full index of the same site.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest

from chunking import Splitter
from chunking.split import embedded_text
from demo.site_server import render_page
from embedders import HashEmbedder
from sync.errors import CollectionMismatchError, StoreError
from sync.edges.state import StateDB
from sync.edges.edge_store import EdgeStore
from tests.cli_helpers import cli_run
from tests.helpers import Harness, build_pages, para, without_fetched_at
from tests.property_helpers import assert_equals_fresh

PAGE = "/guide.html"


class RecordingEmbedder(HashEmbedder):
    """HashEmbedder that keeps every model call's inputs."""

    def __init__(self, dimension: int = 16, model_id: str | None = None, salt: str = ""):
        super().__init__(dimension, model_id)
        self.salt = salt
        self.inputs: list[list[str]] = []

    def embed(self, texts):
        out = super().embed(texts)
        self.inputs.append(list(texts))
        return out

    def _one(self, text: str) -> list[float]:
        return super()._one(self.salt + text)

    def texts(self) -> list[str]:
        return [t for call in self.inputs for t in call]


class CountingStore(EdgeStore):
    """Counts shard opens and vector reads; can fail a read or crash around a write."""

    opens = reads = 0
    fail_read = False
    crash = None  # "after-delete": points deleted, then an error; "after-write": written, then an error

    def _open(self, dimension=None):
        if self._shard is None:
            CountingStore.opens += 1
        return super()._open(dimension)

    def vectors_for_url(self, url, *, embedder=None):
        CountingStore.reads += 1
        if CountingStore.fail_read:
            raise StoreError("connection lost while reading vectors")
        return super().vectors_for_url(url, embedder=embedder)

    def replace_pages(self, pages):
        crash, CountingStore.crash = CountingStore.crash, None
        if crash == "after-delete":
            self._open()
            self.delete_pages([p.url for p in pages])
            raise StoreError("connection lost mid-write")
        deleted = super().replace_pages(pages)
        if crash == "after-write":
            raise StoreError("connection lost before the answer")
        return deleted


@pytest.fixture(autouse=True)
def _reset_counting_store():
    CountingStore.opens = CountingStore.reads = 0
    CountingStore.fail_read, CountingStore.crash = False, None


def guide(sections: list[tuple[str, list[str]]], title: str = "Guide", nav: list[str] | None = None) -> str:
    body = "".join(f"<h2>Topic {name}</h2>" + "".join(f"<p>{p}</p>" for p in ps) for name, ps in sections)
    return render_page(title, body, nav=nav)


def ten_sections() -> list[tuple[str, list[str]]]:
    return [(f"s{k}", [para(f"s{k}-p{j}", 35 + 10 * j) for j in range(2)]) for k in range(10)]


def snapshot(h: Harness) -> dict[str, tuple[dict, list[float]]]:
    pts, vecs = h.points(), h.vectors()
    return {pid: (without_fetched_at(p), vecs[pid]) for pid, p in pts.items()}


def assert_equals_fresh_index(h: Harness, tmp_path, name: str = "fresh") -> dict:
    """The incremental collection equals a fresh full index of the site: ids, payloads, texts, vectors."""
    fresh = Harness(
        h.site,
        tmp_path / name,
        embedder=RecordingEmbedder(h.embedder.dimension, h.embedder.model_id, getattr(h.embedder, "salt", "")),
        splitter=h.splitter,
        stamp_site=False,
    )
    fresh.now = h.now
    rep = fresh.run()
    assert rep.pages_failed == 0, rep.errors
    inc, exp = snapshot(h), snapshot(fresh)
    assert inc.keys() == exp.keys()
    for pid in exp:
        assert inc[pid][0] == exp[pid][0], pid
        assert inc[pid][1] == exp[pid][1], f"vector of {exp[pid][0]['chunk_id']} differs"  # exactly
    return inc


def embedded(p: dict) -> str:
    """What the model embedded for a point: its heading path and its text."""
    return embedded_text(p["text"], p["headings"])


def page_texts(h: Harness, path: str = PAGE) -> list[str]:
    """The embedded texts of a page's points, in chunk order."""
    url = h.site.server.url(path)
    return [
        embedded(p) for p in sorted((p for p in h.points().values() if p["url"] == url), key=lambda p: p["chunk_index"])
    ]


@pytest.mark.parametrize("splitter", [Splitter(chunk_size=400, chunk_overlap=0), Splitter()], ids=["400-0", "1000-100"])
def test_one_edited_paragraph_embeds_only_the_changed_chunks(site, tmp_path, splitter):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb, splitter=splitter)
    sections = ten_sections()
    site.set(PAGE, guide(sections))
    site.set("/other.html", guide([("x", [para("other page")])], title="Other"))
    first = h.run()
    assert first.pages_added == 2 and first.chunks_reused == 0
    old = page_texts(h)
    assert len(old) >= 10

    sections[6][1][1] = para("s6-p1 edited", 45)
    site.set(PAGE, guide(sections))
    emb.inputs.clear()
    rep = h.run(full=True)

    new = page_texts(h)
    changed = [t for t in new if t not in set(old)]
    assert 1 <= len(changed) < len(new) / 4
    assert all("s6" in t or "edited" in t for t in changed)
    assert rep.pages_changed == 1 and rep.pages_not_modified == 1
    assert rep.chunks_embedded == len(changed) and emb.texts() == changed  # only the new texts went to the model
    assert rep.chunks_reused == len(new) - len(changed)
    assert rep.chunks_written == len(new) == rep.chunks_embedded + rep.chunks_reused
    (change,) = rep.changes
    assert change["chunks"] == len(new) and change["reused"] == rep.chunks_reused
    assert_equals_fresh_index(h, tmp_path)


def test_section_inserted_at_the_top_embeds_only_that_section(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb, splitter=Splitter())  # production settings
    sections = ten_sections()
    site.set(PAGE, guide(sections))
    h.run()
    old = page_texts(h)
    site.set(PAGE, guide([("brand-new", [para("brand new section", 50)]), *sections]))
    emb.inputs.clear()
    rep = h.run(full=True)
    new = page_texts(h)
    assert set(old) <= set(new)  # every old chunk text survives, at a shifted chunk_index
    assert len(new) == len(old) + rep.chunks_embedded
    assert rep.chunks_embedded >= 1 and all("brand" in t for t in emb.texts())
    assert rep.chunks_reused == len(old)
    assert_equals_fresh_index(h, tmp_path)


def test_changed_embedder_identity_is_refused_even_with_full(site, tmp_path):
    """Same dimension and, for this fake, even the same vectors for the same text: still not
    the same embedder. A --full pass does not switch models in place (reindex does): refused
    before anything is fetched, nothing embedded, reused or written."""
    h = Harness(site, tmp_path, embedder=RecordingEmbedder(16, "fake-model-a"))
    site.set(PAGE, guide(ten_sections()))
    h.run()
    before = h.points()
    h.embedder = RecordingEmbedder(16, "fake-model-b")
    site.clear_log()
    with pytest.raises(CollectionMismatchError, match="'fake-model-a'"):
        h.run(full=True, store=CountingStore(h.store_path, "pages"))
    assert site.requests == [] and h.embedder.texts() == [] and h.points() == before


def test_chunker_change_reuses_every_text_that_survives(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb, splitter=Splitter(chunk_size=400, chunk_overlap=0))
    site.set(PAGE, guide(ten_sections()))
    h.run()
    old = set(page_texts(h))
    h.splitter = Splitter(chunk_size=300, chunk_overlap=0)  # pipeline change, same embedder
    emb.inputs.clear()
    rep = h.run(full=True)
    new = page_texts(h)
    assert rep.changes[0]["reason"] == "pipeline changed"
    assert rep.chunks_reused == sum(t in old for t in new) > 0
    assert rep.chunks_embedded == len([t for t in new if t not in old]) == len(emb.texts())
    assert_equals_fresh_index(h, tmp_path)


def _edit_then_crash(site, tmp_path, crash: str, edit: str):
    """Index the ten-section guide, edit one section, and run a pass whose store write
    crashes at `crash`; (harness, recording embedder, that pass's report)."""
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    sections = ten_sections()
    site.set(PAGE, guide(sections))
    h.run()
    sections[3][1][0] = para(edit, 40)
    site.set(PAGE, guide(sections))
    CountingStore.crash = crash
    return h, emb, h.run(full=True, store=CountingStore(h.store_path, "pages"))


def test_crash_between_delete_and_insert_re_embeds_everything_next_pass(site, tmp_path):
    h, emb, rep = _edit_then_crash(site, tmp_path, "after-delete", "s3 edited before the crash")
    assert rep.pages_failed == 1
    assert page_texts(h) == []  # the old points are gone: nothing left to reuse
    with StateDB(h.state_path) as st:
        assert st.get(site.server.url(PAGE)).pending_hash is not None
    emb.inputs.clear()
    rep = h.run()  # not due by schedule: the pending mark brings it back
    assert rep.pages_changed == 1
    assert rep.chunks_reused == 0 and rep.chunks_embedded == len(page_texts(h)) == len(emb.texts())
    assert_equals_fresh_index(h, tmp_path)


def test_crash_after_the_write_landed_reuses_everything_next_pass(site, tmp_path):
    h, emb, rep = _edit_then_crash(site, tmp_path, "after-write", "s3 edited")
    assert rep.pages_failed == 1
    emb.inputs.clear()
    rep = h.run()  # pending: revisited; its new points are already there
    assert rep.pages_changed == 1 and rep.chunks_embedded == 0 and emb.inputs == []
    assert rep.chunks_reused == len(page_texts(h))
    assert_equals_fresh_index(h, tmp_path)


def test_store_read_failure_falls_back_to_embedding_every_chunk(site, tmp_path, caplog):
    # Reuse only saves work: a store that cannot be read costs CPU, never a failed page.
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    sections = ten_sections()
    site.set(PAGE, guide(sections))
    site.set("/other.html", guide([("x", [para("other page")])], title="Other"))
    h.run()
    sections[0][1][0] = para("s0 edited", 40)
    site.set(PAGE, guide(sections))
    site.set("/other.html", guide([("x", [para("other page, edited")])], title="Other"))
    CountingStore.fail_read = True
    emb.inputs.clear()
    rep = h.run(full=True, store=CountingStore(h.store_path, "pages"))
    assert rep.pages_changed == 2 and rep.pages_failed == 0
    assert CountingStore.reads == 1  # after the first failure the pass stops trying
    assert rep.chunks_reused == 0 and rep.chunks_embedded == rep.chunks_written == len(emb.texts())
    assert "could not read stored vectors" in caplog.text
    assert_equals_fresh_index(h, tmp_path)


@pytest.mark.parametrize("embed_batch", [1, 3, 64])
def test_batch_boundaries_never_cause_re_embedding_or_lost_chunks(site, tmp_path, embed_batch):
    # langchain-ai/langchain#32612: dedup decided per batch re-embeds text seen in another
    # batch, and a page split across batches loses or duplicates chunks. Here: shared texts
    # on several pages, a page much longer than a batch, batches of 1, 3 and 64 texts.
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    shared = para("shared admonition", 30)
    long_sections = [(f"l{k}", [para(f"l{k}", 40), shared]) for k in range(12)]
    site.set("/long.html", guide(long_sections, title="Long"))
    for i in range(4):  # one title: "P › Topic same" is the same embedded text on all four
        site.set(f"/p{i}.html", guide([("same", [shared]), (f"own{i}", [para(f"own {i}", 40)])], title="P"))
    rep = h.run(embed_batch=embed_batch)
    texts = [embedded(p) for p in h.points().values()]
    assert rep.chunks_written == len(texts) == rep.chunks_embedded + rep.chunks_reused
    assert rep.chunks_embedded == len(set(texts)) == len(emb.texts()) == len(set(emb.texts()))
    calls = [len(c) for c in emb.inputs]
    assert all(n >= embed_batch for n in calls[:-1]), calls  # reuse keeps model calls full
    assert_equals_fresh_index(h, tmp_path, "fresh1")

    # Edit the long page in two places and one small page; the shared text stays everywhere.
    long_sections[2][1][0] = para("l2 edited", 40)
    long_sections[9][1][0] = para("l9 edited", 40)
    site.set("/long.html", guide(long_sections, title="Long"))
    site.set("/p1.html", guide([("same", [shared]), ("own1", [para("own 1 edited", 40)])], title="P"))
    old = set(texts)
    emb.inputs.clear()
    rep = h.run(full=True, embed_batch=embed_batch)
    texts = [embedded(p) for p in h.points().values()]
    new_texts = {t for t in texts if t not in old}
    assert rep.pages_changed == 2
    assert rep.chunks_embedded == len(new_texts) == len(emb.texts()) and set(emb.texts()) == new_texts
    assert rep.chunks_reused == sum(
        1 for p in h.points().values() if p["url"].endswith(("/long.html", "/p1.html"))
    ) - len(new_texts)
    assert_equals_fresh_index(h, tmp_path, "fresh2")
    again = h.run(full=True, embed_batch=embed_batch)
    assert again.chunks_embedded == again.chunks_reused == again.chunks_written == 0


def test_identical_texts_in_one_pass_are_embedded_once(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    dup = para("duplicated paragraph", 40)
    # One title: the duplicate's heading path ("Same › Topic one") is the same on both pages.
    site.set("/a.html", guide([("one", [dup]), ("two", [para("a own", 40)]), ("one", [dup])], title="Same"))
    site.set("/b.html", guide([("one", [dup])], title="Same"))
    rep = h.run(embed_batch=1)  # /a and /b land in different batches
    pts = list(h.points().values())
    texts = [embedded(p) for p in pts]
    (shared,) = [t for t in set(texts) if texts.count(t) > 1]
    assert texts.count(shared) == 3 and dup in shared  # twice on /a, once on /b
    assert len(pts) == rep.chunks_written == rep.chunks_embedded + rep.chunks_reused
    assert len(emb.texts()) == len(set(emb.texts())) == rep.chunks_embedded == len(set(texts))
    assert_equals_fresh_index(h, tmp_path)


def test_dry_run_reports_what_would_be_reused_and_writes_nothing(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    sections = ten_sections()
    site.set(PAGE, guide(sections))
    h.run()
    before = snapshot(h)
    with StateDB(h.state_path) as st:
        state_before = st.all_pages()
    sections[5][1][0] = para("s5 edited", 40)
    site.set(PAGE, guide(sections))
    emb.inputs.clear()
    dry = h.run(full=True, dry_run=True)
    # Nothing embedded, reused or written: the would-be numbers have their own keys.
    assert emb.inputs == [] and dry.chunks_embedded == dry.chunks_written == dry.chunks_reused == 0
    assert dry.pages_changed == 1 and dry.chunks_would_reuse > 0
    (change,) = dry.changes
    assert change["reused"] == dry.chunks_would_reuse and change["chunks"] > change["reused"]
    assert dry.chunks_would_embed == change["chunks"] - change["reused"]
    assert f"would embed {dry.chunks_would_embed}, would reuse {dry.chunks_would_reuse}" in dry.summary()
    assert snapshot(h) == before
    with StateDB(h.state_path) as st:
        assert st.all_pages() == state_before
    rep = h.run(full=True)
    assert rep.chunks_reused == dry.chunks_would_reuse
    assert rep.chunks_embedded == dry.chunks_would_embed
    assert rep.chunks_would_embed == rep.chunks_would_reuse == 0


def test_dry_run_on_a_fresh_setup_reads_no_store_and_creates_none(site, tmp_path):
    h = Harness(site, tmp_path)
    site.set(PAGE, guide(ten_sections()))
    rep = h.run(dry_run=True, store=CountingStore(h.store_path, "pages"))
    assert rep.pages_added == 1 and rep.chunks_reused == rep.chunks_would_reuse == 0 and rep.changes[0]["reused"] == 0
    assert CountingStore.opens == CountingStore.reads == 0
    assert not (tmp_path / "qdrant").exists()


def test_nothing_to_write_means_no_store_opened_and_no_vectors_read(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    site.set(PAGE, guide(ten_sections()))
    rep = h.run(store=CountingStore(h.store_path, "pages"))
    assert rep.pages_added == 1 and CountingStore.reads == 0  # a new page has no points to read
    CountingStore.opens = 0
    emb.inputs.clear()
    rep = h.run(full=True, store=CountingStore(h.store_path, "pages"))
    assert rep.pages_not_modified == 1  # 304
    site.set(PAGE, guide(ten_sections(), nav=["Other", "Nav"]))  # new body and ETag, same text
    rep = h.run(full=True, store=CountingStore(h.store_path, "pages"), advance=timedelta(minutes=1))
    assert rep.pages_unchanged == 1  # 200, same hash
    assert CountingStore.opens == CountingStore.reads == 0 and emb.inputs == []


def test_no_reuse_embeds_every_chunk_and_repair_reads_no_stored_vectors(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    sections = ten_sections()
    site.set(PAGE, guide(sections))
    h.run()
    sections[1][1][0] = para("s1 edited", 40)
    site.set(PAGE, guide(sections))
    emb.inputs.clear()
    rep = h.run(full=True, reuse_vectors=False, store=CountingStore(h.store_path, "pages"))
    n = len(page_texts(h))
    assert rep.chunks_reused == 0 and rep.chunks_embedded == n == len(emb.texts()) and CountingStore.reads == 0
    assert_equals_fresh_index(h, tmp_path, "fresh1")

    emb.inputs.clear()
    rep = h.run(repair=[site.server.url(PAGE)], store=CountingStore(h.store_path, "pages"))
    assert rep.pages_changed == 1 and CountingStore.reads == 0
    assert rep.chunks_reused == 0 and rep.chunks_embedded == n
    assert_equals_fresh_index(h, tmp_path, "fresh2")


def test_reused_vectors_are_the_models_vectors_for_their_texts(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    sections = ten_sections()
    site.set(PAGE, guide(sections))
    h.run()
    for round_ in range(3):  # several generations of reuse: no drift
        sections[round_ * 3][1][0] = para(f"round {round_}", 40)
        site.set(PAGE, guide(sections))
        rep = h.run(full=True)
        assert rep.chunks_reused > 0
    pts, vecs = h.points(), h.vectors()
    for pid, p in pts.items():
        want = emb._one(embedded(p))
        assert max(abs(a - b) for a, b in zip(vecs[pid], want)) < 1e-6
        assert math.isclose(sum(x * x for x in vecs[pid]), 1.0, rel_tol=1e-5)


@pytest.mark.slow  # the command line as subprocesses
def test_cli_reports_chunks_reused_and_no_reuse_flag(site, tmp_path):
    sections = ten_sections()
    site.set(PAGE, guide(sections))
    assert cli_run(site, tmp_path, report="r1.json").returncode == 0
    sections[2][1][0] = para("s2 edited", 40)
    site.set(PAGE, guide(sections))
    r = cli_run(site, tmp_path, "--full", "--dry-run")
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("would")]
    assert "reused" in line and "would reuse" in r.stderr
    r = cli_run(site, tmp_path, "--full", report="r2.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r2.json").read_text())
    assert rep["chunks_reused"] > 0 and rep["chunks_embedded"] > 0
    assert rep["chunks_written"] == rep["chunks_embedded"] + rep["chunks_reused"]
    assert f"{rep['chunks_embedded']} embedded, {rep['chunks_reused']} reused" in r.stderr
    sections[2][1][0] = para("s2 edited again", 40)
    site.set(PAGE, guide(sections))
    r = cli_run(site, tmp_path, "--full", "--no-reuse", report="r3.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r3.json").read_text())
    assert rep["chunks_reused"] == 0 and rep["chunks_embedded"] == rep["chunks_written"] > 0


def test_permanently_moved_page_keeps_its_vectors_under_the_new_url(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    site.set("/old.html", guide(ten_sections()))
    h.run()
    n = len(h.points())
    site.set("/new.html", site.resources["/old.html"].body, in_sitemap=False)
    site.redirect("/old.html", "/new.html", status=301)
    site.resources["/old.html"].in_sitemap = True  # the sitemap still lists the old URL
    emb.inputs.clear()
    rep = h.run(full=True)
    assert rep.pages_removed == 1 and rep.pages_added == 1
    assert rep.chunks_embedded == 0 and emb.inputs == [] and rep.chunks_reused == n
    assert {p["url"] for p in h.points().values()} == {site.server.url("/new.html")}
    assert_equals_fresh_index(h, tmp_path)


def test_a_lost_state_re_embeds_nothing_the_collection_still_holds(site, harness):
    """Seen in use: after the state file was deleted, the next pass re-added every page and
    embedded all 757 chunks again, although their vectors were in the collection."""
    build_pages(site, n=4)
    first = harness.run()
    for f in harness.state_path.parent.glob(harness.state_path.name + "*"):
        f.unlink()
    rep = harness.run()
    assert rep.pages_added == 4 and rep.chunks_embedded == 0
    assert rep.chunks_reused == first.chunks_written
    assert_equals_fresh(harness)


# -- moves: vectors of pages leaving this pass --------------------------------------------


def _howto_section(site, n: int = 6) -> None:
    for i in range(n):
        site.set(
            f"/howto/p{i}.html",
            guide([(f"h{i}-{k}", [para(f"howto page {i} part {k}", 40)]) for k in range(4)], title=f"How to {i}"),
        )


def _texts(h: Harness) -> set[str]:
    return {embedded(p) for p in h.points().values()}


def test_a_renamed_section_listed_under_its_new_urls_reuses_the_removed_pages_vectors(site, tmp_path):
    """Seen in use: howto/ -> how-to/, the sitemap lists the new URLs and the old ones answer
    301. Every new page is an ADD with no points of its own and every old URL left the
    sitemap; their chunks are still in the store until the pass's purges, so the new pages
    take those vectors. Only texts stored nowhere before go to the model: one edited
    section of a moved page, a brand-new section of a new page (whose other section is the
    text of a page deleted this pass)."""
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    _howto_section(site)
    dropped = [("dropped", [para("a page deleted in the same deploy", 40)])]
    site.set("/dropped.html", guide(dropped, title="Dropped"))
    site.set("/index.html", guide([("home", [para("home page", 40)])], title="Home"))
    h.run()
    before = _texts(h)

    for i in range(6):
        body = site.resources[f"/howto/p{i}.html"].body
        if i == 5:  # moved and edited in the same deploy
            body = guide(
                [(f"h5-{k}", [para(f"howto page 5 part {k}" + (" edited" if k == 2 else ""), 40)]) for k in range(4)],
                title="How to 5",
            ).encode()
        site.set(f"/how-to/p{i}.html", body)
        site.redirect(f"/howto/p{i}.html", f"/how-to/p{i}.html")  # 301, out of the sitemap
    site.remove("/dropped.html")
    # The deleted page's title kept: its section's embedded text is the one stored before.
    site.set("/merged.html", guide([*dropped, ("fresh", [para("a brand new section", 40)])], title="Dropped"))
    emb.inputs.clear()
    rep = h.run(advance=timedelta(hours=1), allow_mass_delete=True)

    new = _texts(h) - before
    assert rep.pages_added == 7 and rep.pages_removed == 7 and rep.pages_failed == 0
    assert 2 <= len(new) <= 4 and all("edited" in t or "brand new" in t for t in new)
    assert rep.chunks_embedded == len(new) and set(emb.texts()) == new  # only texts stored nowhere before
    assert rep.chunks_reused == rep.chunks_written - len(new) >= 6 * 4 - 1  # every moved section but the edited one
    assert_equals_fresh_index(h, tmp_path)
    again = h.run(full=True, advance=timedelta(minutes=1))
    assert again.chunks_embedded == again.chunks_written == again.chunks_deleted == 0


class KeyCountingStore(CountingStore):
    """CountingStore that also counts (and can fail) reads of leaving pages' reuse keys."""

    key_reads = 0
    key_urls: list[str] = []
    fail_keys = False

    def reuse_keys_for_urls(self, urls, *, embedder=None):
        KeyCountingStore.key_reads += 1
        KeyCountingStore.key_urls += list(urls)
        if KeyCountingStore.fail_keys:
            raise StoreError("connection lost while reading keys")
        return super().reuse_keys_for_urls(urls, embedder=embedder)


@pytest.fixture(autouse=True)
def _reset_key_counting_store():
    KeyCountingStore.key_reads, KeyCountingStore.key_urls, KeyCountingStore.fail_keys = 0, [], False


def test_a_move_found_later_in_the_pass_still_lends_its_vectors_to_the_queued_new_page(site, tmp_path):
    """The sitemap lists both the new URL and the old one, which now answers 301 (or 404
    with its text moved): the new page is visited first (new pages go first) and its texts
    queued for the model before the old URL's answer is known. They are looked up again
    when the batch starts, so nothing is embedded."""
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    site.set("/a.html", guide(ten_sections(), title="A"))
    site.set("/b.html", guide([("b", [para("b", 40)]), ("b2", [para("b2", 40)])], title="B"))
    site.set("/keep.html", guide([("k", [para("keep", 40)])], title="Keep"))
    h.run()
    n = len(page_texts(h, "/a.html")) + len(page_texts(h, "/b.html"))
    site.set("/a-new.html", site.resources["/a.html"].body)
    listed = site.resources["/a.html"]
    site.redirect("/a.html", "/a-new.html")
    site.resources["/a.html"].in_sitemap = True  # the old URL is still listed
    site.resources["/a.html"].mtime = listed.mtime
    site.set("/b-new.html", site.resources["/b.html"].body)
    site.resources["/b.html"] = type(listed)(b"", status=404, mtime=site.resources["/b.html"].mtime)  # listed, 404
    emb.inputs.clear()
    rep = h.run(full=True, advance=timedelta(hours=1), allow_mass_delete=True)
    assert rep.pages_added == 2 and rep.pages_removed == 2 and rep.pages_failed == 0
    assert rep.chunks_embedded == 0 and emb.inputs == [] and rep.chunks_reused == n
    assert_equals_fresh_index(h, tmp_path)


def test_a_page_moved_to_another_host_in_scope_keeps_its_vectors(site, tmp_path):
    from demo.site_server import Site, SiteServer

    other = Site()
    with SiteServer(other) as server:
        other.server = server  # type: ignore[attr-defined]
        emb = RecordingEmbedder()
        h = Harness(site, tmp_path, embedder=emb)
        maps = [site.server.url("/sitemap.xml"), other.server.url("/sitemap.xml")]
        site.set("/guide.html", guide(ten_sections()))
        site.set("/stays.html", guide([("s", [para("stays", 40)])], title="Stays"))
        other.set("/home.html", guide([("h", [para("home on b", 40)])], title="Home"))
        h.run(sitemaps=maps)
        moved = len(page_texts(h))
        other.set("/docs/guide.html", site.resources["/guide.html"].body)
        site.redirect("/guide.html", other.server.url("/docs/guide.html"))
        emb.inputs.clear()
        rep = h.run(sitemaps=maps, advance=timedelta(hours=1), allow_mass_delete=True)
        assert rep.pages_added == 1 and rep.pages_removed == 1
        assert rep.chunks_embedded == 0 and emb.inputs == [] and rep.chunks_reused == moved
        urls = {p["url"] for p in h.points().values()}
        assert other.server.url("/docs/guide.html") in urls and site.server.url("/guide.html") not in urls


def test_leaving_pages_are_read_only_when_a_written_page_needs_them_and_within_the_budget(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    for i in range(4):
        site.set(
            f"/old{i}.html",
            guide([(f"o{i}", [para(f"old {i}", 40)]), (f"o{i}b", [para(f"old {i} b", 40)])], title=f"Old {i}"),
        )
    site.set("/keep.html", guide([("k", [para("keep", 40)])], title="Keep"))
    h.run()
    # Two pages leave and nothing is written: no keys, no vectors read.
    site.remove("/old0.html")
    site.remove("/old1.html")
    rep = h.run(advance=timedelta(hours=1), allow_mass_delete=True, store=KeyCountingStore(h.store_path, "pages"))
    assert rep.pages_removed == 2 and KeyCountingStore.key_reads == 0 and CountingStore.reads == 0

    # Two more leave, their texts move to two new pages; a budget of 3 chunks holds one of
    # the two leaving pages (2 chunks each, one a section; the title is in their heading
    # paths), whose texts are reused.
    for i in (2, 3):
        site.set(f"/new{i}.html", site.resources[f"/old{i}.html"].body)
        site.remove(f"/old{i}.html")
    emb.inputs.clear()
    rep = h.run(
        advance=timedelta(hours=2),
        allow_mass_delete=True,
        reuse_leaving_chunks=3,
        store=KeyCountingStore(h.store_path, "pages"),
    )
    per_page = len(page_texts(h, "/new2.html"))
    assert per_page == 2 and rep.pages_added == 2 and rep.pages_removed == 2
    assert KeyCountingStore.key_reads == 1 and len(KeyCountingStore.key_urls) == 1  # keys read once, one page
    # Vectors of that leaving page only, beside each new page's look-up of its own URL (a
    # page new to the state may have points when the state was lost: none here).
    assert CountingStore.reads == 1 + rep.pages_added
    assert rep.chunks_reused == per_page and rep.chunks_embedded == per_page == len(emb.texts())
    assert_equals_fresh_index(h, tmp_path)


@pytest.mark.parametrize("fail", ["keys", "vectors"])
def test_a_failed_read_of_leaving_pages_embeds_their_texts_and_fails_nothing(site, tmp_path, caplog, fail):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    site.set("/old.html", guide(ten_sections()))
    site.set("/keep.html", guide([("k", [para("keep", 40)])], title="Keep"))
    h.run()
    n = len(page_texts(h, "/old.html"))
    site.set("/new.html", site.resources["/old.html"].body)
    site.remove("/old.html")
    KeyCountingStore.fail_keys = fail == "keys"
    CountingStore.fail_read = fail == "vectors"
    emb.inputs.clear()
    rep = h.run(advance=timedelta(hours=1), allow_mass_delete=True, store=KeyCountingStore(h.store_path, "pages"))
    assert rep.ok and rep.pages_added == 1 and rep.pages_removed == 1 and rep.pages_failed == 0
    assert rep.chunks_reused == 0 and rep.chunks_embedded == n == len(emb.texts())
    assert "could not read" in caplog.text
    assert_equals_fresh_index(h, tmp_path)


def test_dry_run_counts_a_moves_reuse_as_the_pass_then_does(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    _howto_section(site, 3)
    site.set("/keep.html", guide([("k", [para("keep", 40)])], title="Keep"))
    h.run()
    before = snapshot(h)
    for i in range(3):
        site.set(f"/how-to/p{i}.html", site.resources[f"/howto/p{i}.html"].body)
        site.redirect(f"/howto/p{i}.html", f"/how-to/p{i}.html")
    emb.inputs.clear()
    dry = h.run(dry_run=True, advance=timedelta(hours=1), allow_mass_delete=True)
    assert emb.inputs == [] and snapshot(h) == before
    assert dry.chunks_would_embed == 0 and dry.chunks_would_reuse == sum(
        len(page_texts(h, f"/howto/p{i}.html")) for i in range(3)
    )
    rep = h.run(allow_mass_delete=True)
    assert rep.chunks_embedded == 0 and rep.chunks_reused == dry.chunks_would_reuse


def test_a_301_chain_from_a_url_still_listed_keeps_its_vectors(site, tmp_path):
    emb = RecordingEmbedder()
    h = Harness(site, tmp_path, embedder=emb)
    site.set("/old.html", guide(ten_sections()))
    h.run()
    n = len(h.points())
    site.set("/final.html", site.resources["/old.html"].body, in_sitemap=False)
    site.redirect("/mid.html", "/final.html")
    site.redirect("/old.html", "/mid.html")
    site.resources["/old.html"].in_sitemap = True  # old -> mid -> final, the old URL still listed
    emb.inputs.clear()
    rep = h.run(full=True, advance=timedelta(hours=1))
    assert rep.pages_removed == 1 and rep.pages_added == 1
    assert rep.chunks_embedded == 0 and emb.inputs == [] and rep.chunks_reused == n
    assert {p["url"] for p in h.points().values()} == {site.server.url("/final.html")}
    assert_equals_fresh_index(h, tmp_path)
