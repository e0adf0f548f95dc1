"""Polite and safe fetching against a real server on 127.0.0.1: robots.txt, scope,
redirects as the RFCs mean them, Retry-After, size/type limits, the mass-deletion guard."""

from __future__ import annotations

from datetime import timedelta

from demo.site_server import Resource
from sync.edges.state import GONE, StateDB
from tests.helpers import build_pages, by_url, page_html, para, second_site
from tests.property_helpers import assert_equals_fresh


def test_robots_disallow_skips_and_keeps_points(site, harness):
    build_pages(site, n=3)
    harness.run()
    before = harness.points()
    site.set("/robots.txt", "User-agent: *\nDisallow: /p1.html\n", content_type="text/plain")
    site.set("/p1.html", page_html("Page 1", [para("changed but forbidden")]))
    rep = harness.run(full=True, advance=timedelta(hours=25))  # past the 24 h robots.txt cache
    assert rep.pages_skipped == 1 and rep.pages_failed == 0 and rep.ok
    assert rep.skipped[0]["url"].endswith("/p1.html") and "robots.txt" in rep.skipped[0]["reason"]
    assert harness.points() == before
    assert site.count(path="/p1.html") == 1  # only the first pass fetched it


def test_robots_5xx_disallows_all_for_now_and_purges_nothing(site, harness):
    build_pages(site, n=2)
    harness.run()
    before = harness.points()
    site.error("/robots.txt", 503)
    rep = harness.run(full=True, advance=timedelta(hours=25))  # past the 24 h robots.txt cache
    # Disallowed for now, as failures (exit 1, retried soon), not skips: points kept.
    assert rep.pages_failed == 2 and rep.pages_skipped == 0 and rep.pages_removed == 0 and not rep.ok
    assert harness.points() == before
    # The failure is not cached: an hour later robots.txt is asked again, and now it answers.
    site.set("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
    site.clear_log()
    rep = harness.run(full=True, advance=timedelta(hours=1))
    assert site.count(path="/robots.txt") == 1
    assert rep.pages_skipped == 0 and rep.pages_not_modified == 2 and rep.ok


def test_robots_answer_is_reused_for_24_hours(site, harness):
    build_pages(site, n=2)
    site.set("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
    harness.run()
    assert site.count(path="/robots.txt") == 1
    site.set("/robots.txt", "User-agent: *\nDisallow: /p1.html\n", content_type="text/plain")
    rep = harness.run(full=True, advance=timedelta(hours=23))
    assert site.count(path="/robots.txt") == 1 and rep.robots_bytes == 0
    assert rep.pages_skipped == 0 and rep.pages_not_modified == 2  # the cached answer still allows p1
    rep = harness.run(full=True, advance=timedelta(hours=2))  # 25 h after it was read: asked again
    assert site.count(path="/robots.txt") == 2 and rep.robots_bytes > 0
    assert rep.pages_skipped == 1 and rep.skipped[0]["url"].endswith("/p1.html")


def test_sitemap_discovered_through_robots_txt(site, harness):
    build_pages(site, n=2)
    site.set(
        "/robots.txt",
        f"User-agent: *\nAllow: /\nSitemap: {site.server.url('/sitemap.xml')}\n",
        content_type="text/plain",
    )
    rep = harness.run(sitemaps=[site.server.url("/robots.txt")])
    assert rep.pages_in_sitemaps == 2 and rep.pages_added == 2


def test_hostile_sitemap_urls_are_skipped_and_reported(site, harness):
    build_pages(site, n=2)
    base = site.server.base_url
    port = base.rsplit(":", 1)[1]
    hostile = [
        f"http://localhost:{port}/p0.html",
        "http://169.254.169.254/latest/meta-data/",
        "ftp://example.com/file",
        "http://attacker.example/x",
    ]
    body = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{u}</loc></url>" for u in [f"{base}/p1.html", *hostile])
        + "</urlset>"
    )
    site.resources["/custom-sitemap.xml"] = Resource(body.encode(), "application/xml", in_sitemap=False)
    rep = harness.run(sitemaps=[site.server.url("/custom-sitemap.xml")])
    assert rep.pages_added == 1 and rep.pages_in_sitemaps == 1
    # ftp:// is no page URL at all (an invalid <loc>); the three http(s) ones are out of scope
    assert rep.pages_out_of_scope == 3 and rep.pages_invalid_loc == 1
    assert {s["url"] for s in rep.skipped} >= {"http://169.254.169.254/latest/meta-data/", "http://attacker.example/x"}
    assert all(p[1] != "/latest/meta-data/" for p in site.requests)


def test_invalid_sitemap_locs_are_counted_and_reported_as_skipped(site, harness):
    """Relative, mailto:, empty and other non-http <loc> entries used to vanish uncounted
    : they are skipped pages now, each with its reason, like out-of-scope ones."""
    build_pages(site, n=1)
    base = site.server.base_url
    locs = [f"{base}/p0.html", "/p1.html", "mailto:docs@example.com", "", "ftp://example.com/file"]
    body = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{u}</loc></url>" for u in locs)
        + "</urlset>"
    )
    site.resources["/custom-sitemap.xml"] = Resource(body.encode(), "application/xml", in_sitemap=False)
    for _ in range(2):  # the second pass reads the kept parse (the sitemap answers 304): same count
        rep = harness.run(sitemaps=[site.server.url("/custom-sitemap.xml")], advance=timedelta(minutes=5))
        assert rep.pages_in_sitemaps == 1 and rep.pages_invalid_loc == 4 and rep.pages_out_of_scope == 0
        assert rep.pages_skipped == 4 and rep.pages_skipped + rep.sitemaps_skipped == len(rep.skipped)
        reasons = {s["url"]: s["reason"] for s in rep.skipped}
        assert reasons == {
            "/p1.html": "invalid <loc>: relative URL (a sitemap lists absolute URLs)",
            "mailto:docs@example.com": "invalid <loc>: scheme mailto, not http(s)",
            "": "invalid <loc>: empty",
            "ftp://example.com/file": "invalid <loc>: scheme ftp, not http(s)",
        }
        assert "4 skipped" in rep.summary() and rep.ok
    assert rep.sitemaps_not_modified == 1


