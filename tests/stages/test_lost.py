"""A collection lost while the state survived: a pass refuses it (a mistyped name reads the
same) unless asked to rebuild, and a rebuild cut short is finished by the next pass."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest

from sync.core.planning import plan_events
from sync.edges.state import LIVE, PageState, StateDB
from sync.edges.edge_store import EdgeStore
from tests.cli_helpers import cli, cli_build, cli_run, stored
from tests.helpers import T0, Harness, build_pages, lose_collection, without_fetched_at

both_states = pytest.mark.parametrize("harness", ["sqlite", "qdrant"], indirect=True)


def fresh_points(site, tmp_path):
    """The points a fresh full index of the site as it is now makes (fetched_at aside)."""
    fresh = Harness(site, tmp_path / "fresh", stamp_site=False)
    fresh.run()
    return strip(fresh.points())


def strip(points):
    return {pid: without_fetched_at(p) for pid, p in points.items()}


@both_states
@pytest.mark.parametrize("full", [False, True])
def test_a_lost_collection_is_rebuilt_within_the_pass_despite_304s(site, harness, tmp_path, caplog, full):
    build_pages(site)
    first = harness.run()
    assert first.pages_added == 4 and not first.collection_lost
    lose_collection(harness)
    site.clear_log()
    # Not due, every validator would answer 304, and the budget is 0: all pages come back anyway.
    rep = harness.run(full=full, max_fetches=0, advance=timedelta(minutes=5), rebuild=True)
    assert rep.collection_lost and rep.pages_rebuilt == 4
    assert rep.pages_not_modified == 0 and rep.pages_failed == 0 and rep.ok
    assert rep.pages_changed == 4 and {c["reason"] for c in rep.changes} == {"rebuild: the collection lost its points"}
    assert sum(site.count(304, f"/p{i}.html") for i in range(4)) == 0
    assert "missing or empty but the state records" in caplog.text
    assert strip(harness.points()) == fresh_points(site, tmp_path)
    again = harness.run(full=True, advance=timedelta(minutes=5))  # healthy again: nothing noticed
    assert not again.collection_lost and again.pages_rebuilt == 0 and again.pages_not_modified == 4


def test_another_collection_name_is_filled_from_the_state(site, harness, tmp_path):
    build_pages(site, n=2)
    harness.run()
    harness.collection = "other"
    rep = harness.run(advance=timedelta(minutes=5), rebuild=True)
    assert rep.collection_lost and rep.pages_rebuilt == 2 and rep.chunks_written > 0
    assert strip(harness.points()) == fresh_points(site, tmp_path)


@pytest.mark.parametrize("harness", ["qdrant"], indirect=True)
def test_an_emptied_collection_on_a_server_is_noticed(site, harness, tmp_path):
    build_pages(site, n=2)
    harness.run()
    store = harness.open_store()
    try:
        store.delete_pages([site.server.url("/p0.html"), site.server.url("/p1.html")])
        assert store.exists() and store.is_empty() is True
    finally:
        store.close()
    rep = harness.run(advance=timedelta(minutes=5), rebuild=True)
    assert rep.collection_lost and rep.pages_rebuilt == 2
    assert strip(harness.points()) == fresh_points(site, tmp_path)


def test_the_embedded_store_answers_emptiness_without_loading_a_shard(site, harness):
    assert EdgeStore(harness.store_path, "pages").is_empty() is True  # missing
    build_pages(site, n=1)
    harness.run()
    store = EdgeStore(harness.store_path, "pages")
    try:
        assert store.is_empty() is None and store._shard is None  # not known without loading it
        assert store.count() > 0 and store.is_empty() is False  # once open, a count is cheap
    finally:
        store.close()


def test_dry_run_on_a_lost_collection_reports_and_writes_nothing(site, harness):
    build_pages(site, n=3)
    harness.run()
    lose_collection(harness)
    with StateDB(harness.state_path) as st:
        before = [p.to_row() for p in st.all_pages()]
        runs = len(st.runs())
    rep = harness.run(dry_run=True, advance=timedelta(minutes=5), rebuild=True)
    assert rep.collection_lost and rep.pages_rebuilt == 3 and rep.pages_changed == 3
    assert rep.chunks_written == 0 and rep.chunks_would_embed > 0
    assert not harness.store_path.joinpath("pages").exists()
    with StateDB(harness.state_path) as st:
        assert [p.to_row() for p in st.all_pages()] == before and len(st.runs()) == runs


def test_a_lost_page_that_left_the_site_is_purged_not_rebuilt(site, harness):
    build_pages(site, n=2)
    harness.run()
    lose_collection(harness)
    site.remove("/p0.html")
    rep = harness.run(advance=timedelta(minutes=5), rebuild=True)
    assert rep.collection_lost and rep.pages_removed == 1 and rep.pages_changed == 1
    assert {p["url"] for p in harness.points().values()} == {site.server.url("/p1.html")}


def test_plan_events_rebuild_reason_ranks_after_pending():
    page = PageState(url="https://a/x", status=LIVE, first_seen_at=T0, content_hash="h", chunk_count=2)
    visits, removals, _, _ = plan_events(
        sitemap_now={"https://a/x": None, "https://a/y": None},
        sitemap_before={"https://a/x": None, "https://a/y": None},
        sitemap_complete=True,
        extra_urls=[],
        known={"https://a/x": page},
        due=["https://a/x", "https://a/y"],
        pending=["https://a/y"],
        full=True,
        rebuild=["https://a/x", "https://a/y"],
    )
    assert [(v.url, v.reason) for v in visits] == [("https://a/y", "pending"), ("https://a/x", "rebuild")]
    assert removals == []


@pytest.mark.slow  # the command line as subprocesses
def test_cli_status_warns_and_run_rebuilds_a_deleted_qdrant_path(site, tmp_path):
    """The tester's repro: index, rm -rf the --qdrant-path, `status`, then `run --full`."""
    import json

    work = tmp_path / "work"
    work.mkdir()
    cli_build(site)
    assert cli_run(site, work, "--now", "2026-01-01T00:00:00Z").returncode == 0
    n = len(stored(work))
    shutil.rmtree(work / "q")
    st = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--json")
    assert st.returncode == 0, st.stderr
    assert "was not found in q (a mistyped" in json.loads(st.stdout)["warnings"][0]
    st = cli(work, "status", "--qdrant-path", "q", "--state", "s.db")
    assert (
        st.stdout.startswith("warning: collection 'pages' was not found in q") and "pagesync run --rebuild" in st.stdout
    )
    r = cli_run(site, work, "--full", "--now", "2026-01-01T01:00:00Z", "--rebuild", report="r.json")
    assert r.returncode == 0, r.stderr
    assert sum("missing or empty but the state records" in ln for ln in r.stderr.splitlines()) == 1
    rep = json.loads((work / "r.json").read_text())
    assert rep["collection_lost"] is True and rep["pages_rebuilt"] == 3 and rep["pages_not_modified"] == 0
    assert len(stored(work)) == n
    st = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--json")
    assert json.loads(st.stdout)["warnings"] == []


