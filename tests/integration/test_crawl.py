"""A link crawl end to end against the local test site: a small Sphinx-like docs site (no
sitemap), link traps, robots.txt, noindex/nofollow/canonical, 404 purges, unlinked pages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from demo.site_server import Resource
from sync.core.links import CrawlLimits
from sync.edges.state import GONE, LIVE, StateDB
from tests.helpers import DOCS, Harness, build_docs, para, sphinx_page


def crawl(h: Harness, **kw):
    kw.setdefault("crawl", [h.site.server.url("/index.html")])
    return h.run(sitemaps=[], **kw)


def urls(h: Harness) -> set[str]:
    base = h.site.server.url("")
    return {p["url"].removeprefix(base) for p in h.points().values()}


def test_crawl_indexes_a_sitemapless_site_once_per_page(harness):
    build_docs(harness.site)
    rep = crawl(harness)
    assert rep.crawl_complete is True
    expected = {f"/{p}.html" for p in DOCS}  # genindex and search: Sphinx's, excluded by default
    assert urls(harness) == expected
    assert rep.pages_added == len(expected) and rep.pages_failed == 0
    # every page fetched once (plus robots.txt), fragments never requested
    got = [path for _, path, _, _ in harness.site.requests if path != "/robots.txt"]
    assert sorted(got) == sorted(expected)


def test_second_pass_is_conditional_and_keeps_every_page(harness):
    build_docs(harness.site)
    crawl(harness)
    harness.site.clear_log()
    rep = crawl(harness, advance=timedelta(days=30))  # everything due: 304s, links from the state
    assert rep.pages_not_modified == len(DOCS) and rep.pages_removed == 0
    assert rep.crawl_complete is True and rep.pages_crawled == len(DOCS)
    assert all(status == 304 for _, path, status, _ in harness.site.requests if path != "/robots.txt")
    # nothing due: no page request but the start page's conditional GET, and still nothing removed
    harness.site.clear_log()
    rep = crawl(harness, advance=timedelta(minutes=1))
    assert [(p, s) for _, p, s, _ in harness.site.requests if p != "/robots.txt"] == [("/index.html", 304)]
    assert rep.pages_removed == 0 and rep.crawl_complete is True


def test_removed_page_purged_on_404_and_unlinked_page_leaves(harness):
    build_docs(harness.site)
    crawl(harness)
    harness.site.remove("/changes.html")  # still linked: its visit answers 404
    rep = crawl(harness, advance=timedelta(days=30))
    assert "/changes.html" not in urls(harness) and rep.pages_removed == 1
    # unlink /api.html everywhere (it still answers 200): a complete crawl no longer reaches it
    rest = [p for p in DOCS if p not in ("api", "changes")]
    build_docs(harness.site, pages=rest, linked=rest)
    rep = crawl(harness, advance=timedelta(days=30))
    assert rep.crawl_complete is True and "/api.html" in urls(harness)  # one crawl is no evidence yet
    rep = crawl(harness, advance=timedelta(days=3))  # a second complete crawl, a revisit interval later
    assert rep.crawl_complete is True
    assert "/api.html" not in urls(harness)
    assert any(c["url"].endswith("/api.html") and "no longer linked" in c["reason"] for c in rep.changes)
    with StateDB(harness.state_path) as st:
        assert st.get(harness.site.server.url("/api.html")).status == GONE


def test_incomplete_crawl_purges_nothing_for_not_being_linked(harness):
    build_docs(harness.site)
    crawl(harness)
    rest = [p for p in DOCS if p != "api"]
    build_docs(harness.site, pages=rest, linked=rest)
    harness.site.error("/options.html", 500)  # a failure: the crawl does not know what options links to
    rep = crawl(harness, advance=timedelta(days=30))
    assert rep.crawl_complete is False
    assert "/api.html" in urls(harness)
    rep = crawl(harness, max_pages=3, advance=timedelta(days=30))  # the bound is hit
    assert rep.crawl_complete is False and rep.pages_crawled == 3
    assert "/api.html" in urls(harness)


def test_mass_unlinking_is_held_by_the_guard(harness):
    build_docs(harness.site)
    crawl(harness)
    build_docs(harness.site, pages=["index"], linked=["index"])  # the nav lost every link but its own
    rep = crawl(harness, advance=timedelta(days=30))
    assert rep.crawl_complete is True and rep.pages_removed == 0  # one crawl is no evidence yet
    rep = crawl(harness, advance=timedelta(days=3))
    assert rep.crawl_complete is True and rep.mass_delete_blocked > 0
    assert len(urls(harness)) == len(DOCS)


def test_robots_noindex_nofollow_and_canonical(harness):
    site = harness.site
    site.set("/robots.txt", "User-agent: *\nDisallow: /private/\n", "text/plain")
    site.set("/index.html", sphinx_page("index", ["a", "private/secret", "hidden", "alias"]))
    site.set("/a.html", sphinx_page("a", ["index"]))
    site.set("/private/secret.html", sphinx_page("secret", []))
    # noindex: not indexed, its links followed; nofollow (meta): indexed, links not followed
    site.set("/hidden.html", sphinx_page("hidden", ["b"], head='<meta name="robots" content="noindex">'))
    site.set("/b.html", sphinx_page("b", ["c"], head='<meta name="robots" content="nofollow">'))
    site.set("/c.html", sphinx_page("c", []))
    # rel=nofollow on a link: not followed
    site.set("/a.html", sphinx_page("a", ["index"], body=f"<p>{para('a')}</p><a rel='nofollow' href='d.html'>d</a>"))
    site.set("/d.html", sphinx_page("d", []))
    # a canonical within the crawl: indexed under it
    site.set("/alias.html", sphinx_page("alias", [], head='<link rel="canonical" href="/real.html">'))
    site.set("/real.html", sphinx_page("real", []))
    rep = crawl(harness)
    assert urls(harness) == {"/index.html", "/a.html", "/b.html", "/real.html"}
    requested = {p for _, p, _, _ in site.requests}
    assert "/private/secret.html" not in requested and "/c.html" not in requested and "/d.html" not in requested
    assert rep.crawl_complete is True


def test_crawl_stays_in_the_start_directory_and_scope(harness):
    site = harness.site
    site.set(
        "/docs/index.html",
        sphinx_page("index", ["guide"]).replace(
            "</body>", "<a href='/blog/post.html'>blog</a><a href='https://example.com/x.html'>x</a></body>"
        ),
    )
    site.set("/docs/guide.html", sphinx_page("guide", ["index"]))
    site.set("/blog/post.html", sphinx_page("post", []))
    crawl(harness, crawl=[site.server.url("/docs/index.html")])
    assert urls(harness) == {"/docs/index.html", "/docs/guide.html"}
    assert "/blog/post.html" not in {p for _, p, _, _ in site.requests}


def _trap(path: str) -> Resource | None:
    """An endless pager and calendar: every page links to the next one."""
    base, _, query = path.partition("?")
    if base == "/list.html":
        n = int(query.removeprefix("page=") or 0) if query.startswith("page=") else 0
        body = f"<html><body><main><p>{para(f'list {n}')}</p><a href='list.html?page={n + 1}'>next</a></main></body></html>"
        return Resource(body.encode())
    if base.startswith("/cal/"):
        y, m = (int(x) for x in base.removeprefix("/cal/").removesuffix(".html").split("-"))
        y2, m2 = (y, m + 1) if m < 12 else (y + 1, 1)
        body = (
            f"<html><body><main><p>{para(f'cal {y} {m}')}</p><a href='{y2}-{m2:02d}.html'>next</a>"
            f"<a href='../cal/{y}-{m:02d}.html#x'>self</a></main></body></html>"
        )
        return Resource(body.encode())
    return None


def test_link_traps_stay_bounded(harness):
    site = harness.site
    site.dynamic = _trap
    site.set(
        "/index.html",
        "<html><body><main><p>" + para("home") + "</p><a href='list.html'>list</a>"
        "<a href='cal/2026-01.html'>calendar</a>"
        + "".join(f"<a href='p{i}.html'>{i}</a>" for i in range(3))
        + "</main></body></html>",
    )
    for i in range(3):
        site.set(f"/p{i}.html", "<html><body><main><p>" + para(f"p{i}") + "</p></main></body></html>")
    limits = CrawlLimits(max_query_variants=5, max_pattern_variants=8)
    rep = crawl(harness, crawl_limits=limits)
    requested = [p for _, p, _, _ in site.requests if p != "/robots.txt"]
    assert sum(p.startswith("/list.html") for p in requested) == 1 + 5  # the bare path and 5 query strings
    assert sum(p.startswith("/cal/") for p in requested) == 8
    assert rep.crawl_refused["too many query strings on one path"] >= 1
    assert rep.crawl_complete is True  # refused by a rule: not a page of the crawl
    # the bound: --max-pages caps what a pass fetches, whatever the caps
    rep = crawl(harness, crawl_limits=CrawlLimits(), max_pages=20, advance=timedelta(days=30))
    assert rep.pages_crawled == 20 and rep.crawl_complete is False


def test_a_page_with_100k_links_stays_bounded(harness):
    site = harness.site
    links = "".join(f"<a href='n{i}.html'>{i}</a>" for i in range(100_000))
    site.set("/index.html", f"<html><body><main><p>{para('big')}</p>{links}</main></body></html>")
    site.dynamic = lambda path: Resource(f"<html><body><main><p>{para(path)}</p></main></body></html>".encode())
    rep = crawl(harness, max_pages=50)
    assert rep.pages_crawled == 50 and rep.crawl_complete is False
    assert len([p for _, p, _, _ in site.requests if p != "/robots.txt"]) == 50


def test_crawl_complements_a_sitemap(harness):
    site = harness.site
    build_docs(site)
    for p in ("/options.html", "/commands.html", "/genindex.html", "/search.html"):
        site.resources[p].in_sitemap = False  # a sitemap that misses pages
    rep = harness.run(crawl=[site.server.url("/index.html")])
    assert urls(harness) == {f"/{p}.html" for p in DOCS}
    assert rep.pages_failed == 0
    # a page leaving the sitemap while still linked stays, as a crawl page
    site.resources["/api.html"].in_sitemap = False
    rep = harness.run(crawl=[site.server.url("/index.html")], advance=timedelta(days=30))
    assert "/api.html" in urls(harness) and rep.pages_removed == 0
    with StateDB(harness.state_path) as st:
        page = st.get(site.server.url("/api.html"))
        assert page.status == LIVE and page.source == "crawl"


def test_dry_run_crawl_says_what_it_would_add_and_writes_nothing(harness):
    build_docs(harness.site)
    rep = crawl(harness, dry_run=True)
    assert rep.pages_added == len(DOCS) and rep.crawl_complete is True
    rep = crawl(harness)  # nothing was kept: the real pass adds them all
    assert rep.pages_added == len(DOCS)


@pytest.mark.parametrize("harness", ["qdrant"], indirect=True)
def test_crawl_on_a_state_that_keeps_no_links(harness):
    """The Qdrant state keeps no links: each pass reads the crawl's pages whole, and still
    knows what is linked."""
    build_docs(harness.site)
    assert crawl(harness).pages_added == len(DOCS)
    rest = [p for p in DOCS if p != "api"]
    build_docs(harness.site, pages=rest, linked=rest)
    rep = crawl(harness, advance=timedelta(minutes=5))
    assert rep.crawl_complete is True and rep.pages_removed == 0  # marked unlinked: one crawl is no evidence
    rep = crawl(harness, advance=timedelta(days=3))
    assert rep.crawl_complete is True and rep.pages_removed == 1 and "/api.html" not in urls(harness)


def test_a_start_page_gone_purges_nothing_for_not_being_linked(harness):
    """Like an emptied sitemap: a start page that answers 404 is no empty site."""
    build_docs(harness.site, pages=["index", "a", "b"])
    crawl(harness)
    harness.site.remove("/index.html")
    rep = crawl(harness, advance=timedelta(days=30))
    assert rep.crawl_complete is False
    assert urls(harness) == {"/a.html", "/b.html"}


def test_a_start_page_back_after_a_404_is_read_the_next_pass(harness):
    """A start page's 404 (a deploy's glitch) is asked again every pass, not when it is due:
    the pages it links once back are found the next pass."""
    build_docs(harness.site, pages=["index", "a", "b"])
    crawl(harness)
    harness.site.remove("/index.html")
    crawl(harness, advance=timedelta(days=30))
    build_docs(harness.site, pages=["index", "a", "b", "c"])
    rep = crawl(harness, advance=timedelta(hours=1))
    assert rep.crawl_complete is True and urls(harness) == {"/index.html", "/a.html", "/b.html", "/c.html"}


def test_the_filter_hook_keeps_pages_out_of_the_crawl(harness):
    """The include/exclude rules come in as a hook on the canonical URL: a refused page is never fetched."""
    build_docs(harness.site)
    rep = crawl(harness, crawl_filter=lambda url: not url.endswith(("/genindex.html", "/search.html")))
    assert urls(harness) == {f"/{p}.html" for p in DOCS}
    assert not {"/genindex.html", "/search.html"} & {p for _, p, _, _ in harness.site.requests}
    assert rep.crawl_refused["excluded"] > 0 and rep.crawl_complete is True


def test_the_site_rules_keep_pages_out_of_the_crawl(harness):
    """--exclude and the default excludes refuse links before any fetch; without the defaults,
    Sphinx's index and search pages are crawled like any page."""
    from sync.core.site_rules import SiteRules, SiteRuleSet

    build_docs(harness.site)
    rep = crawl(harness, site_rules=SiteRuleSet(SiteRules(exclude=("*/advanced/*",))))
    assert urls(harness) == {f"/{p}.html" for p in DOCS if not p.startswith("advanced/")}
    fetched = {p for _, p, _, _ in harness.site.requests}
    assert not {"/genindex.html", "/search.html", "/advanced/testing.html"} & fetched
    assert rep.crawl_refused["excluded"] > 0 and rep.crawl_complete is True