def test_allow_host_extends_the_scope(site, harness):
    site.set("/p0.html", page_html("P0", [para("zero")]))
    port = site.server.base_url.rsplit(":", 1)[1]
    rep = harness.run(sitemaps=[], urls=[f"http://localhost:{port}/p0.html"], allow_hosts=[f"localhost:{port}"])
    assert rep.pages_added == 1


def test_a_page_out_of_scope_now_is_purged_under_that_reason(site, harness):
    """A page indexed through --allow-host, its host dropped from the run: still listed,
    never fetched, and gone from the collection as a fresh index of this configuration
    would be, under "out of scope", not "left the sitemap"."""
    build_pages(site, n=2)
    base = site.server.base_url
    port = base.rsplit(":", 1)[1]
    other = f"http://localhost:{port}/p0.html"
    body = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{u}</loc></url>" for u in [f"{base}/p1.html", other])
        + "</urlset>"
    )
    site.resources["/custom-sitemap.xml"] = Resource(body.encode(), "application/xml", in_sitemap=False)
    sm = [site.server.url("/custom-sitemap.xml")]
    assert harness.run(sitemaps=sm, allow_hosts=[f"localhost:{port}"]).pages_added == 2
    rep = harness.run(sitemaps=sm, advance=timedelta(minutes=5))
    assert rep.pages_removed == 1 and rep.pages_out_of_scope == 1
    (change,) = [c for c in rep.to_dict()["changes"] if c["url"] == other]
    assert change["reason"].startswith("out of scope: ") and "left the sitemap" not in change["reason"]
    assert set(by_url(harness.points())) == {f"{base}/p1.html"}


def test_permanent_redirect_moves_the_key_to_the_target(site, harness):
    build_pages(site, n=2)
    harness.run()
    old, new = site.server.url("/p1.html"), site.server.url("/p1-new.html")
    body = site.resources["/p1.html"].body
    site.set("/p1-new.html", body, in_sitemap=False)
    site.redirect("/p1.html", "/p1-new.html", status=301)
    site.resources["/p1.html"].in_sitemap = True  # the sitemap still lists the old URL
    rep = harness.run(full=True)
    assert rep.pages_removed == 1 and rep.pages_added == 1 and rep.pages_failed == 0
    urls = set(by_url(harness.points()))
    assert new in urls and old not in urls
    with StateDB(harness.state_path) as st:
        assert st.get(old).status == GONE and st.get(new).indexed


