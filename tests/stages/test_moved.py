"""Moved and gone pages across passes: 301/308 settle, removals count only live pages,
the guard's share stays consistent, --full revisits gone pages still listed.

Every scenario ends on the product's property: the incremental collection equals a fresh
full index of the site as it is now."""

from __future__ import annotations

from datetime import timedelta

from demo.site_server import Resource
from sync.edges.state import GONE, StateDB
from tests.helpers import build_pages, page_html, para
from tests.property_helpers import assert_equals_fresh

GUIDE = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]


def listed_redirect(site, path, target, status=301):
    """`path` answers a redirect to `target` and the sitemap still lists it."""
    site.redirect(path, target, status=status)
    site.resources[path].in_sitemap = True


def requests_to(site, path):
    return [(status, headers) for _, p, status, headers in site.requests if p == path]


def test_stale_301s_in_the_sitemap_settle_on_a_fresh_state(site, harness):
    """Six sitemap URLs, each 301 to one target: the old URLs are never counted as removed,
    never trip the guard, and are revisited on a schedule whose interval grows."""
    site.set("/guide/x/", page_html("Guide", [para("guide x")]), in_sitemap=False)
    for name in GUIDE:
        listed_redirect(site, f"/guide/{name}.html", "/guide/x/")
    rep = harness.run()
    assert rep.ok and rep.pages_removed == 0 and rep.mass_delete_blocked == 0 and rep.pages_added == 1
    assert_equals_fresh(harness, "fresh1")

    site.clear_log()
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.ok and rep.pages_removed == 0 and rep.pages_fetched == 0
    assert not [r for r in site.requests if r[1].startswith("/guide/")]

    site.clear_log()
    rep = harness.run(advance=timedelta(days=4))  # past the first revisit interval (3 d)
    assert rep.ok and rep.pages_removed == 0 and rep.chunks_deleted == 0 and rep.mass_delete_blocked == 0
    target = requests_to(site, "/guide/x/")
    assert target and all(s == 304 and "if-none-match" in h for s, h in target)
    with StateDB(harness.state_path) as st:
        old = st.get(site.server.url("/guide/alpha.html"))
        assert old.status == GONE and old.moved_to == site.server.url("/guide/x/")
        assert old.in_sitemap and old.interval == timedelta(days=6)  # a redirect answered again: no change
        assert site.server.url("/guide/alpha.html") not in st.due_urls(harness.now)
    assert_equals_fresh(harness, "fresh2")


def test_a_live_page_that_moves_is_removed_once(site, harness):
    build_pages(site, n=2)
    harness.run()
    body = site.resources["/p1.html"].body
    site.set("/p1-new.html", body, in_sitemap=False)  # same body, same ETag as the old page had
    listed_redirect(site, "/p1.html", "/p1-new.html")
    site.clear_log()
    rep = harness.run(full=True)
    assert rep.pages_removed == 1 and rep.pages_added == 1 and rep.ok
    # The old URL's validators are not sent to the target: one unconditional request, no retry.
    assert [(s, "if-none-match" in h) for s, h in requests_to(site, "/p1-new.html")] == [(200, False)]
    assert_equals_fresh(harness, "fresh1")

    for advance in (timedelta(hours=1), timedelta(days=4)):
        site.clear_log()
        rep = harness.run(full=True, advance=advance)
        assert rep.ok and rep.pages_removed == 0 and rep.chunks_deleted == 0 and rep.chunks_written == 0
        # Each visit of the target, by itself or through the redirect, is conditional.
        assert {(s, "if-none-match" in h) for s, h in requests_to(site, "/p1-new.html")} == {(304, True)}
    assert_equals_fresh(harness, "fresh2")


def test_an_undone_redirect_is_indexed_again_and_its_target_dropped(site, harness):
    build_pages(site, n=2)
    old_body = site.resources["/p1.html"].body
    site.set("/p1-new.html", page_html("Page 1", [para("p1 moved")]), in_sitemap=False)
    listed_redirect(site, "/p1.html", "/p1-new.html")
    harness.run()
    harness.run(advance=timedelta(days=4))
    site.resources["/p1.html"] = Resource(old_body)  # answers 200 again; the target is still served
    rep = harness.run(advance=timedelta(days=7))  # its scheduled revisit
    assert rep.ok and rep.pages_added == 1 and rep.pages_removed == 1  # the target: no page leads there
    urls = {p["url"] for p in harness.points().values()}
    assert site.server.url("/p1.html") in urls and site.server.url("/p1-new.html") not in urls
    assert_equals_fresh(harness)


