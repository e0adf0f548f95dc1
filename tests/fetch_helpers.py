"""The HTTP edge against httpx.MockTransport: a recording handler, a Fetcher run on it on a
simulated clock, and streamed answers (the fetcher tests of tests/edges and tests/core)."""

from __future__ import annotations

import httpx

from sync.edges.fetcher import Fetcher, FetchResult, make_client
from tests.helpers import run_virtual

HTML = b"<html><head><title>T</title></head><body><main><p>Hello there.</p></main></body></html>"
URL = "https://docs.example.com/page.html"


class Recorder:
    """A MockTransport handler: returns `respond(request)` and records every request."""

    def __init__(self, respond):
        self.respond = respond
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.respond(request)


def run_fetcher(handler, coro_fn, **fetcher_kw):
    """Build a client on a MockTransport, a Fetcher on it, and run `coro_fn(fetcher)` on a
    simulated clock (`run_virtual`): waits and timeouts take no wall time, and their
    lengths are exact whatever the load."""

    fetcher_kw.setdefault("respect_robots", False)  # robots.txt has tests of its own (tests/edges/test_fetcher.py)

    async def go():
        async with make_client(transport=httpx.MockTransport(handler), timeout=5) as client:
            return await coro_fn(Fetcher(client, **fetcher_kw))

    return run_virtual(go())


def fetch_page(handler, url=URL, validators=None, **kw) -> FetchResult:
    """`Fetcher.fetch_page(url, validators)` against `handler` (`run_fetcher`'s keywords in `kw`)."""
    return run_fetcher(handler, lambda f: f.fetch_page(url, validators), **kw)


class Streamed(httpx.AsyncByteStream):
    """A body served as a real stream. (httpx reads a plain `content=` body eagerly, which
    bypasses the wire-byte counter, unlike any real transport.)"""

    def __init__(self, body: bytes, chunk: int = 4096):
        self.body, self.chunk = body, chunk

    async def __aiter__(self):
        for i in range(0, len(self.body), self.chunk):
            yield self.body[i : i + self.chunk]


def html_response(status=200, body=HTML, headers=None, ctype="text/html; charset=utf-8"):
    """An answer with `body` streamed (`Streamed`) and a content type (HTML unless told)."""
    h = {"content-type": ctype}
    h.update(headers or {})
    return httpx.Response(status, stream=Streamed(body), headers=h)
