"""The engine end to end against a real HTTP server on 127.0.0.1 (fake embedder)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from chunking import Splitter
from embedders import HashEmbedder
from sync.errors import CollectionMismatchError, StateLockedError
from sync.core.ids import chunk_id, point_id
from sync.core.policies import ChangeRatePolicy
from sync.core.history import history_from_json
from sync.core.lastmod_trust import host_lastmod_trust
from sync.edges.state import StateDB
from sync.edges.edge_store import EdgeStore
from tests.helpers import REPORT_KEYS, build_pages, by_url, page_html, para, without_fetched_at


# Run on both page states: SQLite, and QdrantState over qdrant-client's local mode.
both_states = pytest.mark.parametrize("harness", ["sqlite", "qdrant"], indirect=True)


@both_states
def test_first_pass_indexes_every_page_with_contract_payload(site, harness):
    build_pages(site)
    rep = harness.run()
    d = rep.to_dict()
    assert REPORT_KEYS <= d.keys()
    assert rep.pages_added == 4 and rep.pages_failed == 0 and rep.pages_in_sitemaps == 4
    pts = harness.points()
    assert len(pts) == rep.chunks_written == rep.chunks_embedded + rep.chunks_reused > 4
    # Each distinct text went through the model once (the pages share their "## Section N" chunks).
    assert rep.chunks_embedded == len({p["text"] for p in pts.values()}) == harness.embedder.texts_embedded
    for pid, p in pts.items():
        assert set(p) >= {"url", "chunk_id", "chunk_index", "content_hash", "text", "title", "fetched_at", "embedder"}
        assert p["chunk_id"] == chunk_id(p["url"], p["chunk_index"])
        assert pid == point_id(p["chunk_id"])
        assert p["embedder"] == harness.embedder.model_id
        assert p["title"].startswith("Page")
    for ps in by_url(pts).values():
        assert [p["chunk_index"] for p in ps] == list(range(len(ps)))
        assert len({p["content_hash"] for p in ps}) == 1


@both_states
def test_second_pass_over_unchanged_site_embeds_and_writes_nothing(site, harness):
    build_pages(site)
    harness.run()
    before = harness.points()
    emb = harness.embedder.texts_embedded
    rep = harness.run(full=True)
    assert rep.pages_not_modified == 4 and rep.pages_fetched == 4
    assert rep.chunks_embedded == rep.chunks_written == rep.chunks_deleted == 0
    assert harness.embedder.texts_embedded == emb
    assert harness.points() == before
    # conditional GETs were sent
    inm = [h for _, p, s, h in site.requests if p.startswith("/p") and "if-none-match" in h]
    assert len(inm) == 4


def test_nav_and_footer_churn_embeds_nothing(site, harness):
    build_pages(site)
    harness.run()
    for i in range(4):
        site.set(
            f"/p{i}.html",
            page_html(
                f"Page {i}",
                [para(f"p{i}-s{j}") for j in range(3)],
                nav=["Home", "New nav item", "Pricing"],
                footer="© 2027 Other footer",
            ),
        )
    rep = harness.run(full=True)
    assert rep.pages_unchanged == 4 and rep.pages_fetched == 4
    assert rep.chunks_embedded == 0 and rep.chunks_written == 0


def test_a_title_only_change_rewrites_the_payloads_and_reembeds_its_chunks(site, harness):
    """The title (here og:title) is in every point's payload and heading path but not in the
    content hash: it used to count as unchanged, and the points kept the old title for good,
    unlike a fresh index. The title is in every embedded text, so each chunk is embedded again."""
    build_pages(site)
    harness.run()
    html = page_html("Page 1", [para(f"p1-s{j}") for j in range(3)])
    site.set("/p1.html", html.replace("</title>", "</title><meta property='og:title' content='Renamed'>"))
    emb = harness.embedder.texts_embedded
    rep = harness.run(full=True)
    assert rep.pages_changed == 1 and rep.chunks_reused == 0 and rep.chunks_embedded == rep.chunks_written > 0
    assert harness.embedder.texts_embedded == emb + rep.chunks_embedded
    p1 = [p for p in harness.points().values() if p["url"].endswith("/p1.html")]
    assert {p["title"] for p in p1} == {"Renamed"} and all(p["headings"][0] == "Renamed" for p in p1)
    rep = harness.run(full=True)  # and then it is settled
    assert rep.pages_changed == 0 and rep.chunks_written == 0


def test_shrink_leaves_no_stale_tail_chunk(site, harness):
    site.set("/big.html", page_html("Big", [para(f"big{j}", 80) for j in range(6)]))
    harness.run()
    n_before = len(harness.points())
    site.set("/big.html", page_html("Big", [para("big0", 80)]))
    rep = harness.run(full=True)
    assert rep.pages_changed == 1
    pts = by_url(harness.points())
    ((url, ps),) = pts.items()
    assert len(ps) < n_before
    assert [p["chunk_index"] for p in ps] == list(range(len(ps)))
    assert rep.chunks_deleted == n_before


@pytest.mark.parametrize("how", ["404", "410", "sitemap"])
def test_deletions_purge_points(site, harness, how):
    build_pages(site, n=3)
    harness.run()
    url = site.server.url("/p1.html")
    if how == "404":
        site.remove("/p1.html")
        site.set("/p1-hidden", "x", in_sitemap=False)
        # still listed in the sitemap, but answers 404
        site.resources["/p1.html"] = type(site.resources["/p0.html"])(b"", status=404)
        rep = harness.run(full=True)
    elif how == "410":
        site.gone("/p1.html")
        rep = harness.run(full=True)
    else:
        site.remove("/p1.html")
        rep = harness.run()
    assert rep.pages_removed == 1
    assert url not in by_url(harness.points())
    assert len(by_url(harness.points())) == 2


def test_server_errors_and_timeouts_never_purge(site, harness):
    build_pages(site, n=2)
    harness.run()
    before = harness.points()
    site.error("/p0.html", 503)
    site.slow("/p1.html", 7)  # past the harness client's 5 s timeout
    rep = harness.run(full=True)
    assert rep.pages_failed == 2 and rep.pages_removed == 0
    assert {e["url"] for e in rep.errors} == {site.server.url("/p0.html"), site.server.url("/p1.html")}
    assert harness.points() == before
    with StateDB(harness.state_path) as st:
        p = st.get(site.server.url("/p0.html"))
        assert p.failures == 1 and p.due_at > harness.now and "503" in p.last_error


@both_states
def test_embedder_failure_keeps_old_points_and_next_pass_repairs(site, harness):
    build_pages(site, n=2)
    harness.run()
    before = harness.points()
    site.set("/p0.html", page_html("Page 0", [para("changed!")]))
    harness.embedder.fail_next = True
    rep = harness.run(full=True)
    assert rep.pages_failed == 1 and harness.points() == before
    rep = harness.run(advance=timedelta(hours=2))  # retry backoff elapsed
    assert rep.pages_changed == 1
    texts = [p["text"] for p in harness.points().values() if p["url"].endswith("/p0.html")]
    assert any("changed!" in t for t in texts)


class FlakyStore(EdgeStore):
    """Crashes after deleting (the worst moment) on its first replace."""

    crashed = False

    def replace_pages(self, pages):
        if not FlakyStore.crashed:
            FlakyStore.crashed = True
            self._open()
            self.delete_pages([p.url for p in pages])
            from sync.errors import StoreError

            raise StoreError("connection lost mid-write")
        return super().replace_pages(pages)


def test_crash_between_delete_and_insert_is_repaired_next_pass(site, harness):
    build_pages(site, n=2)
    harness.run()
    site.set("/p0.html", page_html("Page 0", [para("new text")]))
    FlakyStore.crashed = False
    rep = harness.run(full=True, store=FlakyStore(harness.store_path, "pages"))
    assert rep.pages_failed == 1
    # Not due by schedule, but the pending mark brings it back on the very next pass.
    rep = harness.run()
    assert rep.pages_changed == 1
    assert any("new text" in p["text"] for p in harness.points().values())


def test_pipeline_change_rechunks_unchanged_pages_and_a_model_change_is_refused(site, harness, tmp_path):
    """Other splitter settings change the pipeline fingerprint: every unchanged page is
    re-chunked and its new texts embedded. Another model is no pipeline change a pass makes:
    it is refused before anything is written (`pagesync reindex` switches models)."""
    build_pages(site, n=2)
    harness.run()
    before = harness.points()
    with pytest.raises(CollectionMismatchError):
        harness.run(full=True, embedder=HashEmbedder(16, model_id="fake-other-model"))
    assert harness.points() == before
    harness.splitter = Splitter(chunk_size=150, chunk_overlap=0)
    rep = harness.run(full=True)
    assert rep.pages_changed == 2 and rep.chunks_embedded > 0
    assert harness.points() != before
    again = harness.run(full=True)
    assert again.pages_changed == 0 and again.chunks_written == 0


def test_vector_size_mismatch_refused_before_anything_is_written(site, harness):
    build_pages(site, n=1)
    harness.run()
    with pytest.raises(CollectionMismatchError):
        harness.run(full=True, embedder=HashEmbedder(32))


def test_dry_run_writes_nothing(site, harness):
    build_pages(site, n=2)
    rep = harness.run(dry_run=True)
    assert rep.pages_added == 2 and rep.chunks_written == 0
    assert not harness.store_path.joinpath("pages").exists()
    with StateDB(harness.state_path) as st:
        assert st.all_pages() == []


def test_second_pass_on_same_state_refuses(site, harness):
    build_pages(site, n=1)
    with StateDB(harness.state_path) as holder:
        holder.lock()
        with pytest.raises(StateLockedError):
            harness.run()


@pytest.mark.parametrize("mode", ["index", "gzip"])
def test_sitemap_index_and_gzip(site, harness, mode):
    build_pages(site, n=4)
    site.sitemap_mode = mode
    rep = harness.run()
    assert rep.pages_in_sitemaps == 4 and rep.pages_added == 4


@pytest.mark.parametrize("mode", ["broken", "missing"])
def test_failed_sitemap_purges_nothing(site, harness, mode):
    build_pages(site, n=3)
    harness.run()
    before = harness.points()
    site.sitemap_mode = mode
    rep = harness.run()
    assert rep.pages_removed == 0 and rep.sitemap_errors == 1 and not rep.ok
    assert harness.points() == before


def test_same_lastmod_everywhere_is_distrusted(site, harness):
    build_pages(site, n=3)
    site.sitemap_mode = "same-lastmod"
    harness.run()
    site.set("/p0.html", page_html("Page 0", [para("edited")]))
    rep = harness.run()
    assert rep.lastmod_trusted is False
    assert rep.pages_fetched == 0  # nothing due yet, and the stamp says nothing


@both_states
def test_trusted_lastmod_advance_makes_page_due(site, harness):
    build_pages(site, n=3)
    harness.run()
    site.set("/p0.html", page_html("Page 0", [para("edited")]), mtime=site.resources["/p0.html"].mtime + 100)
    rep = harness.run(advance=timedelta(minutes=5))
    assert rep.pages_fetched == 1 and rep.pages_changed == 1


def test_visits_a_trusted_advance_caused_are_recorded_as_announced(site, harness):
    """The change-rate policy leaves announced changes out of a page's rate, so the
    history must say which visits a trusted lastmod advance caused."""
    build_pages(site, n=2)
    harness.run()
    harness.run(advance=timedelta(days=4))  # both due: visited, unchanged, not announced
    site.set("/p0.html", page_html("Page 0", [para("edited")]), mtime=site.resources["/p0.html"].mtime + 100)
    rep = harness.run(advance=timedelta(minutes=5))
    assert rep.pages_changed == 1
    with StateDB(harness.state_path) as st:
        hist = history_from_json(st.get(site.server.url("/p0.html")).history)
        other = history_from_json(st.get(site.server.url("/p1.html")).history)
    assert [(v.changed, v.announced) for v in hist] == [(False, False), (True, True)]
    assert [(v.changed, v.announced) for v in other] == [(False, False)]


def test_visit_history_records_whole_seconds(site, harness):
    """Elapsed times are kept to the second (a rate in changes per day cannot use more),
    so the history row, read and rewritten at every visit, stays short."""
    build_pages(site, n=1)
    harness.run()
    harness.run(advance=timedelta(days=4, milliseconds=600))
    with StateDB(harness.state_path) as st:
        raw = st.get(site.server.url("/p0.html")).history
    assert raw == f"[[{4 * 86400 + 1},0]]"
    assert history_from_json(raw)[0].elapsed_s == 4 * 86400 + 1.0


def test_a_full_pass_writes_each_unchanged_page_once(site, harness, monkeypatch):
    """Rows are written before the visits only when new or altered there: a --full pass
    over known, unchanged pages writes each row once, after its visit."""
    build_pages(site, n=5)
    harness.run()
    writes: list[str] = []
    put_many = StateDB.put_many
    monkeypatch.setattr(
        StateDB, "put_many", lambda self, pages: (writes.extend(p.url for p in pages), put_many(self, pages))[1]
    )
    rep = harness.run(full=True, advance=timedelta(hours=1))
    assert rep.pages_fetched == 5 and rep.pages_changed == 0
    assert sorted(writes) == sorted(site.server.url(f"/p{i}.html") for i in range(5))
    writes.clear()
    site.set("/new.html", page_html("New", [para("new page")]))
    harness.run(advance=timedelta(minutes=5))
    # its NEW row, the pending mark before its points are written, then its recorded hash
    assert writes.count(site.server.url("/new.html")) == 3


def test_extra_urls_tracked_without_sitemap(site, harness):
    site.set("/solo.html", page_html("Solo", [para("solo")]), in_sitemap=False)
    rep = harness.run(sitemaps=[], urls=[site.server.url("/solo.html")])
    assert rep.pages_added == 1
    assert {p["url"] for p in harness.points().values()} == {site.server.url("/solo.html")}


@both_states
def test_page_that_404s_while_listed_is_rechecked_and_comes_back(site, harness):
    build_pages(site, n=2)
    harness.run()
    good = site.resources["/p1.html"]
    site.resources["/p1.html"] = type(good)(b"", status=404)  # still in the sitemap
    rep = harness.run(full=True)
    assert rep.pages_removed == 1
    site.resources["/p1.html"] = good
    rep = harness.run(advance=timedelta(days=7))  # past the gone page's revisit interval
    assert rep.pages_added == 1
    assert site.server.url("/p1.html") in by_url(harness.points())


def test_temporary_redirect_keeps_the_original_url_as_key(site, harness):
    site.set("/new-home.html", page_html("Moved", [para("moved content")]), in_sitemap=False)
    site.redirect("/old.html", "/new-home.html", status=302)
    site.resources["/old.html"].in_sitemap = True
    rep = harness.run()
    assert rep.pages_added == 1
    (url,) = by_url(harness.points())
    assert url == site.server.url("/old.html")
    assert any("moved content" in p["text"] for p in harness.points().values())


def test_redirect_loop_is_an_error_not_a_purge(site, harness):
    build_pages(site, n=1)
    harness.run()
    before = harness.points()
    site.redirect("/p0.html", "/loop.html")
    site.resources["/p0.html"].in_sitemap = True
    site.redirect("/loop.html", "/p0.html")
    rep = harness.run(full=True)
    assert rep.pages_failed == 1 and rep.pages_removed == 0
    assert "redirect" in rep.errors[0]["error"]
    assert harness.points() == before


@both_states
def test_max_fetches_caps_a_pass_and_defers_the_rest(site, harness):
    build_pages(site, n=6)
    harness.run()
    rep = harness.run(advance=timedelta(days=4), max_fetches=2)  # all six are due
    assert rep.pages_fetched == 2 and rep.pages_deferred == 4
    rep = harness.run(advance=timedelta(minutes=5), max_fetches=10)
    assert rep.pages_fetched == 4  # the deferred ones, not the two just visited


def test_new_pages_go_before_trusted_lastmod_advances_within_max_fetches(site, harness):
    build_pages(site, n=3)
    harness.run()
    for i in range(3):  # trusted lastmod advances on every known page
        site.set(
            f"/p{i}.html", page_html(f"Page {i}", [para(f"edit {i}")]), mtime=site.resources[f"/p{i}.html"].mtime + 100
        )
    site.set("/new-a.html", page_html("New A", [para("a")]))
    site.set("/new-b.html", page_html("New B", [para("b")]))
    site.clear_log()
    rep = harness.run(advance=timedelta(minutes=5), max_fetches=2, workers=1)
    # both new pages first, within the budget; the advances still go (they may exceed it)
    assert rep.pages_added == 2 and rep.pages_changed == 3 and rep.pages_deferred == 0
    visited = [p for _, p, _, _ in site.requests if p.endswith(".html")]
    assert visited == ["/new-a.html", "/new-b.html", "/p0.html", "/p1.html", "/p2.html"]


@pytest.mark.parametrize("bulk", [True, False])
def test_a_bulk_edit_sends_the_pass_to_pages_not_visited_since(site, harness, bulk):
    site.sitemap_mode = "same-lastmod"  # no change signal: the visits alone tell
    for i in range(6):
        site.set(f"/a{i}.html", page_html(f"A {i}", [para(f"a{i}")]))
    harness.run(policy="change-rate", bulk_edits=bulk)
    for i in range(6):
        site.set(f"/b{i}.html", page_html(f"B {i}", [para(f"b{i}")]))
    harness.run(policy="change-rate", advance=timedelta(days=1), bulk_edits=bulk)  # the b pages are new: due in 3 d
    for p in [f"/a{i}.html" for i in range(6)] + [f"/b{i}.html" for i in range(6)]:
        site.set(p, page_html(p, [para("reworded everywhere")]))
    rep = harness.run(policy="change-rate", advance=timedelta(days=2, hours=1), bulk_edits=bulk)  # the a pages are due
    assert rep.pages_changed == 6
    if bulk:  # 6 of 6 changed where ~1.1 were expected: P = 0.0014
        edit = rep.bulk_edits[site.server.base_url.split("//")[1].split(":")[0]]
        assert edit["since_s"] == harness.now.timestamp() and 0.7 < edit["share"] <= 1 and edit["evidence"] == []
    else:
        assert rep.bulk_edits == {}
    rep = harness.run(policy="change-rate", advance=timedelta(hours=1), max_fetches=2, bulk_edits=bulk)
    if not bulk:
        assert rep.pages_fetched == 0  # nothing is due before the b pages' 3 d
        return
    # the b pages, last visited before the edit was noticed, go now, within the budget
    assert rep.pages_fetched == 2 and rep.pages_changed == 2 and rep.pages_deferred == 4
    assert sorted(c["url"].rsplit("/", 1)[1] for c in rep.changes) == ["b0.html", "b1.html"]
    with StateDB(harness.state_path) as st:
        b0, b5, a0 = (st.get(site.server.url(p)) for p in ("/b0.html", "/b5.html", "/a0.html"))
    # the edit's change is not the page's own: its history records none
    assert b0.history in (None, "", "[]") and b5.history in (None, "")
    assert a0.history.endswith(",1]]")  # the changes that revealed the edit count


@pytest.mark.parametrize("policy", ["halve-double", "change-rate"])
@pytest.mark.parametrize("feed", [False, True], ids=["one-stamp", "lastmod-feed"])
def test_both_policies_schedule_within_the_clamps(site, harness, policy, feed):
    """A page edited every 3 days is visited more often than one never edited, within the
    [6 h, 60 d] clamps. With one stamp for every URL (no feed) the policy alone finds the
    edits, so the edited page's interval is the shorter. With a varied lastmod each edit
    advances its stamp (at the pass clock, `Harness`), the host earns trust and every edit
    is visited as announced; change-rate then leaves those changes out of the rate
    (`Visit.announced`: the feed will catch the next one), so the edited page's own
    interval may be the longer one, while its visits follow the edits."""
    build_pages(site, n=2)
    site.sitemap_mode = "plain" if feed else "same-lastmod"
    harness.run(policy=policy)
    for day in range(1, 22):  # edits on days 3 to 18, found by day 21
        if day % 3 == 0 and day <= 18:
            site.set("/p0.html", page_html("Page 0", [para(f"edit {day}")]))
        harness.run(advance=timedelta(days=1), policy=policy)
    with StateDB(harness.state_path) as st:
        hot, cold = st.get(site.server.url("/p0.html")), st.get(site.server.url("/p1.html"))
        trust = st.host_trust_counts().get("127.0.0.1")
    edits = 18 // 3
    for p in (hot, cold):
        assert timedelta(hours=6) <= p.interval <= timedelta(days=60)
    hot_visits, cold_visits = history_from_json(hot.history), history_from_json(cold.history)
    assert len(hot_visits) > len(cold_visits)  # the page that changes is visited more often
    edits_found = [v for v in hot_visits if v.changed]
    assert len(edits_found) == edits  # every edit, each found once
    if feed:
        assert trust == (edits, edits) and all(v.announced for v in edits_found)  # the feed told of each
    else:
        assert trust is None and not any(v.announced for v in hot_visits)
        assert hot.interval < cold.interval  # learned from the visits alone


def test_lying_lastmod_loses_trust(site, harness):
    build_pages(site, n=3)
    harness.run()
    base = max(r.mtime for r in site.resources.values())  # stamps within the day ahead a clock may run
    for round_ in range(4):  # the sitemap stamps advance, the text never changes
        for i in range(3):
            site.set(
                f"/p{i}.html",
                page_html(f"Page {i}", [para(f"p{i}-s{j}") for j in range(3)], footer=f"build {round_}"),
                mtime=base + 100 + round_ * 100 + i,
            )
        rep = harness.run(advance=timedelta(minutes=10))
    assert rep.pages_fetched == 0  # the host's lastmod no longer makes pages due
    with StateDB(harness.state_path) as st:
        adv, conf = st.host_trust_counts()["127.0.0.1"]
        assert adv >= 3 and conf == 0


@pytest.mark.parametrize("mode", ["plain", "same-lastmod"])
def test_a_trusted_lastmod_feed_lengthens_a_quiet_pages_interval(site, harness, mode):
    """Change-rate learns the changes the feed misses: under a trusted, varied lastmod its
    prior is scaled by (1 - host trust) (`ChangeRatePolicy.under_feed`), so a page found
    unchanged waits longer than the same page under one stamp, where the policy alone
    must find every change."""
    build_pages(site, n=2)
    site.touch("/p1.html", site.resources["/p0.html"].mtime - 100)
    site.sitemap_mode = mode
    assert harness.run().lastmod_trusted is (mode == "plain")  # two stamps, or one
    harness.run(advance=timedelta(days=3))  # both due: visited, unchanged
    with StateDB(harness.state_path) as st:
        page = st.get(site.server.url("/p0.html"))
        trust = host_lastmod_trust(*st.host_trust_counts().get("127.0.0.1", (0, 0)))
    hist = history_from_json(page.history)
    assert [v.changed for v in hist] == [False]
    base = ChangeRatePolicy()
    expected = (base.under_feed(trust) if mode == "plain" else base).next_interval(hist, None, False)
    assert page.interval == expected
    if mode == "plain":
        assert trust == pytest.approx(2 / 3) and page.interval > base.next_interval(hist, None, False)


# -- the cache across passes: robots.txt reused, sitemaps revalidated ----------------------------


def requests_for(site, path):
    """(status, request headers) of every request for `path`, in order."""
    return [(s, h) for _, p, s, h in site.requests if p == path]


def outcome(rep):
    """What a pass decided, without its clock, timing and byte counts."""
    d = rep.to_dict()
    keep = (
        "pages_in_sitemaps",
        "pages_fetched",
        "pages_not_modified",
        "pages_unchanged",
        "pages_changed",
        "pages_added",
        "pages_removed",
        "pages_failed",
        "chunks_embedded",
        "chunks_deleted",
        "chunks_written",
        "pages_due",
        "pages_skipped",
        "sitemap_errors",
        "lastmod_trusted",
        "errors",
        "skipped",
    )
    out = {k: d[k] for k in keep}
    out["changes"] = sorted(d["changes"], key=lambda c: c["url"])
    return out


def wipe_cache(state_path, *, sitemaps=True, robots=True):
    import sqlite3

    con = sqlite3.connect(state_path)
    if sitemaps:
        con.execute("DELETE FROM sitemap_cache")
    if robots:
        con.execute("DELETE FROM robots_cache")
    con.commit()
    con.close()


def control_copy(harness, tmp_path):
    """A second harness on a copy of the store and state as they are now."""
    import shutil

    from tests.helpers import Harness

    twin = Harness(harness.site, tmp_path / "control", embedder=harness.embedder, splitter=harness.splitter)
    shutil.copytree(harness.store_path, twin.store_path)
    for f in harness.tmp.glob("state.db*"):
        shutil.copy(f, twin.tmp / f.name)
    twin.now = harness.now
    return twin


def test_second_pass_revalidates_the_sitemap_and_reuses_robots_txt(site, harness, tmp_path):
    build_pages(site, n=4)
    site.set("/robots.txt", "User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    rep1 = harness.run()
    assert rep1.pages_added == 4 and rep1.sitemaps_not_modified == 0 and rep1.robots_bytes > 0
    ((status, headers),) = requests_for(site, "/sitemap.xml")
    assert status == 200 and "if-none-match" not in headers
    assert len(requests_for(site, "/robots.txt")) == 1
    control = control_copy(harness, tmp_path)
    wipe_cache(control.state_path)

    site.clear_log()
    rep2 = harness.run(full=True, advance=timedelta(hours=1))
    ((status, headers),) = requests_for(site, "/sitemap.xml")
    assert status == 304 and headers["if-none-match"].startswith('"') and "if-modified-since" in headers
    assert requests_for(site, "/robots.txt") == [] and rep2.robots_bytes == 0
    assert rep2.sitemaps_not_modified == 1 and rep2.pages_in_sitemaps == 4 and rep2.pages_removed == 0
    assert rep2.bytes_downloaded == 0  # a 304 sitemap and four 304 pages: no body at all
    points = harness.points()

    # The same pass on a copy without the cache downloads both files and decides the same.
    site.clear_log()
    rep_control = control.run(full=True, advance=timedelta(hours=1))
    assert [s for s, _ in requests_for(site, "/sitemap.xml")] == [200]
    assert len(requests_for(site, "/robots.txt")) == 1
    assert rep_control.sitemaps_not_modified == 0 and rep_control.bytes_downloaded > 0
    assert outcome(rep2) == outcome(rep_control)
    assert points == control.points()
    with StateDB(harness.state_path) as a, StateDB(control.state_path) as b:
        assert a.sitemap_urls() == b.sitemap_urls()


def test_changed_sitemap_is_downloaded_and_its_new_copy_revalidated(site, harness):
    build_pages(site, n=3)
    harness.run()
    site.set("/p3.html", page_html("Page 3", [para("p3 new")]))
    site.clear_log()
    rep = harness.run(advance=timedelta(hours=1))
    assert [s for s, _ in requests_for(site, "/sitemap.xml")] == [200]
    assert rep.sitemaps_not_modified == 0 and rep.pages_added == 1 and rep.pages_in_sitemaps == 4
    site.remove("/p0.html")
    site.clear_log()
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.pages_removed == 1 and rep.pages_in_sitemaps == 3  # the new body, not the kept one
    site.clear_log()
    rep = harness.run(advance=timedelta(hours=1))
    assert [s for s, _ in requests_for(site, "/sitemap.xml")] == [304]
    assert rep.sitemaps_not_modified == 1 and rep.pages_in_sitemaps == 3 and rep.pages_removed == 0


@pytest.mark.parametrize("how", ["rows deleted", "body damaged"])
def test_lost_sitemap_copy_falls_back_to_a_full_get(site, harness, how):
    import sqlite3

    build_pages(site, n=3)
    harness.run()
    before = harness.points()
    if how == "rows deleted":
        wipe_cache(harness.state_path, robots=False)
    else:  # the validators survive but the body does not: the 304 has nothing to stand for
        con = sqlite3.connect(harness.state_path)
        assert con.execute("UPDATE sitemap_cache SET body = x'00'").rowcount == 1
        con.commit()
        con.close()
    site.clear_log()
    rep = harness.run(advance=timedelta(hours=1))
    statuses = [s for s, _ in requests_for(site, "/sitemap.xml")]
    assert statuses == ([200] if how == "rows deleted" else [304, 200])
    if how == "body damaged":
        assert "if-none-match" not in requests_for(site, "/sitemap.xml")[1][1]
    assert rep.sitemap_errors == 0 and rep.pages_in_sitemaps == 3 and rep.pages_removed == 0 and rep.ok
    assert rep.sitemaps_not_modified == 0
    assert harness.points() == before
    site.clear_log()
    rep = harness.run(advance=timedelta(hours=1))  # the copy was kept again
    assert [s for s, _ in requests_for(site, "/sitemap.xml")] == [304] and rep.sitemaps_not_modified == 1


def test_sitemap_index_children_are_cached_per_file(site, harness):
    build_pages(site, n=4)
    site.sitemap_mode = "index"
    files = ["/sitemap.xml", "/sitemap-1.xml", "/sitemap-2.xml.gz"]
    harness.run()
    with StateDB(harness.state_path) as st:
        for f in files:
            assert st.cached_sitemap(site.server.url(f)).body() is not None
    site.clear_log()
    rep = harness.run(advance=timedelta(hours=1))
    for f in files:
        ((status, headers),) = requests_for(site, f)
        assert status == 304 and "if-none-match" in headers, f
    assert rep.sitemaps_not_modified == 3 and rep.pages_in_sitemaps == 4 and rep.pages_removed == 0
    # One child changes (p3 lives in the second half): only that file is downloaded again.
    site.set("/p3.html", page_html("Page 3", [para("p3 edited")]), mtime=site.resources["/p3.html"].mtime + 100)
    site.clear_log()
    rep = harness.run(advance=timedelta(hours=1))
    assert [requests_for(site, f)[0][0] for f in files] == [304, 304, 200]
    assert rep.sitemaps_not_modified == 2 and rep.pages_changed == 1 and rep.pages_in_sitemaps == 4


def test_unchanged_sitemap_is_not_parsed_again_and_a_damaged_kept_parse_is_redone(site, harness, monkeypatch):
    import sqlite3

    import sync.edges.httpcache

    build_pages(site, n=4)
    harness.run()
    parsed = []
    real = sync.edges.httpcache.parse_sitemap
    monkeypatch.setattr(sync.edges.httpcache, "parse_sitemap", lambda body: parsed.append(1) or real(body))
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.sitemaps_not_modified == 1 and parsed == []  # the 304 cost a lookup, no XML parsing
    assert rep.pages_in_sitemaps == 4 and rep.pages_removed == 0 and rep.pages_added == 0 and rep.ok
    con = sqlite3.connect(harness.state_path)
    assert con.execute("UPDATE sitemap_parses SET parsed = x'00'").rowcount == 1
    con.commit()
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.sitemaps_not_modified == 1 and parsed == [1]  # parsed in full, never read as empty
    assert rep.pages_in_sitemaps == 4 and rep.pages_removed == 0 and rep.ok
    con.execute("DELETE FROM sitemap_parses")
    con.commit()
    con.close()
    rep = harness.run(advance=timedelta(hours=1))
    assert parsed == [1, 1] and rep.pages_in_sitemaps == 4 and rep.pages_removed == 0
    # The sitemap changes: the new body is parsed (its key is new) and its new page is found.
    site.set("/p4.html", page_html("Page 4", [para("p4")]))
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.sitemaps_not_modified == 0 and parsed == [1, 1, 1] and rep.pages_added == 1
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.sitemaps_not_modified == 1 and parsed == [1, 1, 1] and rep.pages_in_sitemaps == 5


def test_dry_run_reads_the_cache_and_keeps_nothing(site, harness):
    import sqlite3

    build_pages(site, n=2)
    harness.run(dry_run=True)
    con = sqlite3.connect(harness.state_path)
    assert con.execute("SELECT COUNT(*) FROM sitemap_cache").fetchone() == (0,)
    assert con.execute("SELECT COUNT(*) FROM robots_cache").fetchone() == (0,)
    harness.run()
    kept = con.execute("SELECT etag, body, fetched_at FROM sitemap_cache").fetchall()
    robots = con.execute("SELECT * FROM robots_cache").fetchall()
    assert len(kept) == 1 and len(robots) == 1
    site.clear_log()
    rep = harness.run(dry_run=True, advance=timedelta(hours=1))
    assert rep.sitemaps_not_modified == 1 and requests_for(site, "/robots.txt") == []
    site.set("/p2.html", page_html("Page 2", [para("p2")]))  # the sitemap changes
    rep = harness.run(dry_run=True, advance=timedelta(days=2))  # and robots.txt is stale
    assert rep.sitemaps_not_modified == 0 and rep.pages_added == 1
    assert len(requests_for(site, "/robots.txt")) == 1
    assert con.execute("SELECT etag, body, fetched_at FROM sitemap_cache").fetchall() == kept
    assert con.execute("SELECT * FROM robots_cache").fetchall() == robots
    con.close()


def test_a_page_read_as_mojibake_by_extractor_v4_is_read_again(site, harness, monkeypatch):
    """Extractor v4 ignored a page's declared charset: a koi8-r page was indexed as cp1252
    mojibake, and since the server keeps answering 304 its points would stay so. The
    extractor id moved with the charset fix, so such a page's next visit is an
    unconditional GET and the collection ends equal to a fresh index (the text in Cyrillic)."""
    import chunking.extract as extract
    import sync.engine as engine

    text = "# Справка\n\n" + "Этот текст написан по-русски и хранится в кодировке KOI8-R. " * 3
    site.set("/ru/", text.encode("koi8-r"), content_type="text/plain; charset=koi8-r")
    with monkeypatch.context() as old:  # extractor v4: the declared charset was not read
        old.setattr(engine, "EXTRACTOR_ID", "trafilatura-md-v4")
        old.setattr(extract, "_decode", lambda body, charset=None: body.decode("cp1252", errors="replace"))
        harness.run()
    garbled = [p["text"] for p in harness.points().values()]
    assert garbled and not any("Справка" in t for t in garbled)

    site.clear_log()
    rep = harness.run(full=True)
    asked = [h for _, p, s, h in site.requests if p == "/ru/"]
    assert asked and "if-none-match" not in asked[0]  # unconditional: a 304 would keep the mojibake
    assert rep.pages_changed == 1
    texts = [p["text"] for p in harness.points().values()]
    assert texts and all("Справка" in t or "по-русски" in t for t in texts)
    rep = harness.run(full=True)  # from now on conditional again, and nothing to do
    assert rep.pages_not_modified == 1 and rep.chunks_written == 0


def test_one_fetcher_for_two_passes_takes_each_pass_scope_and_state(site, harness, tmp_path):
    """Library: a Fetcher reused for a second pass kept the first pass's scope
    (every page of a second site skipped as out of scope, report ok) and its state as cache
    (a closed database). Each pass now gives it its own."""
    import asyncio

    import httpx

    from demo.site_server import Site, SiteServer
    from sync import Fetcher, PassConfig, arun_pass

    build_pages(site, n=2)
    other = Site()
    with SiteServer(other) as server:
        other.server = server  # type: ignore[attr-defined]
        other.set("/b.html", page_html("B", [para("b")]))

        async def two_passes():
            async with httpx.AsyncClient() as client:
                fetcher = Fetcher(client)
                reports = []
                for name, sitemaps in (("a", [harness.sitemap()]), ("b", [server.url("/sitemap.xml")])):
                    with StateDB(tmp_path / f"{name}.db") as st:
                        store = EdgeStore(tmp_path / f"q-{name}", "pages")
                        try:
                            reports.append(
                                await arun_pass(
                                    PassConfig(sitemaps=sitemaps, now=harness.now),
                                    fetcher=fetcher,
                                    store=store,
                                    state=st,
                                    embedder=HashEmbedder(16),
                                )
                            )
                        finally:
                            store.close()
                return reports

        first, second = asyncio.run(two_passes())
    assert first.ok and first.pages_added == 2
    assert second.ok and second.pages_added == 1 and second.pages_skipped == 0, second.errors


@pytest.mark.parametrize(
    "kw, says",
    [
        ({}, "at least one sitemap, URL or crawl start page"),
        ({"urls": ["not a url"]}, "'not a url' must be an http(s) URL"),
        ({"sitemaps": ["ftp://x.example/sitemap.xml"]}, "must be an http(s) URL"),
        ({"crawl": ["http://[::1"]}, "'http://[::1' is not a URL"),
        ({"urls": ["https://x.example:99999/"]}, "is not a URL"),
        ({"urls": ["https://x.example/"], "workers": 0}, "at least 1"),
        ({"urls": ["https://x.example/"], "max_delete_share": 1.5}, "not a share"),
    ],
)
def test_a_library_pass_config_the_cli_would_refuse_is_a_config_error(kw, says, harness):
    """Library: PassConfig() with no source, a non-URL or workers=0 ran and
    reported ok; the CLI refuses each with exit 2."""
    from sync import PassConfig
    from sync.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(says)):
        PassConfig(**kw).check()


def test_the_summary_line_counts_sitemap_errors():
    from sync.core.report import Report

    assert "0 failed, 1 sitemap error; chunks" in Report(sitemap_errors=1).summary()
    assert "sitemap error" not in Report().summary()


# -- sitemap lastmod across deploy-date nights and killed passes ---------------------------------


def _fresh_index(site, tmp_path) -> dict[str, dict]:
    """The collection a fresh full index of the site makes now (payloads but `fetched_at`)."""
    from tests.helpers import Harness

    fresh = Harness(site, tmp_path / "fresh", stamp_site=False)
    rep = fresh.run()
    assert rep.pages_failed == 0
    return _payloads(fresh)


def _payloads(harness) -> dict[str, dict]:
    return {pid: without_fetched_at(p) for pid, p in harness.points().items()}


DEPLOY_STAMP = 1_700_000_000  # the server's one stamp on every URL in "same-lastmod" mode (2023-11-14)


@pytest.mark.parametrize("recorded", ["kept", "deploy stamp on record"])
def test_a_deploy_date_night_costs_the_hosts_lastmod_no_trust(site, harness, tmp_path, recorded):
    """Nights of a real site: varied stamps, a night with the deploy date on every URL (ignored), the
    varied (older) stamps back: nothing to visit, no advance counted, so the host keeps
    its trust and a real edit the next day is followed. "deploy stamp on record": a state
    in which an earlier pagesync recorded the deploy date as every page's stamp: the
    stamps going back from it are no advances either."""
    build_pages(site, n=4)
    for i in range(4):  # each page its own stamp, all older than the deploy date
        site.touch(f"/p{i}.html", 1_600_000_000 + i * 86400)
    assert harness.run(policy="change-rate").lastmod_state == "varied"
    url = site.server.url
    with StateDB(harness.state_path) as st:
        stamps = {u: st.get(u).sitemap_lastmod for u in (url(f"/p{i}.html") for i in range(4))}

    site.sitemap_mode = "same-lastmod"
    rep = harness.run(policy="change-rate", advance=timedelta(hours=12))
    assert rep.lastmod_state == "same" and rep.pages_fetched == 0
    with StateDB(harness.state_path) as st:
        assert {u: st.get(u).sitemap_lastmod for u in stamps} == stamps  # the night's stamp is no baseline
        if recorded == "deploy stamp on record":
            deploy = datetime.fromtimestamp(DEPLOY_STAMP, tz=timezone.utc).isoformat()
            pages = [st.get(u) for u in stamps]
            for p in pages:
                p.sitemap_lastmod = deploy
            st.put_many(pages)

    site.sitemap_mode = "plain"
    rep = harness.run(policy="change-rate", advance=timedelta(hours=12))
    assert rep.lastmod_state == "varied"
    assert rep.pages_fetched == 0  # the stamps went back, or never moved: no advance
    with StateDB(harness.state_path) as st:
        assert st.host_trust_counts().get("127.0.0.1", (0, 0)) == (0, 0)
        assert not any(st.get(u).lastmod_pending for u in stamps)

    site.set("/p2.html", page_html("Page 2", [para("p2 edited on day 4")]), mtime=1_600_000_000 + 10 * 86400)
    rep = harness.run(policy="change-rate", advance=timedelta(hours=12))
    assert rep.pages_fetched == 1 and rep.pages_changed == 1  # followed: the host kept its trust
    assert rep.changes[0]["url"] == url("/p2.html")
    with StateDB(harness.state_path) as st:
        assert st.host_trust_counts()["127.0.0.1"] == (1, 1)
    assert _payloads(harness) == _fresh_index(site, tmp_path)


def test_an_edit_made_during_deploy_date_nights_is_followed_when_stamps_vary_again(site, harness, tmp_path):
    build_pages(site, n=4)
    harness.run(policy="change-rate")
    site.sitemap_mode = "same-lastmod"
    # Edited while the sitemap says nothing: its own stamp moves, hidden behind the deploy date.
    site.set("/p1.html", page_html("Page 1", [para("p1 edited")]), mtime=site.resources["/p1.html"].mtime + 100)
    assert harness.run(policy="change-rate", advance=timedelta(hours=12)).pages_fetched == 0
    site.sitemap_mode = "plain"
    rep = harness.run(policy="change-rate", advance=timedelta(hours=12))
    assert rep.lastmod_state == "varied"
    assert rep.pages_fetched == 1 and rep.pages_changed == 1
    assert [c["url"] for c in rep.changes] == [site.server.url("/p1.html")]
    with StateDB(harness.state_path) as st:
        assert st.host_trust_counts()["127.0.0.1"] == (1, 1)  # an advance, confirmed
    assert _payloads(harness) == _fresh_index(site, tmp_path)


class _Killed(Exception):
    """Stands for a kill -9: the pass stops here, and nothing after it runs."""


@pytest.mark.parametrize(
    "at", ["before the sitemap write", "before any visit", "at the edited page", "before the purges"]
)
def test_a_pass_killed_after_reading_the_sitemap_loses_nothing_it_read(site, harness, tmp_path, at):
    """A pass reads the sitemap (p1's lastmod moved, p4 new, p3 gone from it)
    and dies before it gets to them. The next pass gets the same sitemap from its kept
    copy (304), so the diff is empty: what the killed pass recorded must leave p1 due
    (and as a trusted advance), p4 due and p3 still listed, and the collection must end
    as a fresh index of the site."""
    build_pages(site, n=4)
    harness.run(policy="change-rate")
    site.set("/p1.html", page_html("Page 1", [para("p1 edited")]), mtime=site.resources["/p1.html"].mtime + 100)
    site.set("/p4.html", page_html("Page 4", [para("p4 new")]))
    site.remove("/p3.html")

    point = {
        "before the sitemap write": ("plan", None),
        "before any visit": ("visit", None),
        "at the edited page": ("page", site.server.url("/p1.html")),
        "before the purges": ("settle", None),
    }[at]

    def die(reached: str, url: str | None) -> None:
        if (reached, url) == point:
            raise _Killed(at)

    with pytest.raises(_Killed):
        harness.run(policy="change-rate", advance=timedelta(hours=1), checkpoint=die)

    site.clear_log()
    rep = harness.run(policy="change-rate", advance=timedelta(hours=1))
    assert rep.sitemaps_not_modified == 1  # the kept copy: the diff has nothing new to say
    url = site.server.url
    assert rep.pages_removed == 1 and rep.pages_failed == 0
    if at == "before the purges":  # the killed pass got through its visits: the purge alone was left
        assert rep.pages_fetched == 0
    else:
        assert [c["url"] for c in rep.changes if c["action"] == "changed"] == [url("/p1.html")]
        assert rep.pages_added == 1 or at == "at the edited page"  # p4 may have been written before the kill
        with StateDB(harness.state_path) as st:
            p1 = st.get(url("/p1.html"))
            assert not p1.lastmod_pending and p1.due_at > harness.now
            assert history_from_json(p1.history)[-1].announced  # visited as the trusted advance it was
    with StateDB(harness.state_path) as st:
        assert st.get(url("/p3.html")).status == "gone" and st.get(url("/p4.html")).status == "live"
    assert _payloads(harness) == _fresh_index(site, tmp_path)
    assert harness.run(policy="change-rate", advance=timedelta(hours=1)).pages_fetched == 0  # and nothing is left over