def test_removals_count_only_pages_that_were_live(site, harness):
    build_pages(site, n=2)
    site.set("/gone.html", b"gone", status=410)  # listed, 410 from the start
    listed_redirect(site, "/old.html", "/p0.html")
    rep = harness.run()
    assert rep.ok and rep.pages_removed == 0 and rep.chunks_deleted == 0 and rep.pages_added == 2

    site.resources["/p1.html"] = Resource(b"", status=404)  # still listed
    rep = harness.run(full=True, advance=timedelta(hours=1))
    assert rep.pages_removed == 1 and rep.chunks_deleted > 0
    rep = harness.run(full=True, advance=timedelta(hours=2))  # found gone again
    assert rep.ok and rep.pages_removed == 0 and rep.chunks_deleted == 0
    rep = harness.run(advance=timedelta(days=10))  # and at its scheduled revisit
    assert rep.ok and rep.pages_removed == 0 and rep.chunks_deleted == 0
    assert_equals_fresh(harness)


def test_guard_counts_only_live_pages_of_the_tracked_ones(site, harness):
    build_pages(site, n=10)
    for i in range(4):
        site.set(f"/dead{i}.html", b"", status=404)  # listed, gone since the first pass
    harness.run()
    before = harness.points()
    for i in range(6):
        site.remove(f"/p{i}.html")
    rep = harness.run(advance=timedelta(days=4))  # every page due, the 4 gone ones too
    assert rep.mass_delete_blocked == 6 and rep.pages_removed == 0 and not rep.ok
    assert "would purge 6 of 10 tracked pages" in rep.errors[-1]["error"]
    assert harness.points() == before
    rep = harness.run(advance=timedelta(hours=1), allow_mass_delete=True)
    assert rep.pages_removed == 6
    assert_equals_fresh(harness)


def test_failed_or_empty_sitemap_reports_the_pass_blocked(site, harness):
    build_pages(site, n=3)
    harness.run()
    site.sitemap_mode = "missing"
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.sitemap_errors == 1 and rep.mass_delete_blocked == 3 and rep.pages_removed == 0 and not rep.ok
    site.sitemap_mode = "plain"
    for i in range(3):
        site.resources[f"/p{i}.html"].in_sitemap = False
    rep = harness.run(advance=timedelta(hours=2))
    assert rep.sitemap_errors == 1 and rep.mass_delete_blocked == 3 and rep.pages_removed == 0 and not rep.ok


def test_full_revisits_gone_pages_still_listed(site, harness):
    build_pages(site, n=3)
    harness.run()
    good = site.resources["/p1.html"]
    site.resources["/p1.html"] = Resource(b"", status=404, mtime=good.mtime)  # still listed, same lastmod
    assert harness.run(full=True, advance=timedelta(hours=1)).pages_removed == 1
    site.resources["/p1.html"] = good
    rep = harness.run(full=True, advance=timedelta(hours=2))  # long before its scheduled revisit
    assert rep.ok and rep.pages_added == 1
    assert_equals_fresh(harness)


def test_full_revisits_gone_pages_tracked_by_url(site, harness):
    site.set("/solo.html", page_html("Solo", [para("solo")]), in_sitemap=False)
    good = site.resources["/solo.html"]
    url = site.server.url("/solo.html")
    harness.run(sitemaps=[], urls=[url])
    site.resources["/solo.html"] = Resource(b"", status=404, in_sitemap=False)
    assert harness.run(sitemaps=[], urls=[url], full=True, advance=timedelta(hours=1)).pages_removed == 1
    site.resources["/solo.html"] = good
    rep = harness.run(sitemaps=[], urls=[url], full=True, advance=timedelta(hours=2))
    assert rep.pages_added == 1