def test_temporary_redirect_does_not_move_the_key(site, harness):
    build_pages(site, n=1)
    harness.run()
    site.set("/elsewhere.html", page_html("Page 0", [para("temporarily elsewhere")]), in_sitemap=False)
    site.redirect("/p0.html", "/elsewhere.html", status=307)
    site.resources["/p0.html"].in_sitemap = True
    rep = harness.run(full=True)
    assert rep.pages_changed == 1
    assert set(by_url(harness.points())) == {site.server.url("/p0.html")}


def test_retry_after_defers_the_page(site, harness):
    build_pages(site, n=1)
    harness.run()
    site.error("/p0.html", 429, headers={"Retry-After": "86400"})
    rep = harness.run(full=True)
    assert rep.pages_failed == 1 and "Retry-After" in rep.errors[0]["error"]
    with StateDB(harness.state_path) as st:
        assert st.get(site.server.url("/p0.html")).due_at >= harness.now + timedelta(days=1)


def test_oversized_and_non_text_pages_are_skipped_not_failed(site, harness):
    build_pages(site, n=2)
    harness.run()
    before = harness.points()
    site.set("/p0.html", b"%PDF-1.7", content_type="application/pdf")
    site.set("/p1.html", b"<html>" + b"x" * (11 * 1024 * 1024) + b"</html>")
    rep = harness.run(full=True)
    assert rep.pages_skipped == 2 and rep.pages_failed == 0 and rep.ok
    reasons = " ".join(s["reason"] for s in rep.skipped)
    assert "application/pdf" in reasons and "larger than" in reasons
    assert harness.points() == before


def test_mass_deletion_guard_blocks_then_allows(site, harness):
    build_pages(site, n=10)
    harness.run()
    before = harness.points()
    for i in range(6):
        site.remove(f"/p{i}.html")
    rep = harness.run()
    assert rep.mass_delete_blocked == 6 and rep.pages_removed == 0 and not rep.ok
    assert "--allow-mass-delete" in rep.errors[-1]["error"]
    assert harness.points() == before
    rep = harness.run(allow_mass_delete=True)
    assert rep.pages_removed == 6
    assert len(by_url(harness.points())) == 4


def test_site_answering_404_everywhere_purges_nothing(site, harness):
    build_pages(site, n=8)
    harness.run()
    before = harness.points()
    for i in range(8):
        site.resources[f"/p{i}.html"] = Resource(b"", status=404)  # still listed
    rep = harness.run(full=True)
    assert rep.mass_delete_blocked == 8 and rep.pages_removed == 0
    assert harness.points() == before


# A deploy the extractor cannot read: every page answers 200 with an empty <main> (the
# text now comes from JavaScript). Each page would lose its points as a "change".
EMPTIED = "<html><head><title>Docs</title></head><body><nav><a href='/'>Home</a></nav><main></main></body></html>"


def test_a_deploy_that_extracts_to_nothing_everywhere_purges_nothing(site, harness, tmp_path):
    build_pages(site, n=8)
    harness.run()
    before = harness.points()
    for i in range(8):
        site.set(f"/p{i}.html", EMPTIED)
    rep = harness.run(full=True)
    assert rep.mass_delete_blocked == 8 and rep.pages_removed == 0 and rep.pages_changed == 0 and not rep.ok
    assert "--allow-mass-delete" in rep.errors[-1]["error"]
    assert harness.points() == before
    # The deploy is rolled back: the pages held back are whole again, nothing re-embedded.
    build_pages(site, n=8)
    rep = harness.run(full=True, advance=timedelta(hours=2))
    assert rep.ok and rep.pages_removed == 0 and rep.chunks_embedded == 0
    assert harness.points() == before