@pytest.mark.slow  # the command line as subprocesses
def test_cli_status_on_an_emptied_embedded_collection_points_to_audit_fix(site, tmp_path):
    """An embedded collection that exists with no points: `run` does not look inside a
    shard it has no reason to open, so status names the repair that does."""
    import json

    work = tmp_path / "work"
    work.mkdir()
    cli_build(site)
    assert cli_run(site, work, "--now", "2026-01-01T00:00:00Z").returncode == 0
    urls = {p["url"] for p in stored(work).values()}
    store = EdgeStore(work / "q", "pages")
    try:
        store.delete_pages(sorted(urls))
    finally:
        store.close()
    assert stored(work) == {}
    st = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--json")
    assert st.returncode == 0, st.stderr
    (warning,) = json.loads(st.stdout)["warnings"]
    assert "has no points" in warning and "pagesync audit --fix" in warning, warning
    fix = cli(work, "audit", "--fix", "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake")
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert {p["url"] for p in stored(work).values()} == urls


# -- robots.txt answering 5xx: disallow all for now, but as failures ------------------------------
def test_robots_503_on_a_first_run_fails_the_pages_and_retries_them_soon(site, harness):
    build_pages(site, n=3)
    site.error("/robots.txt", 503)
    rep = harness.run()
    assert not rep.ok and rep.pages_failed == 3 and rep.pages_skipped == 0 and rep.pages_added == 0
    assert {e["error"] for e in rep.errors} == {"robots.txt answered 503: host not crawled this pass"}
    assert harness.points() == {}
    with StateDB(harness.state_path) as st:
        pages = st.all_pages()
        assert len(pages) == 3 and all(p.due_at <= harness.now + timedelta(hours=1) for p in pages)
        assert st.due_urls(harness.now + timedelta(hours=1)) == sorted(p.url for p in pages)
    site.remove("/robots.txt")  # 404 from now on: allow all
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.ok and rep.pages_added == 3


def test_robots_503_keeps_what_is_indexed(site, harness):
    build_pages(site, n=2)
    harness.run()
    before = harness.points()
    site.error("/robots.txt", 503)
    rep = harness.run(full=True, advance=timedelta(days=2))  # the cached robots answer is stale
    assert rep.pages_failed == 2 and rep.pages_removed == 0 and not rep.ok
    assert harness.points() == before


def test_robots_404_still_allows_all(site, harness):
    build_pages(site, n=2)
    site.error("/robots.txt", 404)
    rep = harness.run()
    assert rep.ok and rep.pages_added == 2 and rep.pages_failed == 0


# -- report counts agree with their lists -----------------------------------------------------------
def test_pages_skipped_counts_every_skipped_page_including_out_of_scope_sitemap_entries(site, harness):
    from demo.site_server import Resource

    build_pages(site, n=2)
    site.set("/big.bin", b"\x00" * 100, content_type="application/octet-stream")  # a page skipped: not text
    base = site.server.base_url
    urls = [
        f"{base}/p0.html",
        f"{base}/p1.html",
        f"{base}/big.bin",
        "http://attacker.example/x",
        "http://169.254.169.254/latest/meta-data/",
    ]
    child = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{u}</loc></url>" for u in urls)
        + "</urlset>"
    )
    index = (
        '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{base}/child.xml</loc></sitemap>"
        "<sitemap><loc>http://attacker.example/more.xml</loc></sitemap></sitemapindex>"
    )
    site.resources["/child.xml"] = Resource(child.encode(), "application/xml", in_sitemap=False)
    site.resources["/index.xml"] = Resource(index.encode(), "application/xml", in_sitemap=False)
    rep = harness.run(sitemaps=[site.server.url("/index.xml")])
    assert rep.pages_added == 2 and rep.pages_out_of_scope == 2
    assert rep.pages_skipped == 3 and rep.sitemaps_skipped == 1  # big.bin + the two out-of-scope URLs
    assert rep.pages_skipped + rep.sitemaps_skipped == len(rep.skipped) == 4
    assert "pages_skipped" in rep.summary() or f"{rep.pages_skipped} skipped" in rep.summary()
