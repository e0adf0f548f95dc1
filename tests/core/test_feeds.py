"""Change feeds: MkDocs, Sphinx and Docusaurus search indexes read as per-page digests."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.feeds import FeedError, changed_pages, feed_candidates, generator_feed_kind, match_urls, parse_feed


def mkdocs(pages: dict[str, str]) -> bytes:
    docs = []
    for loc, text in pages.items():
        docs.append({"location": loc, "title": loc or "Home", "text": text})
        docs.append({"location": f"{loc}#section", "title": "Section", "text": text[:5]})
    return json.dumps({"config": {"lang": ["en"]}, "docs": docs}).encode()


def test_mkdocs_one_digest_per_page_sections_folded_in():
    feed = parse_feed("mkdocs", mkdocs({"": "home", "guide/": "guide text"}))
    assert feed.exact and set(feed.digests) == {"", "guide/"}
    again = parse_feed("mkdocs", mkdocs({"": "home", "guide/": "guide text, edited"}))
    assert again.digests[""] == feed.digests[""] and again.digests["guide/"] != feed.digests["guide/"]


def test_sphinx_terms_and_titles_per_document():
    index = {
        "docnames": ["index", "api"],
        "filenames": ["index.rst", "api.rst"],
        "titles": ["Home", "API"],
        "terms": {"alpha": [0, 1], "beta": 1},
        "titleterms": {"api": 1},
    }
    feed = parse_feed("sphinx", b"Search.setIndex(" + json.dumps(index).encode() + b")")
    assert not feed.exact and set(feed.digests) == {"index", "api"}
    index["terms"]["gamma"] = 1
    again = parse_feed("sphinx", b"Search.setIndex(" + json.dumps(index).encode() + b")")
    assert again.digests["index"] == feed.digests["index"] and again.digests["api"] != feed.digests["api"]


def test_docusaurus_lunr_search_docs():
    body = {
        "searchDocs": [
            {"title": "Intro", "content": "hello", "url": "/docs/intro"},
            {"title": "Intro", "sectionTitle": "Part", "content": "more", "url": "/docs/intro#part"},
        ]
    }
    feed = parse_feed("docusaurus", json.dumps(body).encode())
    assert set(feed.digests) == {"docs/intro"}


@pytest.mark.parametrize(
    "kind, body",
    [
        ("mkdocs", b"<html>404</html>"),
        ("mkdocs", b"{}"),
        ("sphinx", b"var x = 1"),
        ("docusaurus", b"42"),
        ("nope", b"{}"),
    ],
)
def test_not_a_feed_is_a_feed_error(kind, body):
    with pytest.raises(FeedError):
        parse_feed(kind, body)


def test_locations_match_tracked_urls_with_or_without_suffixes():
    feed = parse_feed("mkdocs", mkdocs({"": "a", "guide/": "b", "api": "c", "gone/": "d"}))
    got = match_urls(feed, "https://h/docs/", ["https://h/docs/", "https://h/docs/guide/", "https://h/docs/api.html"])
    assert set(got) == {"https://h/docs/", "https://h/docs/guide/", "https://h/docs/api.html"}
    files = match_urls(feed, "https://h/docs/", ["https://h/docs/index.html", "https://h/docs/guide/index.html"])
    assert set(files) == {"https://h/docs/index.html", "https://h/docs/guide/index.html"}


def test_candidates_sit_next_to_the_sitemap():
    assert feed_candidates("https://h/docs/sitemap.xml")[0] == ("mkdocs", "https://h/docs/search/search_index.json")


@pytest.mark.parametrize(
    "html, kind",
    [
        ('<meta name="generator" content="mkdocs-1.6.1, mkdocs-material">', "mkdocs"),
        ("<meta name='generator' content='Docusaurus v3'>", "docusaurus"),
        ('<meta name="generator" content="Hugo">', None),
        ("<p>x</p>", None),
    ],
)
def test_generator_tag(html, kind):
    assert generator_feed_kind(html) == kind


@given(
    st.dictionaries(st.text(max_size=8), st.text(max_size=4)), st.dictionaries(st.text(max_size=8), st.text(max_size=4))
)
def test_changed_pages_are_those_recorded_with_another_digest(before, now):
    got = changed_pages(before, now)
    assert got == sorted(u for u in now if u in before and before[u] != now[u])


def test_feed_page_urls_are_an_exact_feeds_locations_under_the_root_and_none_of_sphinx():
    from sync.core.feeds import Feed, feed_page_urls

    mk = Feed("mkdocs", True, {"": "d0", "guide/": "d1", "api.html": "d2", "https://other.example/x/": "d3"})
    assert feed_page_urls(mk, "https://docs.example.com/en/") == [
        "https://docs.example.com/en/",
        "https://docs.example.com/en/guide/",
        "https://docs.example.com/en/api.html",
        "https://other.example/x/",
    ]
    assert feed_page_urls(Feed("sphinx", False, {"index": "d"}), "https://docs.example.com/") == []
    assert feed_page_urls(Feed("docusaurus", False, {"a": "d"}), "https://docs.example.com/") == []