def test_a_page_emptied_alone_is_purged_and_the_collection_equals_a_fresh_index(site, harness, tmp_path):
    build_pages(site, n=8)
    harness.run()
    site.set("/p3.html", EMPTIED)
    rep = harness.run(full=True)
    assert rep.ok and rep.pages_removed == 1 and rep.mass_delete_blocked == 0
    assert [c["reason"] for c in rep.to_dict()["changes"] if c["url"].endswith("/p3.html")] == [
        "no text extracted (an empty page, or a template or rendering change the extractor cannot read)"
    ]
    assert site.server.url("/p3.html") not in by_url(harness.points())
    assert_equals_fresh(harness)
    # Its text comes back: indexed again.
    build_pages(site, n=8)
    rep = harness.run(full=True, advance=timedelta(hours=2))
    assert rep.ok and rep.pages_added + rep.pages_changed == 1
    assert_equals_fresh(harness, "fresh-2")


def test_empty_sitemap_purges_nothing(site, harness):
    build_pages(site, n=2)
    harness.run()
    before = harness.points()
    for i in range(2):
        site.resources[f"/p{i}.html"].in_sitemap = False
    rep = harness.run()
    assert rep.pages_removed == 0 and rep.sitemap_errors == 1 and not rep.ok
    assert harness.points() == before


# A JavaScript-only deploy whose shell has a <noscript> line: every page answers 200 with the
# same one-line text. Not empty, so no purge: each page would "change" to that line.
SHELL = (
    "<!doctype html><html><head><title>{title}</title><script defer src='/static/js/main.js'></script>"
    "</head><body><noscript>You need to enable JavaScript to run this app.</noscript><div id='root'></div>"
    "</body></html>"
)


def test_a_javascript_shell_deploy_everywhere_replaces_nothing(site, harness):
    """Seen in use: 152 of 160 pages 'changed' to the <noscript> line, 4,116 chunks deleted,
    exit 0. Such changes count toward the mass-deletion guard as purges do."""
    build_pages(site, n=8, sections=6)
    harness.run()
    before = harness.points()
    for i in range(8):
        site.set(f"/p{i}.html", SHELL.format(title=f"Page {i}"))
    rep = harness.run(full=True)
    assert rep.mass_delete_blocked == 8 and rep.pages_changed == 0 and rep.chunks_deleted == 0 and not rep.ok
    guard = rep.errors[-1]["error"]
    assert "would empty 8 of 8 tracked pages (more than 20%; emptied: " in guard and "--allow-mass-delete" in guard
    assert harness.points() == before
    with StateDB(harness.state_path) as st:
        held = st.get(site.server.url("/p0.html"))
    assert held.failures == 1 and "held by the mass-deletion guard" in held.last_error

    # Rolled back: nothing to do, and the collection is what a fresh index makes.
    build_pages(site, n=8, sections=6)
    rep = harness.run(full=True, advance=timedelta(hours=2))
    assert rep.ok and rep.pages_changed == 0 and rep.chunks_embedded == 0
    assert harness.points() == before
    assert_equals_fresh(harness)


def test_a_javascript_shell_deploy_goes_through_with_allow_mass_delete(site, harness):
    build_pages(site, n=8, sections=6)
    harness.run()
    for i in range(8):
        site.set(f"/p{i}.html", SHELL.format(title=f"Page {i}"))
    rep = harness.run(full=True, allow_mass_delete=True)
    assert rep.ok and rep.pages_changed == 8 and rep.mass_delete_blocked == 0
    assert_equals_fresh(harness)


def test_a_few_pages_cut_to_a_stub_are_edits_and_are_written(site, harness):
    """Below the guard's share a collapse is an edit: written in the same pass, the other
    changes of the pass too, and the collection equals a fresh index."""
    build_pages(site, n=10, sections=6)
    harness.run()
    site.set("/p1.html", page_html("Page 1", [para("now a stub", words=8)]))  # 6 sections to 1 short one
    site.set("/p2.html", SHELL.format(title="Page 2"))
    site.set("/p3.html", page_html("Page 3", [para(f"p3-new-{j}") for j in range(6)]))  # an ordinary edit
    rep = harness.run(full=True)
    assert rep.ok and rep.pages_changed == 3 and rep.mass_delete_blocked == 0
    assert_equals_fresh(harness)


