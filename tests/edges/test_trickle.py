"""--timeout bounds a whole answer, not each read: sitemaps and robots.txt trickled a byte at
a time by a real server on 127.0.0.1 (pages: tests/edges/test_fetcher.py). Each byte comes well
within the client's read timeout (5 s); the whole answer would take 20 s or more."""

from __future__ import annotations

from datetime import timedelta

from sync.edges.state import StateDB
from tests.helpers import T0, page_html, para

DEADLINE = 1.0  # the Fetcher's whole-answer deadline in these passes (--timeout)


def build(site, n=3):
    for i in range(n):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}")]))


def test_a_trickled_sitemap_is_a_sitemap_error_and_removes_nothing(site, harness):
    build(site)
    harness.run()
    before = harness.points()
    site.set("/p3.html", page_html("Page 3", [para("p3")]))  # a new sitemap body: no 304
    site.trickle("/sitemap.xml", 0.05)
    rep = harness.run(fetcher_kw={"deadline": DEADLINE})
    assert rep.sitemap_errors == 1 and not rep.ok
    assert any("sitemap.xml" in e["url"] + e["error"] and "timeout" in e["error"] for e in rep.errors), rep.errors
    assert rep.pages_removed == rep.pages_added == 0
    assert harness.points() == before


def test_a_trickled_robots_txt_is_no_answer(site, harness):
    """robots.txt as documented for no answer: the host's pages fail (points kept), nothing
    is requested from it, and the failure is not cached (the last good answer stays)."""
    build(site)
    harness.run()
    before = harness.points()
    n_pages = site.count(path="/p0.html")
    site.set("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
    site.trickle("/robots.txt", 0.5)
    # Two days on the pass clock: the robots.txt answer kept from the first pass (24 h) is stale.
    rep = harness.run(full=True, advance=timedelta(days=2), fetcher_kw={"deadline": DEADLINE})
    assert rep.pages_failed == 3 and not rep.ok
    assert all("robots.txt got no answer" in e["error"] for e in rep.errors), rep.errors
    assert site.count(path="/p0.html") == n_pages  # not requested
    assert rep.pages_removed == 0 and harness.points() == before
    with StateDB(harness.state_path) as st:
        kept = st.cached_robots(site.base_url)
    assert kept is not None and kept.status == 404 and kept.fetched_at == T0
