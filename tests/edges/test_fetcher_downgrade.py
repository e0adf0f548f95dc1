"""A redirect from https to http never carries the site's headers, whatever the site rules say."""

from __future__ import annotations

import httpx

from sync.core.decision import Outcome
from tests.fetch_helpers import Recorder, fetch_page, html_response

URL = "https://docs.example.com/page.html"


def always(url: str) -> dict[str, str]:
    return {"Authorization": "Bearer secret"}


def test_a_downgrade_redirect_carries_no_header_nor_do_the_hops_after_it():
    def respond(r):
        if r.url.path == "/page.html":
            return httpx.Response(301, headers={"location": "http://docs.example.com/plain.html"})
        if r.url.path == "/plain.html":
            return httpx.Response(302, headers={"location": "https://docs.example.com/final.html"})
        return html_response()

    seen = Recorder(respond)
    res = fetch_page(seen, site_headers=always)
    assert res.outcome is Outcome.OK
    assert [(r.url.scheme, r.headers.get("authorization")) for r in seen.requests] == [
        ("https", "Bearer secret"),
        ("http", None),
        ("https", "Bearer secret"),
    ]


def test_a_plain_http_page_of_a_plain_site_keeps_its_header():
    seen = Recorder(lambda r: html_response())
    fetch_page(seen, url="http://docs.example.com/page.html", site_headers=always)
    assert seen.requests[0].headers.get("authorization") == "Bearer secret"
