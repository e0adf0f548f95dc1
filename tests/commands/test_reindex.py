"""`pagesync reindex`: a new collection beside the live one, verified, then an alias switch.

On the embedded store (Qdrant Edge, aliases in a pointer file) and on qdrant-client's local
mode (Qdrant's own aliases, standing in for a server); on a real server when QDRANT_URL is
set (or Docker answers), else those tests are skipped. Every test uses the fake embedder.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from chunking import EXTRACTOR_ID, Splitter
from embedders import HashEmbedder
from sync.edges.aliasfile import read_aliases, resolve_alias, write_alias
from sync.commands.audit import audit_collection
from sync.edges.catalog import ClientCatalog, EdgeCatalog
from sync.errors import ConfigError, StoreError
from sync.core.hashing import pipeline_fingerprint
from sync.commands.reindex import ReindexConfig, ReindexFailed, new_collection_name, run_reindex
from sync.edges.state import StateDB
from sync.commands.status import collect_status
from sync.edges.client_store import ClientStore
from sync.edges.edge_store import EdgeStore
from sync.commands.transfer import export_points
from tests.cli_helpers import cli, one_error_line, parallel, sitemap, stored
from tests.helpers import EMB16, EMB32, T0, Harness, build_long_pages, page_html, para, reindex


class SharedClientStore(ClientStore):
    """A ClientStore that leaves the shared (local-mode) client open when closed."""

    def close(self) -> None:
        pass


def without(points: dict[str, dict], *keys: str) -> dict[str, dict]:
    return {pid: {k: v for k, v in p.items() if k not in keys} for pid, p in points.items()}


def vectors(store) -> dict[str, list[float]]:
    try:
        return {p.id: p.vector for p in store.scroll(with_vectors=True)}
    finally:
        store.close()


def state_pages(h: Harness) -> dict:
    with StateDB(h.state_path) as st:
        return {p.url: p for p in st.all_pages()}


# -- the page texts kept in the state ------------------------------------------------------------
def test_state_keeps_texts_of_written_pages_and_forgets_purged_ones(site, harness):
    urls = build_long_pages(site, n=3)
    harness.run()
    with StateDB(harness.state_path) as st:
        pages = {p.url: p for p in st.all_pages()}
        kept = st.get_texts(urls)
        assert {u: h for u, (h, _) in kept.items()} == {u: pages[u].content_hash for u in urls}
        assert "p0-s0" in kept[urls[0]][1]
        assert st.text_hashes() == {u: pages[u].content_hash for u in urls}
        raw = st._db.execute("SELECT length(text) FROM page_texts WHERE url = ?", (urls[0],)).fetchone()[0]
        assert raw < len(kept[urls[0]][1].encode())  # compressed
    site.remove("/p2.html")
    harness.run(full=True)
    with StateDB(harness.state_path) as st:
        assert set(st.text_hashes()) == set(urls[:2])


def test_an_old_state_file_gains_the_texts_table(tmp_path):
    StateDB(tmp_path / "old.db").close()
    db = sqlite3.connect(str(tmp_path / "old.db"))
    db.execute("DROP TABLE page_texts")  # a state file written before texts were kept
    db.close()
    with StateDB(tmp_path / "old.db") as st:
        st.put_texts([("https://x.example/a", "h", "# A\n\ntext")])
        assert st.get_texts(["https://x.example/a"]) == {"https://x.example/a": ("h", "# A\n\ntext")}
        st.drop_texts(["https://x.example/a"])
        assert st.text_hashes() == {}


# -- aliases on the embedded store ---------------------------------------------------------------
def test_edge_alias_file_is_resolved_and_guarded(tmp_path):
    assert read_aliases(tmp_path) == {} and resolve_alias(tmp_path, "pages") == "pages"
    write_alias(tmp_path, "pages", "pages__1")
    write_alias(tmp_path, "docs", "docs__1")
    write_alias(tmp_path, "docs", None)
    assert read_aliases(tmp_path) == {"pages": "pages__1"}
    assert EdgeStore(tmp_path, "pages").dir == tmp_path / "pages__1"
    assert EdgeStore(tmp_path, "pages", resolve_alias=False).dir == tmp_path / "pages"
    assert [p.name for p in tmp_path.iterdir()] == ["aliases.json"]  # no temp files left
    (tmp_path / "aliases.json").write_text('{"aliases": {"pages": "../../etc"}}')
    with pytest.raises(StoreError, match="damaged"):
        EdgeStore(tmp_path, "pages").exists()


def test_new_collection_names():
    from datetime import datetime, timezone

    now = datetime(2026, 11, 30, 9, 12, 0, tzinfo=timezone.utc)
    assert new_collection_name("pages", now, set()) == "pages__20261130t091200"
    assert new_collection_name("pages", now, {"pages__20261130t091200"}) == "pages__20261130t091200_2"


def test_an_edge_shard_in_use_is_waited_for(tmp_path):
    a = EdgeStore(tmp_path, "c")
    a.ensure_collection(4)
    a.count()
    b = EdgeStore(tmp_path, "c", lock_wait=0.3)
    with pytest.raises(StoreError, match="open in another process"):
        b.count()
    threading.Timer(0.2, a.close).start()
    assert EdgeStore(tmp_path, "c", lock_wait=10).count() == 0


# -- the main path -------------------------------------------------------------------------------
def test_reindex_16_to_32_on_edge_then_run_embeds_nothing(site, harness):
    urls = build_long_pages(site)
    harness.run()
    before = harness.points()
    old_vectors = vectors(EdgeStore(harness.store_path, "pages"))

    rep = reindex(harness, EMB32)
    assert rep.ok and rep.switched and rep.source == "pages" and rep.target.startswith("pages__")
    assert rep.text_sources == {"state": 4, "points": 0, "fetch": 0}
    assert (
        rep.pages == 4 and rep.chunks == len(before) == rep.chunks_embedded + rep.chunks_reused == rep.verify["points"]
    )
    assert rep.chunks_embedded == len({p["text"] for p in before.values()})  # each distinct text once
    assert rep.kept == ["pages"] and rep.dropped == [] and rep.gap_seconds is None
    assert read_aliases(harness.store_path) == {"pages": rep.target}

    # readers of the alias: 32-d vectors, the same ids and payloads but the embedder's name
    after = harness.points()
    assert set(after) == set(before)
    assert without(after, "embedder") == without(before, "embedder")
    assert {p["embedder"] for p in after.values()} == {"fake-hash-32"}
    new_vectors = vectors(EdgeStore(harness.store_path, "pages"))
    assert {len(v) for v in new_vectors.values()} == {32}
    # the old collection is kept as it was
    assert vectors(EdgeStore(harness.store_path, "pages", resolve_alias=False)) == old_vectors
    with StateDB(harness.state_path) as st:
        store = EdgeStore(harness.store_path, "pages")
        assert audit_collection(store, st).ok
        assert collect_status(st, store, T0)["points"] == len(before)
        store.close()
        fp = pipeline_fingerprint("fake-hash-32", f"{EXTRACTOR_ID}/{harness.splitter.settings}")
        assert {p.fingerprint for p in st.all_pages()} == {fp}
        last = st.last_run()
        assert last["kind"] == "reindex" and last["embedder"] == "fake-hash-32" and last["target"] == rep.target

    # the next pass with the new embedder embeds nothing; with the old one it is refused (exit 2)
    nxt = harness.run(embedder=EMB32, full=True)
    assert (nxt.chunks_embedded, nxt.chunks_written, nxt.pages_not_modified) == (0, 0, 4)
    with pytest.raises(ConfigError, match="16"):
        harness.run(embedder=EMB16, full=True)

    # a page edit after the switch lands in the aliased collection
    site.set("/p1.html", page_html("Page 1", [para("p1-new", 80)]))
    assert harness.run(embedder=EMB32, full=True).pages_changed == 1
    assert {p["url"] for p in harness.points().values() if "p1-new" in p["text"]} == {urls[1]}

    # a second reindex with --drop-old: the previous collection and the shadowed plain one go
    rep2 = reindex(harness, HashEmbedder(8), drop_old=True, now=None)
    assert rep2.source == rep.target and set(rep2.dropped) == {rep.target, "pages"}
    assert sorted(p.name for p in harness.store_path.iterdir()) == ["aliases.json", rep2.target]
    with StateDB(harness.state_path) as st:
        assert audit_collection(EdgeStore(harness.store_path, "pages"), st).ok


def test_dry_run_writes_nothing(site, harness):
    build_long_pages(site, n=3)
    harness.run()
    with StateDB(harness.state_path) as st:
        st._db.execute("DELETE FROM page_texts WHERE url = ?", (site.server.url("/p2.html"),))
    files = sorted(p.name for p in harness.store_path.iterdir())
    state_before = state_pages(harness)
    n = site.count()
    rep = reindex(harness, EMB32, dry_run=True, drop_old=True)
    assert rep.ok and not rep.switched and rep.dry_run
    assert rep.text_sources == {"state": 2, "points": 1, "fetch": 0}
    assert rep.chunks == len(harness.points())
    assert [e["source"] for e in rep.plan] == ["state", "state", "points"]
    assert "would build" in rep.summary() and "delete 'pages'" in rep.summary()
    assert sorted(p.name for p in harness.store_path.iterdir()) == files
    assert state_pages(harness) == state_before
    assert site.count() == n  # nothing fetched


def test_each_text_source(site, harness):
    """Kept text, old points, and a re-fetch (no text kept and old points unusable: another
    chunker's, or a generation with a chunk missing; and a page that changed meanwhile)."""
    urls = build_long_pages(site, n=5)
    harness.run()
    old = harness.points()
    with StateDB(harness.state_path) as st:
        st.drop_texts(urls[1:])  # as if written before texts were kept
        st._db.executemany("UPDATE pages SET fingerprint = 'another-chunker' WHERE url = ?", [(urls[2],), (urls[4],)])
    store = EdgeStore(harness.store_path, "pages")
    gap = next(pid for pid, p in old.items() if p["url"] == urls[3] and p["chunk_index"] == 1)
    store.delete_points([gap])
    store.close()
    site.set("/p4.html", page_html("Page 4, edited", [para("p4-edited", 80)]))

    rep = reindex(harness, EMB32)
    assert rep.text_sources == {"state": 1, "points": 1, "fetch": 3}
    assert rep.pages_fetched == 3 and rep.pages_changed == 1
    assert [site.count(path=f"/p{i}.html") for i in range(5)] == [1, 1, 2, 2, 2]  # the pass's GET + the re-fetch
    after = harness.points()
    # the same points as before (the lost chunk back too), whatever the source; only the model differs
    unchanged = set(urls[:4])
    assert without({k: v for k, v in after.items() if v["url"] in unchanged}, "embedder") == without(
        {k: v for k, v in old.items() if v["url"] in unchanged}, "embedder"
    )
    edited = [p for p in after.values() if p["url"] == urls[4]]
    assert any("p4-edited" in p["text"] for p in edited)
    assert not any("p4-s0" in p["text"] for p in edited)
    with StateDB(harness.state_path) as st:
        pages = {p.url: p for p in st.all_pages()}
        assert "edited" in pages[urls[4]].title
        assert pages[urls[4]].chunk_count == len(edited)
        assert set(st.text_hashes()) == {urls[0], *urls[2:]}  # re-fetched texts are kept now
        assert audit_collection(EdgeStore(harness.store_path, "pages"), st).ok
    # the edit was taken in by the reindex: the next pass finds nothing to do
    nxt = harness.run(embedder=EMB32, full=True)
    assert nxt.chunks_embedded == 0 and nxt.pages_changed == 0


def test_a_new_chunker_uses_kept_texts_and_old_points_are_not_reused(site, harness):
    build_long_pages(site, n=3)
    harness.run()
    old = harness.points()
    finer = Splitter(chunk_size=200, chunk_overlap=0)
    rep = reindex(harness, EMB16, splitter=finer)
    assert rep.text_sources == {"state": 3, "points": 0, "fetch": 0}
    assert rep.chunks > len(old)
    with StateDB(harness.state_path) as st:
        st.drop_texts([p.url for p in st.all_pages()])
    rep = reindex(harness, EMB16, splitter=Splitter(chunk_size=300, chunk_overlap=0))
    assert rep.text_sources == {"state": 0, "points": 0, "fetch": 3}
    with StateDB(harness.state_path) as st:
        assert audit_collection(EdgeStore(harness.store_path, "pages"), st).ok


# -- failures leave the alias where it was ---------------------------------------------------------
class FailingEmbedder(HashEmbedder):
    def __init__(self, dimension: int, fail_on_call: int):
        super().__init__(dimension)
        self.fail_on_call = fail_on_call

    def embed(self, texts):
        if self.calls + 1 == self.fail_on_call:
            raise RuntimeError("model crashed")
        return super().embed(texts)


def test_a_failure_mid_build_leaves_the_alias_on_the_old_collection(site, harness):
    build_long_pages(site)
    harness.run()
    rep = reindex(harness, EMB16)  # the alias exists now: pages -> pages__...
    alias_before = read_aliases(harness.store_path)
    points_before = harness.points()
    state_before = state_pages(harness)

    with pytest.raises(ReindexFailed) as exc:
        reindex(harness, FailingEmbedder(32, fail_on_call=2), embed_batch=8)
    r = exc.value.report
    assert "model crashed" in str(exc.value) and r.target in str(exc.value) and "\n" not in str(exc.value)
    assert f"still points at {rep.target!r}" in str(exc.value)
    assert not r.switched and r.kept == [r.target]
    assert read_aliases(harness.store_path) == alias_before
    assert harness.points() == points_before
    assert state_pages(harness) == state_before
    half = EdgeStore(harness.store_path, r.target, resolve_alias=False)
    assert 0 < half.count() < len(points_before)
    half.close()

    with pytest.raises(ReindexFailed, match="deleted"):
        reindex(harness, FailingEmbedder(32, fail_on_call=2), embed_batch=8, drop_failed=True)
    assert read_aliases(harness.store_path) == alias_before
    with StateDB(harness.state_path) as st:
        assert st.last_run()["target"] == rep.target  # failures are not recorded as runs


class LossyCatalog(EdgeCatalog):
    """The new collection silently loses one point per write: verification must catch it."""

    def open(self, name):
        store = super().open(name)
        upsert = store.upsert
        store.upsert = lambda points: upsert(list(points)[1:])
        return store


def test_a_collection_that_fails_verification_is_not_switched_to(site, harness):
    build_long_pages(site, n=2)
    harness.run()
    with pytest.raises(ReindexFailed, match="verification failed") as exc:
        reindex(harness, EMB32, catalog=LossyCatalog(harness.store_path))
    assert "missing" in str(exc.value) or "broken" in str(exc.value)
    assert read_aliases(harness.store_path) == {}
    assert exc.value.report.verify["audit"]["ok"] is False
    assert {len(v) for v in vectors(EdgeStore(harness.store_path, "pages")).values()} == {16}


def test_a_page_that_cannot_be_read_again_fails_the_reindex(site, harness):
    urls = build_long_pages(site, n=3)
    harness.run()
    with StateDB(harness.state_path) as st:
        st.drop_texts(urls)
        st._db.execute("UPDATE pages SET fingerprint = 'x'")
    site.error("/p1.html", 500)
    with pytest.raises(ReindexFailed, match="could not be read again") as exc:
        reindex(harness, EMB32, drop_failed=True)
    assert exc.value.report.errors[0]["url"] == urls[1]
    assert read_aliases(harness.store_path) == {}
    assert sorted(p.name for p in harness.store_path.iterdir()) == ["pages"]


def test_nothing_to_reindex_is_a_config_error(site, harness, tmp_path):
    with StateDB(tmp_path / "s.db") as st, pytest.raises(ConfigError, match="does not exist"):
        run_reindex(EdgeCatalog(tmp_path / "q"), "pages", state=st, embedder=EMB16)
    build_long_pages(site, n=1)
    harness.run()
    with StateDB(tmp_path / "empty.db") as st, pytest.raises(ConfigError, match="no indexed pages"):
        run_reindex(EdgeCatalog(harness.store_path), "pages", state=st, embedder=EMB16)


# -- readers during a reindex ----------------------------------------------------------------------
class SlowEmbedder(HashEmbedder):
    def embed(self, texts):
        time.sleep(0.05)
        return super().embed(texts)


class Reader(threading.Thread):
    """Counts the alias's points and searches it, again and again, recording what it saw."""

    def __init__(self, look):
        super().__init__(daemon=True)
        self.look, self.seen, self.errors = look, [], []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.seen.append(self.look())
            except Exception as exc:  # noqa: BLE001 - recorded, asserted empty
                self.errors.append(repr(exc))
            time.sleep(0.005)


def edge_look(path: Path):
    def look():
        store = EdgeStore(path, "pages")
        try:
            n = store.count()  # opens the shard the alias names now, and pins it
            dim = store.vector_size()
            hits = store.search(HashEmbedder(dim).embed(["configure the server"])[0], limit=3)
            return n, {h[1]["embedder"] for h in hits}
        finally:
            store.close()

    return look


def client_look(client):
    def look():
        # A reader that knows both models: the query vector must fit the collection it hits.
        for _ in range(3):
            dim = client.get_collection("pages").config.params.vectors.size
            try:
                res = client.query_points("pages", query=HashEmbedder(dim).embed(["configure the server"])[0], limit=3)
            except Exception:  # the alias moved between the two calls: look again
                continue
            n = client.count("pages", exact=True).count
            return n, {p.payload["embedder"] for p in res.points}
        raise AssertionError("no consistent look")

    return look


@pytest.mark.parametrize("backend", ["edge", "local"])
def test_readers_never_see_a_partial_collection(site, harness, backend):
    build_long_pages(site, n=6)
    if backend == "edge":
        harness.run()
        catalog = EdgeCatalog(harness.store_path)
        look = edge_look(harness.store_path)
    else:
        client = QdrantClient(location=":memory:")
        harness.run(store=SharedClientStore(client, "pages"))
        catalog = ClientCatalog(client)
        # The first switch of a plain server collection has a gap (covered below): make the alias first.
        reindex(harness, EMB16, catalog=catalog, drop_old=True)
        look = client_look(client)
    total = len(harness.points(store=catalog.open("pages") if backend == "local" else None))

    reader = Reader(look)
    reader.start()
    while len(reader.seen) < 3 and not reader.errors:
        time.sleep(0.01)
    rep = reindex(harness, SlowEmbedder(32), catalog=catalog, embed_batch=4)
    n_switch = len(reader.seen)
    deadline = time.monotonic() + 60  # ends at the third look; the bound only stops a hang
    while len(reader.seen) < n_switch + 3 and time.monotonic() < deadline and not reader.errors:
        time.sleep(0.01)
    reader.stop.set()
    reader.join()

    assert rep.ok and rep.chunks_embedded + rep.chunks_reused == total and rep.chunks_embedded > 8
    assert reader.errors == []
    assert {n for n, _ in reader.seen} == {total}, "a reader saw an empty or partial collection"
    models = [m for _, m in reader.seen]
    assert all(len(m) == 1 for m in models), "a reader saw two models at once"
    order = [next(iter(m)) for m in models]
    first_new = order.index("fake-hash-32")
    assert set(order[:first_new]) == {"fake-hash-16"} and set(order[first_new:]) == {"fake-hash-32"}


def test_local_mode_first_switch_needs_drop_old_or_another_alias(site, harness):
    build_long_pages(site, n=2)
    client = QdrantClient(location=":memory:")
    harness.run(store=SharedClientStore(client, "pages"))
    catalog = ClientCatalog(client)
    with pytest.raises(ConfigError, match="--drop-old"):
        reindex(harness, EMB32, catalog=catalog)
    assert client.get_aliases().aliases == [] and client.collection_exists("pages")

    rep = reindex(harness, EMB32, catalog=catalog, alias="docs")  # readers move to "docs"; "pages" stays
    assert {a.alias_name: a.collection_name for a in client.get_aliases().aliases} == {"docs": rep.target}
    assert rep.kept == ["pages"] and client.get_collection("pages").config.params.vectors.size == 16

    rep = reindex(harness, HashEmbedder(24), catalog=catalog, collection="docs", drop_old=True)
    assert rep.source.startswith("docs__") and rep.dropped == [rep.source]
    assert client.get_collection("docs").config.params.vectors.size == 24
    assert not client.collection_exists(rep.source)

    # the same thing in place: "pages" is deleted, then the alias takes its name (a short gap)
    rep = reindex(harness, HashEmbedder(24), catalog=catalog, collection="pages", drop_old=True)
    assert rep.replaced_collection and rep.gap_seconds is not None and rep.dropped == ["pages"]
    assert {a.alias_name: a.collection_name for a in client.get_aliases().aliases}["pages"] == rep.target
    # every reader goes through the alias: audit, status, export, search, and the next pass
    reader = SharedClientStore(client, "pages")
    with StateDB(harness.state_path) as st:
        assert audit_collection(reader, st).ok
        assert collect_status(st, reader, T0)["points"] == rep.chunks
    out = io.StringIO()
    assert export_points(reader, out, with_vectors=True) == rep.chunks
    assert {len(json.loads(line)["vector"]) for line in out.getvalue().splitlines()} == {24}
    assert {h[1]["embedder"] for h in reader.search(HashEmbedder(24).embed(["configure"])[0])} == {"fake-hash-24"}
    assert harness.run(embedder=HashEmbedder(24), store=reader, full=True).chunks_embedded == 0


def test_reindex_with_the_page_state_in_qdrant(site, tmp_path):
    """`--state qdrant` keeps no texts: they come from the old points; the state stays beside
    the name readers use, so the next pass finds it whatever the alias points at."""
    from sync.edges.qdrant_state import QdrantState

    build_long_pages(site, n=3)
    h = Harness(site, tmp_path, state="qdrant")
    h.run()
    before = h.points()
    store = h.open_store()
    try:
        with h.open_state(store) as st:
            rep = run_reindex(
                ClientCatalog.of(store),
                "pages",
                state=st,
                embedder=EMB32,
                splitter=h.splitter,
                cfg=ReindexConfig(drop_old=True),
            )
        assert rep.text_sources == {"state": 0, "points": 3, "fetch": 0} and rep.replaced_collection
        assert isinstance(st, QdrantState) and st.last_run()["kind"] == "reindex"
    finally:
        store.close()
    assert without(h.points(), "embedder") == without(before, "embedder")
    nxt = h.run(embedder=EMB32, full=True)
    assert nxt.chunks_embedded == 0 and nxt.pages_not_modified == 3


# -- a real server (skipped without QDRANT_URL or Docker) --------------------------------------------
@pytest.mark.server
def test_server_alias_switch(site, harness, qdrant_server):
    url, key = qdrant_server
    name = f"pagesync_reindex_{uuid.uuid4().hex[:10]}"
    build_long_pages(site, n=3)
    store = ClientStore.connect(url, name, api_key=key, timeout=10)
    catalog = ClientCatalog.of(store)
    harness.run(store=SharedClientStore(store.client, name, api_key=key))
    created = []
    try:
        with pytest.raises(ConfigError, match="--drop-old"):
            reindex(harness, EMB32, catalog=catalog, collection=name)
        rep = reindex(harness, EMB32, catalog=catalog, collection=name, drop_old=True)
        created.append(rep.target)
        assert rep.replaced_collection and rep.gap_seconds >= 0  # measured and reported (its length is the machine's)
        assert catalog.aliases()[name] == rep.target and name not in catalog.collections()
        reader = Reader(client_look_named(store.client, name))
        reader.start()
        rep2 = reindex(harness, SlowEmbedder(16), catalog=catalog, collection=name, embed_batch=4, drop_old=True)
        created.append(rep2.target)
        reader.stop.set()
        reader.join()
        assert reader.errors == [] and len({n for n, _ in reader.seen}) == 1
        assert catalog.aliases()[name] == rep2.target and rep.target not in catalog.collections()
        with StateDB(harness.state_path) as st:
            assert audit_collection(SharedClientStore(store.client, name, api_key=key), st).ok
    finally:
        with contextlib.suppress(Exception):
            store.client.delete_collection(name)
        for c in created:
            with contextlib.suppress(Exception):
                store.client.delete_collection(c)
        store.close()


def client_look_named(client, name):
    def look():
        for _ in range(3):
            dim = client.get_collection(name).config.params.vectors.size
            try:
                res = client.query_points(name, query=HashEmbedder(dim).embed(["configure"])[0], limit=3)
            except Exception:
                continue
            return client.count(name, exact=True).count, {p.payload["embedder"] for p in res.points}
        raise AssertionError("no consistent look")

    return look


# -- the command line --------------------------------------------------------------------------------
@pytest.mark.slow  # the command line as subprocesses
def test_cli_reindex_then_every_reader_goes_through_the_alias(site, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    common = ["--qdrant-path", "q", "--state", "s.db"]
    r = cli(work, "reindex", *common, "--embedder", "fake")
    assert r.returncode == 2 and "no page state" in one_error_line(r)
    build_long_pages(site, n=3)
    r = cli(work, "run", "--sitemap", sitemap(site), *common, "--embedder", "fake-16")
    assert r.returncode == 0, r.stderr
    before = stored(work)

    dry, nope = parallel(
        lambda: cli(work, "reindex", *common, "--embedder", "fake-32", "--dry-run"),
        lambda: cli(work, "reindex", "--collection", "nope", *common, "--embedder", "fake-32"),
    )
    assert dry.returncode == 0, dry.stderr
    assert "would build" in dry.stdout and dry.stdout.count("would reindex") == 3
    assert nope.returncode == 2 and "does not exist" in one_error_line(nope)
    assert sorted(p.name for p in (work / "q").iterdir()) == ["pages"]

    r = cli(work, "reindex", *common, "--embedder", "fake-32", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["switched"] and rep["kind"] == "reindex"
    assert rep["text_sources"] == {"state": 3, "points": 0, "fetch": 0} and rep["chunks"] == len(before)

    # every reader, side by side: export, search and audit wait for the embedded shard, one
    # at a time; status waits for it only briefly (it answers while a pass runs), so beside
    # them it counts the points or says that another process holds them, by the luck of
    # the scheduler, and reports the state either way
    ex, se, au, sta = parallel(
        lambda: cli(work, "export", *common, "--with-vectors"),
        lambda: cli(work, "search", "configure", "--qdrant-path", "q", "--embedder", "fake-32", "--json"),
        lambda: cli(work, "audit", *common),
        lambda: cli(work, "status", *common, "--json"),
    )
    exported = [json.loads(line) for line in ex.stdout.splitlines()]
    assert {len(e["vector"]) for e in exported} == {32}
    assert {e["id"]: e["payload"]["text"] for e in exported} == {pid: p["text"] for pid, p in before.items()}
    assert se.returncode == 0 and {h["payload"]["embedder"] for h in json.loads(se.stdout)} == {"fake-hash-32"}
    assert au.returncode == 0, au.stdout + au.stderr
    info = json.loads(sta.stdout)
    assert sta.returncode == 0 and info["last_pass"]["kind"] == "reindex"
    held = [w for w in info["warnings"] if w.startswith("points not counted")]
    assert (info["points"], held) == (len(before), []) or (info["points"] is None and len(held) == 1), info
    # alone, status counts the new collection's points through the alias
    assert json.loads(cli(work, "status", *common, "--json").stdout)["points"] == len(before)

    # the next pass: with the new embedder nothing is embedded; with the old one, exit 2
    r = cli(work, "run", "--sitemap", sitemap(site), *common, "--embedder", "fake-32", "--full", "--report", "R.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((work / "R.json").read_text())["chunks_embedded"] == 0
    r = cli(work, "run", "--sitemap", sitemap(site), *common, "--embedder", "fake-16")
    assert r.returncode == 2 and "32-dimensional" in one_error_line(r)

    # a build failure (pages neither kept nor reusable, one failing now): exit 1, one line,
    # nothing switched, the half-built collection named
    alias = read_aliases(work / "q")
    with StateDB(work / "s.db") as st:
        st._db.execute("UPDATE pages SET fingerprint = 'another-chunker'")
        st.drop_texts([p.url for p in st.all_pages()])
    site.error("/p1.html", 503)
    r = cli(work, "reindex", *common, "--embedder", "fake-8")
    assert r.returncode == 1, r.stderr
    line = one_error_line(r)
    assert "reindex failed" in line and "kept for inspection" in line and "pages__" in line
    assert read_aliases(work / "q") == alias

    build_long_pages(site, n=3)
    r = cli(work, "reindex", *common, "--embedder", "fake-8", "--drop-old")
    assert r.returncode == 0, r.stderr
    # the failed attempt's re-fetches that found the recorded text kept it in the state
    assert "deleted" in r.stdout and "2 kept in the state" in r.stdout and "1 re-fetched" in r.stdout
    half_built = re.search(r"half-built collection '([^']+)'", line).group(1)
    # the previous collection and the plain one the alias shadowed are gone; the failed one stays
    assert sorted(p.name for p in (work / "q").iterdir()) == sorted(
        ["aliases.json", read_aliases(work / "q")["pages"], half_built]
    )


def test_server_errors_never_show_the_api_key():
    store = ClientStore.connect("http://127.0.0.1:9", "pages", api_key="sekret-key-123", timeout=1)
    store.client._sleep = lambda s: None  # no backoff waits here
    catalog = ClientCatalog.of(store)
    for call in (catalog.aliases, catalog.collections, lambda: catalog.switch("pages", "pages__x")):
        with pytest.raises(StoreError) as exc:
            call()
        assert "sekret-key-123" not in str(exc.value) and "Qdrant" in str(exc.value)


def test_a_reference_page_stays_one_from_each_text_source(site, harness):
    fixtures = Path(__file__).parent.parent / "chunking" / "fixtures"
    site.set("/api.html", (fixtures / "sphinx-api.html").read_text())
    site.set("/options.html", (fixtures / "sphinx-options.html").read_text())
    assert harness.run().pages_added == 2
    api = site.server.url("/api.html")

    def kinds() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for p in harness.points().values():
            out.setdefault(p["url"], set()).add(p["page_kind"])
        return out

    before = kinds()
    assert before[api] == {"reference"}
    for source, embedder in (("state", EMB32), ("points", EMB16), ("fetch", EMB32)):
        with StateDB(harness.state_path) as st:
            if source != "state":
                st.drop_texts([api])
            if source == "fetch":
                st._db.execute("UPDATE pages SET fingerprint = 'another-chunker' WHERE url = ?", (api,))
        rep = reindex(harness, embedder)
        assert rep.text_sources.get(source) == 1 + (source == "state"), rep.text_sources
        assert kinds() == before, source
        assert state_pages(harness)[api].page_kind == "reference"
