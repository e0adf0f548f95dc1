"""The pure link reading and crawl frontier: normalisation, rules, trap caps and bounds."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.core.links import (
    CrawlLimits,
    CrawlRules,
    Frontier,
    PageLinks,
    crawl_prefix,
    crawl_start,
    links_from_json,
    links_to_json,
    read_links,
)

BASE = "https://docs.example.org/en/guide/intro.html"


def page(body: str, head: str = "") -> bytes:
    return f"<html><head>{head}</head><body>{body}</body></html>".encode()


@pytest.mark.parametrize(
    "href,expected",
    [
        ("setup.html", "https://docs.example.org/en/guide/setup.html"),
        ("../api/index.html#module-x", "https://docs.example.org/en/api/index.html"),
        ("/en/guide/intro.html?x=1#top", "https://docs.example.org/en/guide/intro.html?x=1"),
        ("HTTPS://Docs.Example.org:443/en/a.html", "https://docs.example.org/en/a.html"),
        ("  spaced.html  ", "https://docs.example.org/en/guide/spaced.html"),
        ("#section", None),
        ("mailto:team@example.org", None),
        ("javascript:void(0)", None),
        ("ftp://example.org/file", None),
        ("", None),
        ("http://[::1", None),
    ],
)
def test_links_are_absolute_canonical_and_without_fragments(href, expected):
    got = read_links(page(f"<a href='{href}'>x</a>"), BASE).links
    assert got == ((expected,) if expected else ())


def test_links_deduplicated_in_document_order_and_rel_nofollow_left_out():
    body = (
        "<a href='b.html'>b</a><a href='a.html'>a</a><a href='b.html#x'>b again</a>"
        "<a rel='nofollow' href='n.html'>n</a><a rel='noopener NoFollow' href='m.html'>m</a>"
        "<map><area href='area.html'></map>"
    )
    got = read_links(page(body), BASE).links
    assert [u.rsplit("/", 1)[1] for u in got] == ["b.html", "a.html", "area.html"]


def test_base_href_canonical_and_meta_robots():
    head = (
        "<base href='https://docs.example.org/en/other/'>"
        "<link rel='canonical' href='/en/guide/real.html'><meta name='robots' content='NOINDEX, follow'>"
    )
    got = read_links(page("<a href='x.html'>x</a>", head), BASE)
    assert got.links == ("https://docs.example.org/en/other/x.html",)
    assert got.canonical == "https://docs.example.org/en/guide/real.html"
    assert got.noindex and not got.nofollow
    nofollow = read_links(page("<a href='x.html'>x</a>", "<meta name='robots' content='nofollow'>"), BASE)
    assert nofollow.links == () and nofollow.nofollow and not nofollow.noindex
    none = read_links(page("<a href='x.html'>x</a>", "<meta name='robots' content='none'>"), BASE)
    assert none.noindex and none.nofollow


def test_unreadable_or_empty_bodies_have_no_links():
    assert read_links(b"", BASE) == PageLinks()
    assert read_links(b"   ", BASE) == PageLinks()
    assert read_links(b"\x00\xff\xfe garbage", BASE).links == ()


def test_a_page_of_many_links_is_cut_and_says_so():
    body = "".join(f"<a href='p{i}.html'>{i}</a>" for i in range(100))
    got = read_links(page(body), BASE, max_links=10)
    assert len(got.links) == 10 and got.truncated


def test_charset_from_the_header_decodes_the_links():
    body = "<a href='caf\u00e9.html'>x</a>".encode("latin-1")
    assert read_links(body, BASE, charset="latin-1").links == ("https://docs.example.org/en/guide/caf\u00e9.html",)


def test_kept_links_round_trip():
    links = PageLinks(("https://a/x", "https://a/y"), "https://a/c", noindex=True, truncated=True)
    assert links_from_json(links_to_json(links)) == links
    assert links_from_json("not json") is None and links_from_json('{"x": 1}') is None


@pytest.mark.parametrize(
    "start,prefix",
    [
        ("https://h/docs/en/index.html", "https://h/docs/en/"),
        ("https://H:443/docs/", "https://h/docs/"),
        ("http://h:8080", "http://h:8080/"),
        ("http://h/index.html?x=1", "http://h/"),
    ],
)
def test_crawl_prefix_is_the_start_page_directory(start, prefix):
    assert crawl_prefix(start) == prefix


def rules(**limits) -> CrawlRules:
    return CrawlRules(prefixes=["https://h/docs/"], limits=CrawlLimits(**limits))


@pytest.mark.parametrize(
    "url,reason",
    [
        ("https://h/docs/a.html", None),
        ("https://h/blog/a.html", "outside the start pages' sites and directories"),
        ("https://other/docs/a.html", "outside the start pages' sites and directories"),
        ("https://h/docs/" + "x" * 2000, "url too long"),
        ("https://h/docs/" + "/".join("abcdefghijklmnopq"), "path too deep"),
        ("https://h/docs/a/b/a/b/a/x.html", "repeated path segment"),
        ("https://h/docs/_images/logo.PNG", "not a page (a file type the fetcher does not read)"),
        ("https://h/docs/_static/app.js", "not a page (a file type the fetcher does not read)"),
    ],
)
def test_rules_refuse_one_url(url, reason):
    assert rules().refusal(url) == reason


def test_rules_take_the_scope_and_the_filter_hook():
    r = CrawlRules(
        prefixes=["https://h/"],
        in_scope=lambda u: "private address" if "/p/" in u else None,
        wanted=lambda u: not u.endswith("/genindex.html"),
    )
    assert r.refusal("https://h/genindex.html") == "excluded"
    assert r.refusal("https://h/p/x.html") == "out of scope"
    assert r.refusal("https://h/x.html") is None


def test_frontier_caps_query_strings_per_path_and_numbered_patterns():
    f = Frontier(rules(max_query_variants=3, max_pattern_variants=4), ["https://h/docs/list.html"])
    for n in range(100):
        f.offer(f"https://h/docs/list.html?page={n}")
        f.offer(f"https://h/docs/cal/{2000 + n}-01.html")
    assert [u for u in f if "?" in u] == [f"https://h/docs/list.html?page={n}" for n in range(3)]
    assert sum("/cal/" in u for u in f) == 4
    assert not f.bound_hit
    assert f.refused["too many query strings on one path"] == 97


def test_tracked_pages_keep_their_room_of_the_bound():
    """New links found first never crowd out a tracked page found later; the whole stays
    within max_pages, and the tracked pages past it (a lowered bound) are refused too."""
    tracked = {f"https://h/docs/t{i}" for i in range(3)}
    f = Frontier(rules(max_pages=5), ["https://h/docs/t0"], tracked=tracked)
    assert f.offer("https://h/docs/new1") and f.offer("https://h/docs/new2")  # 5 - 3 tracked: room for 2 new
    assert not f.offer("https://h/docs/new3") and f.bound_hit
    assert f.offer("https://h/docs/t1") and f.offer("https://h/docs/t2") and len(f) == 5
    lowered = Frontier(rules(max_pages=2), tracked=tracked)
    assert [lowered.offer(u) for u in sorted(tracked)] == [True, True, False] and len(lowered) == 2


@given(
    st.lists(st.sampled_from([f"https://h/docs/{c}" for c in "abcdefghij"]), max_size=40),
    st.sets(st.sampled_from([f"https://h/docs/{c}" for c in "abcdefghij"]), max_size=6),
    st.integers(1, 8),
)
def test_a_tracked_page_offered_is_admitted_while_the_tracked_fit(offers, tracked, max_pages):
    f = Frontier(rules(max_pages=max_pages), tracked=tracked)
    for url in offers:
        f.offer(url)
    assert len(f) <= max_pages and sum(u not in tracked for u in f) <= max(0, max_pages - len(tracked))
    if len(tracked) <= max_pages:
        assert set(offers) & tracked <= set(f)


def test_a_cap_cuts_the_series_of_the_refused_url():
    f = Frontier(rules(max_query_variants=2, max_pattern_variants=2))
    for n in range(1, 4):
        f.offer(f"https://h/docs/list.html?page={n}")
        f.offer(f"https://h/docs/cal/{n}.html")
    assert f.cut_series("https://h/docs/list.html?page=2") and f.cut_series("https://h/docs/list.html")
    assert f.cut_series("https://h/docs/cal/2.html") and f.cut_series("https://h/docs/cal/17.html")
    assert not f.cut_series("https://h/docs/index.html") and not f.cut_series("https://h/docs/other.html?page=1")


def test_frontier_is_breadth_first_once_each_and_marks_its_bound():
    f = Frontier(rules(max_pages=3), ["https://h/docs/a", "https://h/docs/a"])
    assert f.take_level() == ["https://h/docs/a"]
    assert f.offer("https://h/docs/b") and f.offer("https://h/docs/c")
    assert not f.offer("https://h/docs/b")
    assert not f.bound_hit
    assert not f.offer("https://h/docs/d")
    assert f.bound_hit and len(f) == 3
    assert f.take_level() == ["https://h/docs/b", "https://h/docs/c"] and f.take_level() == []


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.text(alphabet="ab1/?=.&", min_size=0, max_size=30), max_size=300),
    st.integers(1, 40),
    st.integers(1, 5),
    st.integers(1, 5),
)
def test_frontier_bounds_hold_for_any_links(paths, max_pages, max_queries, max_pattern):
    f = Frontier(rules(max_pages=max_pages, max_query_variants=max_queries, max_pattern_variants=max_pattern))
    for p in paths:
        f.offer("https://h/docs/" + p)
    assert len(f) <= max_pages and len(f.queue) <= max_pages
    assert len(set(f)) == len(f)
    per_path: dict[str, int] = {}
    for u in f:
        base, _, q = u.partition("?")
        if q:
            per_path[base] = per_path.get(base, 0) + 1
    assert all(n <= max_queries for n in per_path.values())


def _letters(n: int) -> str:
    out = ""
    while True:
        n, r = divmod(n, 26)
        out += chr(97 + r)
        if not n:
            return out


def test_frontier_memory_is_bounded_by_max_pages_not_by_links():
    """40,000 links offered (a calendar trap, then distinct pages): what the frontier holds
    stays that of max_pages URLs."""
    f = Frontier(rules(max_pages=1000))
    tracemalloc.start()
    try:
        for n in range(20_000):
            f.offer(f"https://h/docs/cal/{n}/{n % 12}.html?d={n}")
        assert len(f) == CrawlLimits().max_pattern_variants and not f.bound_hit
        for n in range(20_000):
            f.offer(f"https://h/docs/{_letters(n)}.html")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(f) == 1000 and f.bound_hit
    assert peak < 1_000_000  # ~1000 URLs and their counters, not 40,000


@pytest.mark.parametrize(
    "given, start",
    [
        ("https://docs.example.com", "https://docs.example.com/"),
        ("HTTPS://Docs.Example.com:443", "https://docs.example.com/"),
        ("https://docs.example.com?lang=en", "https://docs.example.com/?lang=en"),
        ("https://docs.example.com/en/", "https://docs.example.com/en/"),
        ("https://docs.example.com/en/index.html", "https://docs.example.com/en/index.html"),
    ],
)
def test_a_start_page_is_inside_its_own_crawl(given, start):
    """A site's root given without its slash is fetched as the root: inside its prefix."""
    assert crawl_start(given) == start
    frontier = Frontier(CrawlRules(prefixes=[crawl_prefix(given)]), [crawl_start(given)])
    assert list(frontier) == [start] and not frontier.refused
