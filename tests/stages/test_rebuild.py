"""The collection as the page state sees it: a missing or empty collection is refused unless
asked to rebuild; a rebuild cut short is finished by the next plain pass; a collection that
lost some points is caught by a pass and repaired."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from embedders import HashEmbedder
from sync.errors import CollectionLostError, ConfigError
from sync.core.points_check import MISSING_MARK, REBUILD_MARK, short_pages
from sync.edges.state import LIVE, PageState, StateDB
from sync.commands.status import collect_status
from tests.cli_helpers import cli_build, cli_run, one_error_line
from tests.helpers import T0, Harness, lose_collection, page_html, para

both_states = pytest.mark.parametrize("harness", ["sqlite", "qdrant"], indirect=True)


def build(site, n=5, sections=3):
    for i in range(n):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}") for j in range(sections)]))


def snapshot(h):
    """(payloads without fetched_at, vectors) by point id: what a fresh index must equal."""
    store = h.open_store()
    try:
        points = list(store.scroll(with_vectors=True))
    finally:
        store.close()
    strip = lambda pl: {k: v for k, v in pl.items() if k != "fetched_at" and k != "metadata"}  # noqa: E731
    meta = lambda pl: {k: v for k, v in pl.get("metadata", {}).items() if k != "fetched_at"}  # noqa: E731
    return (
        {p.id: (strip(p.payload), meta(p.payload)) for p in points},
        {p.id: [round(x, 6) for x in p.vector] for p in points},
    )


def fresh(site, tmp_path, state="sqlite"):
    h = Harness(site, tmp_path / "fresh", state=state)
    h.run()
    return snapshot(h)


def state_rows(h):
    store = h.open_store()
    try:
        with h.open_state(store) as st:
            return sorted(p.to_row().items() for p in st.all_pages()), st.last_run()
    finally:
        store.close()


class StopAfter(HashEmbedder):
    """Embeds `calls` batches, then raises KeyboardInterrupt (Ctrl-C mid-pass), in-process."""

    def __init__(self, calls: int):
        super().__init__(16)
        self.left = calls

    def embed(self, texts):
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return super().embed(texts)


# -- a missing or empty collection while the state records pages: refused unless rebuild -----
@both_states
def test_a_lost_collection_is_refused_without_rebuild_and_nothing_is_created(site, harness):
    build(site, n=3)
    harness.run()
    lose_collection(harness)
    rows = state_rows(harness)
    site.clear_log()
    with pytest.raises(CollectionLostError) as info:
        harness.run(advance=timedelta(minutes=5))
    assert isinstance(info.value, ConfigError) and info.value.exit_code == 2
    msg = str(info.value)
    assert "mistyped" in msg and "--rebuild" in msg and "rebuild=True" in msg and "3 indexed pages" in msg
    assert site.requests == []  # refused before the sitemap is read
    assert state_rows(harness) == rows  # no row written, no run recorded
    store = harness.open_store()
    try:
        assert not store.exists()  # nothing created
    finally:
        store.close()


def test_cli_a_mistyped_collection_on_run_is_exit_2_with_both_readings(site, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    cli_build(site)
    assert cli_run(site, work, "--now", "2026-01-01T00:00:00Z").returncode == 0
    before = (work / "s.db").read_bytes()
    site.clear_log()
    r = cli_run(site, work, "--collection", "pagse", "--now", "2026-01-01T01:00:00Z")
    assert r.returncode == 2, r.stderr
    line = one_error_line(r)
    assert "collection 'pagse' is missing or empty" in line and "mistyped" in line and "--rebuild" in line, line
    assert site.requests == [] and not (work / "q" / "pagse").exists()
    assert (work / "s.db").read_bytes() == before
    r = cli_run(site, work, "--collection", "pagse", "--now", "2026-01-01T01:00:00Z", "--rebuild", report="r.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((work / "r.json").read_text())["pages_rebuilt"] == 3


# -- a rebuild cut short: the next plain pass finishes it ------------------------------------
@both_states
def test_a_rebuild_killed_halfway_is_finished_by_the_next_plain_pass(site, harness, tmp_path):
    build(site, n=5)
    harness.run()
    lose_collection(harness)
    site.clear_log()
    with pytest.raises(KeyboardInterrupt):  # two pages written, then Ctrl-C
        harness.run(advance=timedelta(minutes=5), rebuild=True, embedder=StopAfter(2), embed_batch=1, workers=1)
    store = harness.open_store()
    try:
        with harness.open_state(store) as st:
            info = collect_status(st, store, harness.now)
            marked = [p.url for p in st.all_pages() if p.pending_hash == REBUILD_MARK]
    finally:
        store.close()
    assert len(marked) == 3 and 0 < info["points"]
    assert any("rebuild of the collection is not finished: 3 pages" in w for w in info["warnings"]), info["warnings"]
    # Not due by the schedule and every validator would answer 304: the marked pages come back anyway.
    site.clear_log()
    rep = harness.run(full=True, advance=timedelta(minutes=5))
    assert rep.ok and rep.pages_not_modified == 2 and rep.pages_changed == 3, rep.changes
    assert {c["reason"] for c in rep.changes} == {"rebuild: the collection lost its points"}
    assert sum(site.count(304, f"/p{i}.html") for i in range(5)) == 2
    assert snapshot(harness) == fresh(site, tmp_path, state=harness.state_kind)
    again = harness.run(full=True, advance=timedelta(minutes=5))
    assert again.pages_changed == 0 and again.pages_not_modified == 5


@both_states
def test_a_rebuild_killed_before_its_first_write_is_finished_by_the_next_plain_pass(site, harness, tmp_path):
    """The collection the rebuild created is still empty, every page still marked: no
    mistyped name can look like that, so the next pass goes on without --rebuild."""
    build(site, n=3)
    harness.run()
    lose_collection(harness)
    with pytest.raises(KeyboardInterrupt):
        harness.run(advance=timedelta(minutes=5), rebuild=True, embedder=StopAfter(0), embed_batch=1, workers=1)
    rep = harness.run(advance=timedelta(minutes=5))
    assert rep.ok and rep.pages_changed == 3 and rep.pages_not_modified == 0
    assert snapshot(harness) == fresh(site, tmp_path, state=harness.state_kind)
    if harness.state_kind == "sqlite":  # (the Qdrant state lives beside its collection: a new name has none)
        harness.collection = "pagse"  # a mistyped name is still refused
        with pytest.raises(CollectionLostError):
            harness.run(advance=timedelta(minutes=5))


# -- a collection that lost some points: caught and repaired ---------------------------------
def _delete_pages(h, urls):
    store = h.open_store()
    try:
        store.delete_pages(urls)
    finally:
        store.close()


@pytest.mark.parametrize("harness", ["qdrant"], indirect=True)
def test_points_lost_on_a_server_are_caught_and_rewritten_in_the_next_pass(site, harness, tmp_path):
    build(site, n=5)
    harness.run()
    lost = [site.server.url("/p1.html"), site.server.url("/p3.html")]
    _delete_pages(harness, lost)
    store = harness.open_store()
    try:
        with harness.open_state(store) as st:
            warnings = collect_status(st, store, harness.now)["warnings"]
    finally:
        store.close()
    assert any("missing; `pagesync audit --fix`" in w for w in warnings), warnings
    rep = harness.run(advance=timedelta(minutes=5))  # nothing due by the schedule
    assert rep.pages_points_missing == 2 and rep.points_missing > 0 and rep.ok
    assert sorted(c["url"] for c in rep.changes) == lost
    assert {c["reason"] for c in rep.changes} == {"repair: the collection lost some of its points"}
    assert snapshot(harness) == fresh(site, tmp_path, state="qdrant")
    again = harness.run(advance=timedelta(minutes=5))
    assert again.points_missing == 0 and again.changes == []


@pytest.mark.parametrize("harness", ["qdrant"], indirect=True)
def test_a_dry_run_reports_the_pages_that_lost_points_as_rewrites_and_writes_nothing(site, harness):
    build(site, n=5)
    harness.run()
    lost = [site.server.url("/p1.html"), site.server.url("/p3.html")]
    _delete_pages(harness, lost)
    dry = harness.run(advance=timedelta(minutes=5), dry_run=True)
    # fetched unconditionally (a 304 would hide them) and told as the rewrites a pass makes
    assert dry.pages_points_missing == 2 and dry.pages_not_modified == 0
    assert sorted(c["url"] for c in dry.changes) == lost
    assert {c["reason"] for c in dry.changes} == {"repair: the collection lost some of its points"}
    rep = harness.run(advance=timedelta(minutes=5))  # the dry run wrote nothing: the pass still repairs
    assert rep.pages_points_missing == 2 and sorted(c["url"] for c in rep.changes) == lost


def test_points_lost_in_the_embedded_store_are_caught_once_a_pass_opens_it(site, harness, tmp_path):
    build(site, n=5)
    harness.run()
    with StateDB(harness.state_path) as st:
        chunks = st.get(site.server.url("/p2.html")).chunk_count
    _delete_pages(harness, [site.server.url("/p2.html")])
    site.set("/p0.html", page_html("Page 0", [para("p0-edited")]))  # a write: the pass opens the shard
    rep = harness.run(advance=timedelta(days=30))
    assert rep.pages_points_missing == 1 and rep.points_missing == chunks > 0
    with StateDB(harness.state_path) as st:
        assert st.get(site.server.url("/p2.html")).pending_hash == MISSING_MARK
    rep = harness.run(advance=timedelta(minutes=5))
    assert [c["url"] for c in rep.changes] == [site.server.url("/p2.html")] and rep.points_missing == 0
    assert snapshot(harness) == fresh(site, tmp_path)


def test_short_pages_counts_only_settled_pages_that_lack_points():
    def page(url, chunks, pending=None):
        return PageState(
            url=url, status=LIVE, first_seen_at=T0, content_hash="h", chunk_count=chunks, pending_hash=pending
        )

    pages = [page("a", 3), page("b", 2), page("c", 4, pending="x"), page("d", 1)]
    got = short_pages(pages, {"a": 3, "b": 1, "c": 0}, stored=4, recorded=6)
    assert [p.url for p in got.pages] == ["b", "d"] and got.points == 2
