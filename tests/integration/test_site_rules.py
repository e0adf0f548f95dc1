"""--include/--exclude and the default excludes across passes: an excluded page is never
fetched, and a tracked page that becomes excluded leaves like a page that left the sitemap."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sync.core.site_rules import SiteRules, SiteRuleSet
from sync.errors import ConfigError
from tests.helpers import page_html, para

pytestmark = pytest.mark.integration


def rules(**kw) -> SiteRuleSet:
    return SiteRuleSet(SiteRules(**kw))


def build(site, names):
    for name in names:
        site.set(name, page_html(name, [para(f"{name} a"), para(f"{name} b")]))


def fetched(site) -> set[str]:
    return {p for _, p, _, _ in site.requests if "sitemap" not in p and p != "/robots.txt"}


def urls(h) -> set[str]:
    return {p["url"].removeprefix(h.site.base_url) for p in h.points().values()}


def test_default_excludes_keep_sphinx_index_pages_out_unfetched(site, harness):
    build(site, ["/index.html", "/guide.html", "/genindex.html", "/search.html", "/py-modindex.html"])
    rep = harness.run(policy="change-rate")
    assert rep.ok and rep.pages_added == 2 and rep.pages_excluded == 3 and rep.pages_in_sitemaps == 2
    assert fetched(site) == {"/index.html", "/guide.html"}
    assert urls(harness) == {"/index.html", "/guide.html"}
    assert "3 excluded" in rep.summary()


def test_a_page_that_becomes_excluded_is_purged_and_not_fetched(site, harness):
    build(site, ["/index.html", "/guide.html", "/changelog/1.html", "/genindex.html"])
    rep = harness.run(site_rules=rules(default_excludes=False))
    assert rep.ok and rep.pages_added == 4
    site.clear_log()
    rep = harness.run(advance=timedelta(days=10), site_rules=rules(exclude=("*/changelog/*",)))
    assert rep.ok, rep.errors
    assert rep.pages_removed == 2 and rep.pages_excluded == 2
    assert urls(harness) == {"/index.html", "/guide.html"}
    assert not fetched(site) & {"/changelog/1.html", "/genindex.html"}
    reasons = {c["url"].removeprefix(site.base_url): c["reason"] for c in rep.changes if c["action"] == "removed"}
    assert reasons == {
        "/changelog/1.html": "excluded by --exclude */changelog/*",
        "/genindex.html": "excluded by default (Sphinx: */genindex.html; --no-default-excludes keeps it)",
    }
    # Excluded still: nothing is fetched, nothing more is removed.
    site.clear_log()
    rep = harness.run(advance=timedelta(days=10), site_rules=rules(exclude=("*/changelog/*",)), full=True)
    assert rep.ok and rep.pages_removed == 0 and not fetched(site) & {"/changelog/1.html", "/genindex.html"}


def test_an_include_that_drops_most_pages_is_held_by_the_mass_deletion_guard(site, harness):
    build(site, ["/index.html", *(f"/old/{i}.html" for i in range(8))])
    assert harness.run().pages_added == 9
    narrow = rules(include=("*/index.html",))
    rep = harness.run(advance=timedelta(days=1), site_rules=narrow)
    assert not rep.ok and rep.mass_delete_blocked == 8 and rep.pages_removed == 0
    assert len(urls(harness)) == 9
    rep = harness.run(advance=timedelta(days=1), site_rules=narrow, allow_mass_delete=True)
    assert rep.ok and rep.pages_removed == 8 and urls(harness) == {"/index.html"}


def test_sitemaps_whose_every_url_is_excluded_are_a_configuration_error(site, harness):
    build(site, ["/a.html", "/b.html"])
    with pytest.raises(ConfigError, match="every URL the sitemaps list is excluded .*check --include/--exclude"):
        harness.run(site_rules=rules(include=("*/docs/*",)))
    assert fetched(site) == set()


def test_an_excluded_url_page_is_not_fetched_and_a_tracked_one_leaves(site, harness):
    build(site, ["/a.html"])
    site.set("/extra.html", page_html("Extra", [para("extra")]), in_sitemap=False)
    extra = site.server.url("/extra.html")
    assert harness.run(urls=[extra]).pages_added == 2
    site.clear_log()
    rep = harness.run(urls=[extra], advance=timedelta(days=10), site_rules=rules(exclude=("*/extra.html",)))
    assert rep.ok and rep.pages_removed == 1 and "/extra.html" not in fetched(site)
    assert urls(harness) == {"/a.html"}


def test_a_failed_sitemap_leaves_excluded_pages_alone(site, harness):
    build(site, ["/a.html", "/b.html"])
    assert harness.run().pages_added == 2
    site.sitemap_mode = "missing"
    site.clear_log()
    rep = harness.run(advance=timedelta(days=10), site_rules=rules(exclude=("*/b.html",)))
    assert rep.pages_removed == 0 and "/b.html" not in fetched(site) and "/a.html" in fetched(site)
    assert urls(harness) == {"/a.html", "/b.html"}


def test_a_redirect_to_an_excluded_page_does_not_track_it(site, harness):
    build(site, ["/a.html", "/b.html"])
    assert harness.run().pages_added == 2
    site.set("/genindex.html", page_html("Index", [para("index")]), in_sitemap=False)
    site.redirect("/b.html", "/genindex.html")
    site.resources["/b.html"].in_sitemap = True
    rep = harness.run(advance=timedelta(days=10), full=True)
    assert rep.ok and rep.pages_removed == 1 and "/genindex.html" not in fetched(site)
    assert urls(harness) == {"/a.html"}


SPHINX_SEARCH_PAGE = (
    '<html><head><title>Search</title><script src="../_static/searchtools.js"></script></head>'
    "<body><main><h1>Search</h1><p>Please activate JavaScript to enable the search functionality.</p>"
    '<div id="search-results"></div></main></body></html>'
)


def test_a_generators_search_page_is_skipped_and_a_page_named_search_is_indexed(site, harness):
    build(site, ["/index.html", "/commands/search/"])
    site.set("/search/", SPHINX_SEARCH_PAGE)
    rep = harness.run()
    assert rep.ok, rep.errors
    assert urls(harness) == {"/index.html", "/commands/search/"}
    skipped = {s["url"].removeprefix(site.base_url): s["reason"] for s in rep.skipped}
    assert skipped == {"/search/": "excluded by default (Sphinx: its search page; --no-default-excludes keeps it)"}
    # Indexed with the default excludes off, it leaves once they are on again.
    rep = harness.run(advance=timedelta(days=10), site_rules=rules(default_excludes=False), full=True)
    assert rep.ok and "/search/" in urls(harness)
    rep = harness.run(advance=timedelta(days=10), full=True)
    assert rep.ok, rep.errors
    assert urls(harness) == {"/index.html", "/commands/search/"}
    reasons = {c["url"].removeprefix(site.base_url): c["reason"] for c in rep.changes if c["action"] == "removed"}
    assert reasons == {"/search/": "excluded by default (Sphinx: its search page; --no-default-excludes keeps it)"}