def test_without_default_excludes_the_index_pages_are_crawled(harness):
    from sync.core.site_rules import SiteRules, SiteRuleSet

    build_docs(harness.site)
    crawl(harness, site_rules=SiteRuleSet(SiteRules(default_excludes=False)))
    assert "/genindex.html" in urls(harness)
    assert {"/genindex.html", "/search.html"} <= {p for _, p, _, _ in harness.site.requests}


def test_a_crawl_from_the_sites_root_given_without_its_slash(harness):
    """`--crawl https://docs.example.com`: the root is fetched as `/` and the crawl reaches the site."""
    build_docs(harness.site)
    harness.site.set("/", sphinx_page("index", DOCS))
    root = harness.site.server.url("").rstrip("/")
    rep = crawl(harness, crawl=[root])
    assert rep.crawl_complete is True and rep.pages_failed == 0
    assert urls(harness) == {"/"} | {f"/{p}.html" for p in DOCS}


def test_a_start_page_the_crawls_rules_refuse_makes_the_crawl_incomplete(harness):
    """Excluded later, the start page admits nothing: not a site with no pages, so none is purged for it."""
    from sync.core.site_rules import SiteRules, SiteRuleSet

    build_docs(harness.site)
    crawl(harness)
    rules = SiteRuleSet(SiteRules(exclude=("*/index.html",)))
    rep = crawl(harness, advance=timedelta(days=30), site_rules=rules, allow_mass_delete=True)
    assert rep.crawl_complete is False
    assert urls(harness) == {f"/{p}.html" for p in DOCS}  # none purged for not being linked