MAINTENANCE = (
    "<html><head><title>Maintenance</title></head><body><main><h1>Down for "
    "maintenance</h1><p>Service temporarily unavailable. Please try again later.</p></main></body></html>"
)


def test_short_pages_all_changed_to_one_text_are_held(site, harness):
    """Short pages (too few chunks to collapse) that all change to the same short text in
    one pass, losing a chunk: a template, not their content."""
    for i in range(8):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"short {i}", words=12), para(f"more {i}", words=12)]))
    harness.run()
    before = harness.points()
    for i in range(8):
        site.set(f"/p{i}.html", MAINTENANCE)
    rep = harness.run(full=True)
    assert rep.mass_delete_blocked == 8 and rep.pages_changed == 0 and not rep.ok
    assert harness.points() == before


def test_one_section_pages_all_changed_to_one_stub_are_held(site, harness):
    """A page of one section is one chunk, and so is the stub: no chunk is lost, but the
    text fell to a fraction of its length on every page at once. Held, then written once
    the site is back."""
    for i in range(8):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"short {i}", words=50)]))
    harness.run()
    before = harness.points()
    assert len(before) == 8  # one chunk a page
    for i in range(8):
        site.set(f"/p{i}.html", MAINTENANCE)
    rep = harness.run(full=True)
    assert rep.mass_delete_blocked == 8 and rep.pages_changed == 0 and not rep.ok
    assert harness.points() == before
    with StateDB(harness.state_path) as st:
        held = st.get(site.server.url("/p0.html"))
    assert held.failures == 1 and held.last_error.startswith(
        "change held by the mass-deletion guard (text shrank from "
    )
    assert "characters to " in held.last_error

    for i in range(8):  # back, with an edit: written as one
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"short {i} again", words=50)]))
    rep = harness.run(full=True, advance=timedelta(hours=2))
    assert rep.ok and rep.pages_changed == 8
    assert_equals_fresh(harness)


def test_tiny_one_section_pages_edited_alike_are_written(site, harness):
    """Tiny pages that all change to one text no shorter than half of theirs: an edit (a
    placeholder filled in alike), written in the pass."""
    for i in range(8):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [f"Draft {i}."]))
    harness.run()
    for i in range(8):
        site.set(f"/p{i}.html", page_html(f"Page {i}", ["Coming soon: this page is being written."]))
    rep = harness.run(full=True)
    assert rep.ok and rep.pages_changed == 8 and rep.mass_delete_blocked == 0


def test_one_sites_empty_sitemap_among_several_purges_nothing(site, harness):
    """Seen in use: three sitemaps; one site's sitemap came back as an empty urlset and its
    pages were purged ("left the sitemap"), exit 0; with that sitemap alone it was refused.
    Per site now: a configured site whose sitemap lists nothing purges nothing."""
    build_pages(site, n=6)
    with second_site() as (other, server):
        both = [harness.sitemap(), server.url("/sitemap.xml")]
        assert harness.run(sitemaps=both).pages_added == 8
        before = harness.points()
        for i in range(2):
            other.resources[f"/b{i}.html"].in_sitemap = False
        rep = harness.run(sitemaps=both, full=True)
        assert rep.pages_removed == 0 and rep.sitemap_errors == 1 and not rep.ok
        assert "listed no URLs of this site" in rep.errors[-1]["error"]
        assert harness.points() == before
        rep = harness.run(sitemaps=both, allow_mass_delete=True)
        assert rep.pages_removed == 2 and rep.ok
        assert not any(u.startswith(server.url("/")) for u in by_url(harness.points()))


def test_a_sitemap_dropped_from_the_config_still_takes_its_pages_with_it(site, harness):
    """Not an empty sitemap: a site no longer configured is out of scope, and its pages go."""
    build_pages(site, n=6)
    with second_site() as (_, server):
        assert harness.run(sitemaps=[harness.sitemap(), server.url("/sitemap.xml")]).pages_added == 8
        rep = harness.run()
        assert rep.ok and rep.pages_removed == 2 and rep.sitemap_errors == 0, rep.errors
        assert {u for u in by_url(harness.points())} == {site.server.url(f"/p{i}.html") for i in range(6)}
