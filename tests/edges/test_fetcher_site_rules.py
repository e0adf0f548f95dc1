"""The Fetcher's share of the site rules: per-hop site headers, redirects to unwanted pages."""

from __future__ import annotations

import httpx

from sync.core.decision import Outcome
from tests.fetch_helpers import Recorder, fetch_page, html_response, run_fetcher

URL = "https://docs.example.com/page.html"


def site_headers(url: str) -> dict[str, str]:
    return {"Authorization": "Bearer a"} if url.startswith("https://docs.example.com/") else {}


def test_site_headers_are_asked_for_at_every_hop():
    def respond(r):
        if r.url.host == "cdn.example.com":
            return httpx.Response(301, headers={"location": "https://docs.example.com/final.html"})
        if r.url.path == "/page.html":
            return httpx.Response(302, headers={"location": "https://cdn.example.com/page.html"})
        return html_response()

    seen = Recorder(respond)
    res = fetch_page(seen, site_headers=site_headers)
    assert res.outcome is Outcome.OK
    assert [(r.url.host, r.headers.get("authorization")) for r in seen.requests] == [
        ("docs.example.com", "Bearer a"),
        ("cdn.example.com", None),
        ("docs.example.com", "Bearer a"),
    ]


def test_a_permanent_move_to_an_unwanted_page_is_answered_as_the_move():
    seen = Recorder(
        lambda r: (
            httpx.Response(301, headers={"location": "/genindex.html"})
            if r.url.path == "/page.html"
            else html_response()
        )
    )

    async def go(f):
        f.unwanted = lambda u: "excluded" if u.endswith("/genindex.html") else None
        return await f.fetch_page(URL)

    res = run_fetcher(seen, go)
    assert [r.url.path for r in seen.requests] == ["/page.html"]
    assert res.status == 301 and res.moved_permanently
    assert res.redirects == [(301, "https://docs.example.com/genindex.html")]


def test_a_temporary_redirect_to_an_unwanted_page_is_not_followed():
    seen = Recorder(
        lambda r: (
            httpx.Response(302, headers={"location": "/genindex.html"})
            if r.url.path == "/page.html"
            else html_response()
        )
    )

    async def go(f):
        f.unwanted = lambda u: "excluded by --exclude */genindex.html" if u.endswith("/genindex.html") else None
        return await f.fetch_page(URL)

    res = run_fetcher(seen, go)
    assert [r.url.path for r in seen.requests] == ["/page.html"]
    assert res.outcome is Outcome.ERROR and "not followed: excluded by --exclude" in res.error
