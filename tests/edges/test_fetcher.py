"""The HTTP edge against httpx.MockTransport: conditional GETs, classification, limits,
and the cache across passes (robots.txt answers, sitemap copies)."""

from __future__ import annotations

import asyncio
import gzip
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import httpx
import pytest

import sync.edges.fetcher as fetcher_mod
from sync.core.decision import Outcome
from sync.errors import FetchError
from sync.edges.fetcher import (
    parse_retry_after,
    DEFAULT_USER_AGENT,
    Fetcher,
    HostQueue,
    Validators,
    classify_status,
    conditional_headers,
    make_client,
)
from sync.edges.httpcache import ReadOnlyCache, RobotsAnswer, SitemapCopy
from tests.fetch_helpers import HTML, URL, Recorder, Streamed, fetch_page, html_response, run_fetcher
from tests.helpers import run_virtual


# -- conditional requests ------------------------------------------------------------------


def test_no_validators_sends_no_conditional_headers():
    rec = Recorder(lambda r: html_response())
    res = fetch_page(rec)
    assert res.outcome is Outcome.OK
    h = rec.requests[0].headers
    assert "if-none-match" not in h and "if-modified-since" not in h


def test_empty_validators_send_no_conditional_headers():
    rec = Recorder(lambda r: html_response())
    fetch_page(rec, validators=Validators())
    h = rec.requests[0].headers
    assert "if-none-match" not in h and "if-modified-since" not in h


def test_both_validators_sent_exactly_as_stored():
    rec = Recorder(lambda r: html_response())
    lm = "Wed, 21 Oct 2015 07:28:00 GMT"
    fetch_page(rec, validators=Validators(etag='"abc123"', last_modified=lm))
    h = rec.requests[0].headers
    assert h["if-none-match"] == '"abc123"'
    assert h["if-modified-since"] == lm


def test_weak_etag_passed_exactly():
    rec = Recorder(lambda r: html_response())
    fetch_page(rec, validators=Validators(etag='W/"5e1-1a2b"'))
    h = rec.requests[0].headers
    assert h["if-none-match"] == 'W/"5e1-1a2b"'
    assert "if-modified-since" not in h


def test_only_last_modified():
    rec = Recorder(lambda r: html_response())
    fetch_page(rec, validators=Validators(last_modified="Thu, 01 Jan 2026 00:00:00 GMT"))
    h = rec.requests[0].headers
    assert "if-none-match" not in h
    assert h["if-modified-since"] == "Thu, 01 Jan 2026 00:00:00 GMT"


@pytest.mark.parametrize(
    "v, expected",
    [
        (None, {}),
        (Validators(), {}),
        (Validators(etag='"e"'), {"If-None-Match": '"e"'}),
        (Validators(etag='W/"e"', last_modified="LM"), {"If-None-Match": 'W/"e"', "If-Modified-Since": "LM"}),
        (Validators(last_modified="LM"), {"If-Modified-Since": "LM"}),
    ],
)
def test_conditional_headers(v, expected):
    assert conditional_headers(v) == expected


def test_user_agent_is_sent():
    rec = Recorder(lambda r: html_response())
    fetch_page(rec)
    assert rec.requests[0].headers["user-agent"] == DEFAULT_USER_AGENT


def test_304_keeps_old_validators_when_it_carries_none():
    old = Validators(etag='W/"v1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    res = fetch_page(Recorder(lambda r: httpx.Response(304)), validators=old)
    assert res.outcome is Outcome.NOT_MODIFIED
    assert res.status == 304
    assert res.validators == old
    assert res.body == b""
    assert res.error is None


def test_304_takes_a_new_etag_and_keeps_old_last_modified():
    old = Validators(etag='"v1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    res = fetch_page(Recorder(lambda r: httpx.Response(304, headers={"etag": '"v2"'})), validators=old)
    assert res.validators == Validators('"v2"', "Mon, 01 Jan 2024 00:00:00 GMT")


def test_304_takes_new_last_modified_and_keeps_old_etag():
    old = Validators(etag='"v1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    new_lm = "Tue, 02 Jan 2024 00:00:00 GMT"
    res = fetch_page(Recorder(lambda r: httpx.Response(304, headers={"last-modified": new_lm})), validators=old)
    assert res.validators == Validators('"v1"', new_lm)


def test_304_without_previous_validators():
    res = fetch_page(Recorder(lambda r: httpx.Response(304, headers={"etag": '"x"'})))
    assert res.outcome is Outcome.NOT_MODIFIED
    assert res.validators == Validators('"x"', None)


def test_200_replaces_validators_with_what_it_carries():
    old = Validators(etag='"v1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    res = fetch_page(Recorder(lambda r: html_response(headers={"etag": 'W/"v2"'})), validators=old)
    assert res.outcome is Outcome.OK
    assert res.validators == Validators('W/"v2"', None)
    res = fetch_page(Recorder(lambda r: html_response()), validators=old)
    assert res.validators == Validators(None, None)


# -- status classification -----------------------------------------------------------------


@pytest.mark.parametrize(
    "status, outcome",
    [
        (200, Outcome.OK),
        (203, Outcome.OK),
        (304, Outcome.NOT_MODIFIED),
        (404, Outcome.GONE),
        (410, Outcome.GONE),
        (400, Outcome.ERROR),
        (401, Outcome.ERROR),
        (403, Outcome.ERROR),
        (429, Outcome.ERROR),
        (500, Outcome.ERROR),
        (502, Outcome.ERROR),
        (503, Outcome.ERROR),
    ],
)
def test_classify_status(status, outcome):
    assert classify_status(status) is outcome


@pytest.mark.parametrize(
    "status, outcome, error",
    [
        (200, Outcome.OK, None),
        (304, Outcome.NOT_MODIFIED, None),
        (404, Outcome.GONE, None),
        (410, Outcome.GONE, None),
        (500, Outcome.ERROR, "HTTP 500"),
        (429, Outcome.ERROR, "HTTP 429"),
        (403, Outcome.ERROR, "HTTP 403"),
    ],
)
def test_fetch_page_classifies_answers(status, outcome, error):
    body = b"" if status == 304 else HTML
    res = fetch_page(Recorder(lambda r: html_response(status, body=body)))
    assert res.outcome is outcome
    assert res.status == status
    assert res.answered
    assert res.error == error
    assert res.url == URL
    # only a usable 200 carries a body forward
    assert res.body == (HTML if outcome is Outcome.OK else b"")


# -- network trouble never raises -----------------------------------------------------------


def _raiser(exc_type, msg="boom"):
    def handler(request):
        raise exc_type(msg, request=request)

    return handler


@pytest.mark.parametrize("exc_type", [httpx.ReadTimeout, httpx.ConnectTimeout, httpx.WriteTimeout, httpx.PoolTimeout])
def test_timeouts_become_error(exc_type):
    res = fetch_page(_raiser(exc_type, "timed out"))
    assert res.outcome is Outcome.ERROR
    assert res.error == "timeout"
    assert res.status is None and not res.answered
    assert res.body == b""


def test_a_trickling_answer_times_out_as_a_whole():
    """Every read arrives well within the client's read timeout, but the body as a whole
    does not arrive within `--timeout`: the page is a timeout, not a 20-second wait."""

    class Trickle(httpx.AsyncByteStream):
        async def __aiter__(self):
            for _ in range(100):
                await asyncio.sleep(0.2)
                yield b"x"

    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/html"}, stream=Trickle())

    async def go():
        async with make_client(transport=httpx.MockTransport(handler), timeout=1) as client:
            t = asyncio.get_running_loop().time()
            res = await Fetcher(client, respect_robots=False).fetch_page(URL)
            return res, asyncio.get_running_loop().time() - t

    res, elapsed = run_virtual(go())
    assert res.outcome is Outcome.ERROR and res.error == "timeout"
    assert elapsed < 3


class _Slow(httpx.AsyncByteStream):
    """A body that arrives `seconds` after its headers."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    async def __aiter__(self):
        await asyncio.sleep(self.seconds)
        yield b"<html><body><p>late</p></body></html>"


def _slow_site(delays: dict[str, float]):
    """A MockTransport handler: each URL's body comes `delays[path]` seconds late."""

    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/html"}, stream=_Slow(delays[request.url.path]))

    return handler


def test_each_request_has_its_own_deadline():
    """The deadlines share one timer (`sync.edges.deadlines.Deadlines`), but each request's runs from its own
    start: a request that outlives an earlier one's deadline is not cut there, a request
    started after a quick one is cut at its own deadline, and a slow one among quick ones
    is the only one cut."""
    handler = _slow_site({"/quick": 0.0, "/slow": 5.0, "/late": 0.6, "/hang": 5.0})

    async def go():
        async with make_client(transport=httpx.MockTransport(handler), timeout=5) as client:
            f = Fetcher(client, respect_robots=False, per_host=8, deadline=1.0)
            loop = asyncio.get_running_loop()

            async def timed(path: str, after: float):
                await asyncio.sleep(after)
                t = loop.time()
                res = await f.fetch_page(f"https://docs.example.com{path}")
                return res, loop.time() - t

            # /late starts at 0.5 s and ends at 1.1 s: past the deadline of /quick and /slow
            # (1 s), within its own (1.5 s). /hang starts at 1.2 s, after /slow was cut.
            return await asyncio.gather(timed("/quick", 0), timed("/slow", 0), timed("/late", 0.5), timed("/hang", 1.2))

    (quick, _), (slow, t_slow), (late, _), (hang, t_hang) = run_virtual(go())
    assert quick.outcome is Outcome.OK and late.outcome is Outcome.OK
    assert slow.error == "timeout" and hang.error == "timeout"
    assert 0.95 <= t_slow < 2 and 0.95 <= t_hang < 2


def test_a_request_cancelled_from_outside_stays_cancelled():
    """A pass interrupted mid-request (its task cancelled) is not a page timeout: the
    CancelledError goes on up, as it would through `asyncio.timeout`."""
    handler = _slow_site({"/page.html": 5.0})

    async def go():
        async with make_client(transport=httpx.MockTransport(handler), timeout=5) as client:
            f = Fetcher(client, respect_robots=False, deadline=1.0)
            task = asyncio.ensure_future(f.fetch_page(URL))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The deadline of the cancelled request is gone with it: a next one is bounded afresh.
            t = asyncio.get_running_loop().time()
            res = await f.fetch_page(URL)
            return res, asyncio.get_running_loop().time() - t

    res, elapsed = run_virtual(go())
    assert res.error == "timeout" and 0.95 <= elapsed < 2


def test_deadlines_hold_in_a_second_event_loop():
    """A Fetcher used again under another event loop (a second asyncio.run) bounds its
    requests there too: the first loop's timer is not taken for a live one."""
    handler = _slow_site({"/quick": 0.0, "/slow": 5.0})

    async def go(client, f, path):
        t = asyncio.get_running_loop().time()
        res = await f.fetch_page(f"https://docs.example.com{path}")
        return res, asyncio.get_running_loop().time() - t

    client = make_client(transport=httpx.MockTransport(handler), timeout=5)
    f = Fetcher(client, respect_robots=False, deadline=0.5)
    first, _ = run_virtual(go(client, f, "/quick"))  # leaves a timer in the first loop
    second, elapsed = run_virtual(go(client, f, "/slow"))
    assert first.outcome is Outcome.OK
    assert second.error == "timeout" and elapsed < 1.5


@pytest.mark.parametrize("exc_type", [httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError])
def test_transport_errors_become_error(exc_type):
    res = fetch_page(_raiser(exc_type, "connection refused"))
    assert res.outcome is Outcome.ERROR
    assert exc_type.__name__ in res.error
    assert res.status is None


def test_redirect_loop_becomes_error():
    res = fetch_page(lambda r: httpx.Response(301, headers={"location": str(r.url) + "x"}))
    assert res.outcome is Outcome.ERROR
    assert "redirect" in res.error


def test_redirect_followed_and_final_url_recorded():
    def handler(request):
        if request.url.path == "/old":
            return httpx.Response(301, headers={"location": "https://docs.example.com/new"})
        return html_response()

    res = fetch_page(handler, url="https://docs.example.com/old")
    assert res.outcome is Outcome.OK
    assert res.final_url == "https://docs.example.com/new"
    assert res.url == "https://docs.example.com/old"


def test_undecodable_content_encoding_becomes_error():
    res = fetch_page(
        lambda r: httpx.Response(
            200, stream=Streamed(b"not gzip at all"), headers={"content-type": "text/html", "content-encoding": "gzip"}
        )
    )
    assert res.outcome is Outcome.ERROR
    assert res.error


@pytest.mark.parametrize("bad_url", ["http://[::1/page", "https://docs.example.com/" + "a" * 70_000])
def test_malformed_url_never_raises(bad_url):
    # "a page visit always returns a FetchResult": a malformed URL is an ERROR, not an exception.
    res = fetch_page(Recorder(lambda r: html_response()), url=bad_url)
    assert res.outcome is Outcome.ERROR
    assert res.error


# -- content type and size -------------------------------------------------------------------


@pytest.mark.parametrize("ctype", ["application/pdf", "image/png", "application/octet-stream", "application/json"])
def test_non_text_content_type_is_skipped_with_reason(ctype):
    res = fetch_page(Recorder(lambda r: html_response(ctype=ctype, body=b"%PDF-1.7 ...")))
    assert res.outcome is Outcome.SKIPPED
    assert ctype in res.error
    assert res.status == 200


@pytest.mark.parametrize(
    "ctype",
    [
        "text/html",
        "text/html; charset=utf-8",
        "TEXT/HTML; Charset=UTF-8",
        "application/xhtml+xml",
        "text/markdown",
        "text/x-markdown; charset=utf-8",
        "text/plain",
    ],
)
def test_text_content_types_are_ok(ctype):
    res = fetch_page(Recorder(lambda r: html_response(ctype=ctype)))
    assert res.outcome is Outcome.OK
    assert res.content_type == ctype.split(";")[0].strip().lower()
    assert res.charset == ("utf-8" if "charset" in ctype.lower() else None)  # for the extractor


def test_body_over_max_bytes_is_skipped():
    res = fetch_page(Recorder(lambda r: html_response(body=b"x" * 101)), max_bytes=100)
    assert res.outcome is Outcome.SKIPPED
    assert "100" in res.error
    assert res.body == b""


def test_body_at_max_bytes_is_ok():
    res = fetch_page(Recorder(lambda r: html_response(body=b"x" * 100)), max_bytes=100)
    assert res.outcome is Outcome.OK
    assert res.body == b"x" * 100


def test_cap_applies_to_decoded_size_of_compressed_body():
    raw = b"<p>" + b"a" * 50_000 + b"</p>"
    gz = gzip.compress(raw)
    assert len(gz) < 1000
    res = fetch_page(
        lambda r: httpx.Response(
            200, stream=Streamed(gz, 256), headers={"content-type": "text/html", "content-encoding": "gzip"}
        ),
        max_bytes=10_000,
    )
    assert res.outcome is Outcome.SKIPPED


def test_streamed_body_over_max_bytes_is_skipped():
    res = fetch_page(
        lambda r: httpx.Response(200, stream=Streamed(b"y" * 50_000, 1000), headers={"content-type": "text/html"}),
        max_bytes=10_000,
    )
    assert res.outcome is Outcome.SKIPPED


# -- bytes downloaded ------------------------------------------------------------------------------


def test_bytes_downloaded_counts_the_body():
    res = fetch_page(Recorder(lambda r: html_response(body=HTML)))
    assert res.bytes_downloaded == len(HTML)


def test_bytes_downloaded_counts_wire_bytes_of_compressed_body():
    raw = b"<html><body><main>" + b"<p>repeat me</p>" * 500 + b"</main></body></html>"
    gz = gzip.compress(raw)
    res = fetch_page(
        lambda r: httpx.Response(
            200, stream=Streamed(gz, 64), headers={"content-type": "text/html", "content-encoding": "gzip"}
        )
    )
    assert res.outcome is Outcome.OK
    assert res.body == raw
    assert res.bytes_downloaded == len(gz)


def test_bytes_downloaded_zero_for_304():
    res = fetch_page(Recorder(lambda r: httpx.Response(304)), validators=Validators(etag='"a"'))
    assert res.bytes_downloaded == 0


# -- fetch_bytes (sitemaps) -----------------------------------------------------------------------


def test_fetch_bytes_returns_body_and_wire_size():
    raw = b"<urlset>" + b"<url><loc>https://e.com/a</loc></url>" * 100 + b"</urlset>"
    gz = gzip.compress(raw)

    def handler(request):
        if request.url.path == "/plain.xml":
            return httpx.Response(200, stream=Streamed(raw), headers={"content-type": "application/xml"})
        return httpx.Response(
            200, stream=Streamed(gz), headers={"content-type": "application/xml", "content-encoding": "gzip"}
        )

    async def both(f):
        return await f.fetch_bytes("https://e.com/plain.xml"), await f.fetch_bytes("https://e.com/enc.xml")

    (b1, w1), (b2, w2) = run_fetcher(handler, both)
    assert b1 == raw and w1 == len(raw)
    assert b2 == raw and w2 == len(gz)


def test_fetch_bytes_sends_no_conditional_headers_and_accepts_any_content_type():
    rec = Recorder(lambda r: httpx.Response(200, content=b"\x1f\x8bxyz", headers={"content-type": "application/gzip"}))
    body, _ = run_fetcher(rec, lambda f: f.fetch_bytes("https://e.com/sitemap.xml.gz"))
    assert body == b"\x1f\x8bxyz"
    assert "if-none-match" not in rec.requests[0].headers


@pytest.mark.parametrize("status", [304, 404, 410, 403, 429, 500, 503])
def test_fetch_bytes_raises_fetch_error_on_non_2xx(status):
    with pytest.raises(FetchError, match=str(status)):
        run_fetcher(
            Recorder(lambda r: httpx.Response(status, content=b"x")), lambda f: f.fetch_bytes("https://e.com/s.xml")
        )


@pytest.mark.parametrize("exc_type", [httpx.ConnectError, httpx.ReadTimeout])
def test_fetch_bytes_maps_transport_errors_to_fetch_error(exc_type):
    with pytest.raises(FetchError):
        run_fetcher(_raiser(exc_type), lambda f: f.fetch_bytes("https://e.com/s.xml"))


def test_fetch_bytes_over_cap_raises_fetch_error(monkeypatch):
    monkeypatch.setattr(fetcher_mod, "MAX_SITEMAP_BYTES", 1000)
    with pytest.raises(FetchError):
        run_fetcher(
            Recorder(lambda r: httpx.Response(200, stream=Streamed(b"z" * 1001, 100))),
            lambda f: f.fetch_bytes("https://e.com/s.xml"),
        )


@pytest.mark.parametrize("bad_url", ["http://[::1/sitemap.xml", "https://e.com/" + "a" * 70_000])
def test_fetch_bytes_malformed_url_raises_fetch_error(bad_url):
    with pytest.raises(FetchError):
        run_fetcher(Recorder(lambda r: httpx.Response(200, content=b"<urlset/>")), lambda f: f.fetch_bytes(bad_url))


# -- per-host concurrency ---------------------------------------------------------------------------


class ConcurrencyProbe:
    def __init__(self, hold: float = 0.02):
        self.hold = hold
        self.active: dict[str, int] = defaultdict(int)
        self.peak: dict[str, int] = defaultdict(int)
        self.total_active = 0
        self.total_peak = 0
        self.count = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        self.active[host] += 1
        self.total_active += 1
        self.peak[host] = max(self.peak[host], self.active[host])
        self.total_peak = max(self.total_peak, self.total_active)
        try:
            await asyncio.sleep(self.hold)
        finally:
            self.active[host] -= 1
            self.total_active -= 1
        self.count += 1
        return html_response()


@pytest.mark.parametrize("per_host", [1, 3])
def test_per_host_concurrency_bound(per_host):
    probe = ConcurrencyProbe()

    async def many(f):
        return await asyncio.gather(*(f.fetch_page(f"https://a.example.com/p{i}") for i in range(10)))

    results = run_fetcher(probe, many, per_host=per_host)
    assert all(r.outcome is Outcome.OK for r in results)
    assert probe.count == 10
    assert probe.peak["a.example.com"] == per_host  # bounded, and the bound is actually used


def test_hosts_are_bounded_independently():
    probe = ConcurrencyProbe()

    async def many(f):
        urls = [f"https://{h}.example.com/p{i}" for i in range(6) for h in ("a", "b")]
        return await asyncio.gather(*(f.fetch_page(u) for u in urls))

    run_fetcher(probe, many, per_host=2)
    assert probe.peak["a.example.com"] == 2
    assert probe.peak["b.example.com"] == 2
    assert probe.total_peak == 4


def test_fetch_bytes_shares_the_per_host_bound():
    probe = ConcurrencyProbe()

    async def mixed(f):
        return await asyncio.gather(
            *(f.fetch_page(f"https://a.example.com/p{i}") for i in range(4)),
            *(f.fetch_bytes(f"https://a.example.com/s{i}.xml") for i in range(4)),
        )

    run_fetcher(probe, mixed, per_host=2)
    assert probe.peak["a.example.com"] == 2


# -- redirects, robots.txt, Retry-After, scope ---------------------------------------------------


def _redirecting(codes):
    """/r0 -> /r1 -> ... with the given status codes, then a page."""

    def handler(request):
        path = request.url.path
        if path.startswith("/r") and int(path[2:]) < len(codes):
            i = int(path[2:])
            return httpx.Response(codes[i], headers={"location": f"/r{i + 1}"})
        return html_response()

    return handler


@pytest.mark.parametrize(
    "codes,permanent",
    [([301], True), ([308], True), ([301, 308], True), ([302], False), ([307], False), ([301, 302], False)],
)
def test_permanent_only_when_every_hop_is_301_or_308(codes, permanent):
    res = fetch_page(_redirecting(codes), url="https://docs.example.com/r0")
    assert res.outcome is Outcome.OK
    assert res.moved_permanently is permanent
    assert [s for s, _ in res.redirects] == codes
    assert res.redirects[-1][1] == f"https://docs.example.com/r{len(codes)}"


def test_chain_of_five_followed_six_is_an_error():
    assert fetch_page(_redirecting([301] * 5), url="https://docs.example.com/r0").outcome is Outcome.OK
    res = fetch_page(_redirecting([301] * 6), url="https://docs.example.com/r0")
    assert res.outcome is Outcome.ERROR and "too many redirects" in res.error


def test_redirect_out_of_scope_is_not_followed():
    seen = Recorder(lambda r: httpx.Response(301, headers={"location": "http://169.254.169.254/latest/meta-data"}))
    res = fetch_page(seen, scope=lambda u: None if "docs.example.com" in u else "not ours")
    assert res.outcome is Outcome.ERROR and "not followed" in res.error
    assert [r.url.host for r in seen.requests] == ["docs.example.com"]


def test_out_of_scope_page_is_skipped_without_a_request():
    seen = Recorder(lambda r: html_response())
    res = fetch_page(seen, scope=lambda u: "not ours")
    assert res.outcome is Outcome.SKIPPED and seen.requests == []


def _robots_site(robots_status, robots_body=b""):
    def handler(request):
        if request.url.path == "/robots.txt":
            return httpx.Response(robots_status, content=robots_body)
        return html_response()

    return Recorder(handler)


@pytest.mark.parametrize(
    "status,body,path,allowed",
    [
        (200, b"User-agent: *\nDisallow: /private\n", "/private/x.html", False),
        (200, b"User-agent: *\nDisallow: /private\n", "/public.html", True),
        (200, b"User-agent: pagesync\nDisallow: /\n", "/public.html", False),
        (404, b"", "/anything.html", True),
        (403, b"", "/anything.html", True),
        (500, b"", "/anything.html", False),
        (503, b"", "/anything.html", False),
    ],
)
def test_robots_rules(status, body, path, allowed):
    site = _robots_site(status, body)
    res = fetch_page(site, url="https://docs.example.com" + path, respect_robots=True)
    assert (res.outcome is Outcome.OK) is allowed
    if not allowed:
        # A Disallow skips the page; an unreadable robots.txt (5xx) fails it: both keep its points.
        assert res.outcome is (Outcome.ERROR if status >= 500 else Outcome.SKIPPED) and "robots.txt" in res.error
        assert [r.url.path for r in site.requests] == ["/robots.txt"]


def test_a_robots_txt_skip_names_the_file_once():
    site = _robots_site(200, b"User-agent: *\nDisallow: /private\n")
    res = fetch_page(site, url="https://docs.example.com/private/x.html", respect_robots=True)
    assert (res.outcome, res.error) == (Outcome.SKIPPED, "disallowed by robots.txt")


def test_robots_read_once_per_host():
    site = _robots_site(200, b"User-agent: *\nAllow: /\n")

    async def many(f):
        return await asyncio.gather(*(f.fetch_page(f"https://docs.example.com/p{i}.html") for i in range(5)))

    run_fetcher(site, many, respect_robots=True)
    assert [r.url.path for r in site.requests].count("/robots.txt") == 1


def test_crawl_delay_spaces_requests_with_a_cap():
    site = _robots_site(200, b"User-agent: *\nCrawl-delay: 100\n")

    async def three(f):
        loop = asyncio.get_running_loop()
        t = loop.time()
        await asyncio.gather(*(f.fetch_page(f"https://docs.example.com/p{i}.html") for i in range(3)))
        return loop.time() - t

    elapsed = run_fetcher(site, three, respect_robots=True, max_crawl_delay=0.2)
    assert 0.35 <= elapsed < 5  # two gaps of the capped 0.2 s, not 100 s


@pytest.mark.parametrize(
    "value,expected", [("120", 120.0), ("0", 0.0), ("soon", None), (None, None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)]
)
def test_parse_retry_after(value, expected):
    assert parse_retry_after(value) == expected


def test_retry_after_backs_the_host_off():
    def handler(request):
        return httpx.Response(429, headers={"retry-after": "3600"})

    site = Recorder(handler)

    async def two(f):
        first = await f.fetch_page("https://docs.example.com/a.html")
        second = await f.fetch_page("https://docs.example.com/b.html")
        return first, second

    first, second = run_fetcher(site, two)
    assert first.outcome is Outcome.ERROR and first.retry_after == 3600
    assert second.outcome is Outcome.ERROR and "backing off" in second.error
    assert len(site.requests) == 1  # the second page was not requested


def test_retry_after_fails_fast_for_requests_already_waiting_on_the_host():
    """A page queued behind the per-host bound when the 429 arrives must not sleep out a long
    Retry-After (3600 s here): it fails as backing off, like a page that asks afterwards."""
    requests = []

    async def handler(request):
        requests.append(request)
        await asyncio.sleep(0.05)  # the others reach the per-host bound meanwhile
        if request.url.path == "/a.html":
            return httpx.Response(429, headers={"retry-after": "3600"})
        return httpx.Response(200, content=HTML, headers={"content-type": "text/html"})

    async def together(f):
        pages = (f.fetch_page(f"https://docs.example.com/{n}.html") for n in ("a", "b", "c"))
        return await asyncio.wait_for(asyncio.gather(*pages), 10)

    first, second, third = run_fetcher(handler, together, per_host=1)
    assert first.outcome is Outcome.ERROR and first.retry_after == 3600
    for r in (second, third):
        assert r.outcome is Outcome.ERROR and "backing off" in r.error and r.retry_after > 3500
    assert len(requests) == 1


@pytest.mark.parametrize(
    "robots,first,why",
    [
        (b"User-agent: *\nCrawl-delay: 100\nDisallow: /private\n", 200, "disallowed by robots.txt"),
        (b"", 429, "backing off"),
    ],
)
def test_host_queue_hands_out_at_once_what_needs_no_request(robots, first, why):
    """A page fetch_page answers without a request (disallowed, its host backing off for
    longer than we wait) is handed out at once, not after the host's Crawl-delay (100 s
    here) or its Retry-After (3600 s). The order given is kept."""

    def handler(request):
        if request.url.path == "/robots.txt":
            return httpx.Response(200, content=robots)
        if request.url.path == "/a.html":
            return httpx.Response(first, content=HTML, headers={"content-type": "text/html", "retry-after": "3600"})
        return html_response()

    urls = [f"https://docs.example.com/{p}" for p in ("a.html", "private/b.html", "private/c.html")]

    async def drain(f):
        queue, got = HostQueue(f, urls, url=lambda u: u), []
        while (url := await queue.get()) is not None:
            got.append((url, await f.fetch_page(url)))
        return got

    got = run_fetcher(handler, lambda f: asyncio.wait_for(drain(f), 10), respect_robots=True, max_crawl_delay=100)
    assert [u for u, _ in got] == urls
    assert all(why in r.error for _, r in got[1:])


# -- the cache across passes: robots.txt (24 h) and conditional sitemaps -------------------------

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
ORIGIN = "https://docs.example.com"
SITEMAP = "https://docs.example.com/sitemap.xml"
SITEMAP_BODY = (
    b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    b"<url><loc>https://docs.example.com/a.html</loc></url></urlset>"
)
LM = "Wed, 31 Dec 2025 10:00:00 GMT"


class DictCache:
    """An in-memory FetchCache (duck-typed: the Fetcher needs nothing more), counting writes."""

    def __init__(self):
        self.robots: dict[str, RobotsAnswer] = {}
        self.sitemaps: dict[str, SitemapCopy] = {}
        self.writes = 0

    def cached_robots(self, origin):
        return self.robots.get(origin)

    def cache_robots(self, origin, answer):
        self.writes += 1
        self.robots[origin] = answer

    def cached_sitemap(self, url):
        return self.sitemaps.get(url)

    def cache_sitemap(self, url, copy):
        self.writes += 1
        self.sitemaps[url] = copy

    def forget_sitemap(self, url):
        self.writes += 1
        self.sitemaps.pop(url, None)


def robots_paths(rec) -> int:
    return [r.url.path for r in rec.requests].count("/robots.txt")


def page_visit(rec, cache, now, path="/public.html"):
    return run_fetcher(rec, lambda f: f.fetch_page(ORIGIN + path), respect_robots=True, cache=cache, now=now)


def test_fresh_cached_robots_answer_is_used_without_a_request():
    cache = DictCache()
    cache.robots[ORIGIN] = RobotsAnswer(200, b"User-agent: *\nDisallow: /private\n", T0)
    site = _robots_site(200, b"User-agent: *\nAllow: /\n")  # what the server says now: not asked
    res = page_visit(site, cache, T0 + timedelta(hours=23, minutes=59), "/private/x.html")
    assert res.outcome is Outcome.SKIPPED and res.error == "disallowed by robots.txt (cached copy)"
    assert robots_paths(site) == 0 and site.requests == []
    assert page_visit(site, cache, T0 + timedelta(hours=1)).outcome is Outcome.OK
    assert robots_paths(site) == 0 and cache.writes == 0


@pytest.mark.parametrize("age", [timedelta(hours=24), timedelta(days=3), -timedelta(minutes=1)])
def test_stale_cached_robots_answer_is_fetched_again_and_replaced(age):
    cache = DictCache()
    cache.robots[ORIGIN] = RobotsAnswer(200, b"User-agent: *\nDisallow: /\n", T0)
    site = _robots_site(200, b"User-agent: *\nAllow: /\n")
    now = T0 + age
    assert page_visit(site, cache, now).outcome is Outcome.OK
    assert robots_paths(site) == 1
    assert cache.robots[ORIGIN] == RobotsAnswer(200, b"User-agent: *\nAllow: /\n", now)


def test_robots_404_is_cached_without_its_body():
    cache = DictCache()
    site = _robots_site(404, b"<html>not here</html>")
    assert page_visit(site, cache, T0).outcome is Outcome.OK
    assert cache.robots == {ORIGIN: RobotsAnswer(404, b"", T0)}
    assert page_visit(site, cache, T0 + timedelta(hours=2)).outcome is Outcome.OK
    assert robots_paths(site) == 1


@pytest.mark.parametrize("status", [500, 503, 429])
def test_robots_failure_is_reused_within_the_pass_but_not_cached(status):
    cache = DictCache()
    good = RobotsAnswer(200, b"User-agent: *\nAllow: /\n", T0 - timedelta(days=2))
    cache.robots[ORIGIN] = good  # stale: asked again, and the failure must not replace it
    site = _robots_site(status)

    async def two(f):
        return [await f.fetch_page(f"{ORIGIN}/p{i}.html") for i in range(2)]

    results = run_fetcher(site, two, respect_robots=True, cache=cache, now=T0)
    assert all(r.outcome is Outcome.ERROR for r in results)  # a failure, not a skip: exit 1, retried soon
    assert all(r.error == f"robots.txt answered {status}: host not crawled this pass" for r in results)
    assert robots_paths(site) == 1 and cache.robots[ORIGIN] == good and cache.writes == 0
    page_visit(site, cache, T0 + timedelta(minutes=5))  # the next pass asks again
    assert robots_paths(site) == 2


def test_robots_network_error_is_not_cached():
    cache = DictCache()
    res = page_visit(_raiser(httpx.ConnectError), cache, T0)
    assert (
        res.outcome is Outcome.ERROR
        and res.error == "robots.txt got no answer (ConnectError): host not crawled this pass"
    )
    assert cache.robots == {}


def test_robots_cache_key_is_the_origin():
    cache = DictCache()
    site = _robots_site(200, b"User-agent: *\nAllow: /\n")
    run_fetcher(
        site, lambda f: f.fetch_page("https://Docs.Example.com:8443/a.html"), respect_robots=True, cache=cache, now=T0
    )
    assert list(cache.robots) == ["https://docs.example.com:8443"]


def test_fetcher_without_cache_asks_every_pass():
    site = _robots_site(200, b"User-agent: *\nAllow: /\n")
    page_visit(site, None, T0)
    page_visit(site, None, T0 + timedelta(minutes=1))
    assert robots_paths(site) == 2


def sitemap_server(etag='"v1"', last_modified=LM, body=SITEMAP_BODY, headers=None):
    """A sitemap host that answers 304 when If-None-Match matches its ETag."""

    def handler(request):
        if etag and request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers=headers or {})
        h = {"content-type": "application/xml"}
        if etag:
            h["etag"] = etag
        if last_modified:
            h["last-modified"] = last_modified
        return httpx.Response(200, stream=Streamed(body), headers=h)

    return Recorder(handler)


def get_sitemap(rec, cache, now=T0, url=SITEMAP):
    async def go(f):
        body, wire = await f.fetch_bytes(url)
        return body, wire, f.sitemaps_not_modified

    return run_fetcher(rec, go, cache=cache, now=now)


def test_sitemap_first_fetch_is_plain_and_its_copy_kept():
    cache, rec = DictCache(), sitemap_server()
    body, wire, not_modified = get_sitemap(rec, cache)
    assert body == SITEMAP_BODY and wire == len(SITEMAP_BODY) and not_modified == 0
    h = rec.requests[0].headers
    assert "if-none-match" not in h and "if-modified-since" not in h
    kept = cache.sitemaps[SITEMAP]
    assert (kept.etag, kept.last_modified, kept.fetched_at) == ('"v1"', LM, T0)
    assert kept.body() == SITEMAP_BODY and kept.packed != SITEMAP_BODY


def test_sitemap_conditional_get_and_304_returns_the_kept_body():
    cache = DictCache()
    cache.sitemaps[SITEMAP] = SitemapCopy.of(SITEMAP_BODY, 'W/"v1-gzip"', LM, T0)
    rec = sitemap_server(etag='W/"v1-gzip"')
    body, wire, not_modified = get_sitemap(rec, cache, T0 + timedelta(hours=1))
    h = rec.requests[0].headers
    assert h["if-none-match"] == 'W/"v1-gzip"' and h["if-modified-since"] == LM  # exactly as received
    assert body == SITEMAP_BODY and wire == 0 and not_modified == 1
    assert len(rec.requests) == 1 and cache.writes == 0


def test_sitemap_changed_answers_200_and_replaces_the_copy():
    cache = DictCache()
    cache.sitemaps[SITEMAP] = SitemapCopy.of(b"<urlset/>", '"v0"', None, T0)
    new = SITEMAP_BODY.replace(b"a.html", b"b.html")
    body, wire, not_modified = get_sitemap(sitemap_server(etag='"v2"', body=new), cache, T0 + timedelta(hours=1))
    assert body == new and wire == len(new) and not_modified == 0
    assert cache.sitemaps[SITEMAP].etag == '"v2"' and cache.sitemaps[SITEMAP].body() == new


def test_sitemap_304_with_unreadable_copy_falls_back_to_one_unconditional_get():
    cache = DictCache()
    cache.sitemaps[SITEMAP] = SitemapCopy('"v1"', LM, b"not zlib at all", T0)  # validators kept, body lost
    rec = sitemap_server()
    body, wire, not_modified = get_sitemap(rec, cache, T0 + timedelta(hours=1))
    assert body == SITEMAP_BODY and not_modified == 0 and wire == len(SITEMAP_BODY)
    assert len(rec.requests) == 2
    assert rec.requests[0].headers["if-none-match"] == '"v1"'
    assert "if-none-match" not in rec.requests[1].headers and "if-modified-since" not in rec.requests[1].headers
    assert cache.sitemaps[SITEMAP].body() == SITEMAP_BODY  # repaired


def test_sitemap_304_to_the_unconditional_retry_is_an_error_not_an_empty_sitemap():
    cache = DictCache()
    cache.sitemaps[SITEMAP] = SitemapCopy('"v1"', None, b"", T0)
    rec = Recorder(lambda r: httpx.Response(304))
    with pytest.raises(FetchError, match="304"):
        get_sitemap(rec, cache)
    assert len(rec.requests) == 2


def test_sitemap_304_refreshes_the_validators_it_carries():
    cache = DictCache()
    cache.sitemaps[SITEMAP] = SitemapCopy.of(SITEMAP_BODY, '"v1"', LM, T0)
    rec = sitemap_server(headers={"etag": '"v1b"'})
    body, _, not_modified = get_sitemap(rec, cache, T0 + timedelta(hours=1))
    kept = cache.sitemaps[SITEMAP]
    assert body == SITEMAP_BODY and not_modified == 1
    assert (kept.etag, kept.last_modified, kept.body()) == ('"v1b"', LM, SITEMAP_BODY)


def test_sitemap_without_validators_is_not_kept():
    cache = DictCache()
    cache.sitemaps[SITEMAP] = SitemapCopy.of(b"<urlset/>", '"old"', None, T0)
    rec = sitemap_server(etag=None, last_modified=None)
    body, _, _ = get_sitemap(rec, cache)
    assert body == SITEMAP_BODY and SITEMAP not in cache.sitemaps


def test_sitemap_only_last_modified_is_enough():
    cache = DictCache()
    cache.sitemaps[SITEMAP] = SitemapCopy.of(SITEMAP_BODY, None, LM, T0)

    def handler(request):
        if request.headers.get("if-modified-since") == LM:
            return httpx.Response(304)
        return httpx.Response(200, content=b"<urlset/>")

    rec = Recorder(handler)
    body, _, not_modified = get_sitemap(rec, cache)
    assert "if-none-match" not in rec.requests[0].headers
    assert body == SITEMAP_BODY and not_modified == 1


def test_sitemap_gzip_file_and_content_encoding_kept_as_the_caller_received_them():
    gz_file = gzip.compress(SITEMAP_BODY, mtime=0)  # a .xml.gz: the caller gunzips it itself

    def handler(request):
        if request.headers.get("if-none-match") == '"g"':
            return httpx.Response(304)
        if request.url.path.endswith(".gz"):
            return httpx.Response(200, stream=Streamed(gz_file), headers={"etag": '"g"'})
        return httpx.Response(
            200, stream=Streamed(gzip.compress(SITEMAP_BODY)), headers={"etag": '"g"', "content-encoding": "gzip"}
        )

    for url, expected in ((SITEMAP + ".gz", gz_file), (SITEMAP, SITEMAP_BODY)):
        cache = DictCache()
        first, _, _ = get_sitemap(Recorder(handler), cache, url=url)
        again, wire, not_modified = get_sitemap(Recorder(handler), cache, url=url)
        assert first == again == expected and wire == 0 and not_modified == 1


def test_sitemap_error_answers_keep_the_copy_and_raise():
    cache = DictCache()
    kept = SitemapCopy.of(SITEMAP_BODY, '"v1"', None, T0)
    cache.sitemaps[SITEMAP] = kept
    with pytest.raises(FetchError, match="503"):
        get_sitemap(Recorder(lambda r: httpx.Response(503)), cache)
    assert cache.sitemaps[SITEMAP] == kept


def test_read_only_cache_reads_and_keeps_nothing():
    inner = DictCache()
    inner.sitemaps[SITEMAP] = SitemapCopy.of(SITEMAP_BODY, '"v1"', None, T0)
    cache = ReadOnlyCache(inner)
    body, _, not_modified = get_sitemap(sitemap_server(headers={"etag": '"v1b"'}), cache)
    assert body == SITEMAP_BODY and not_modified == 1
    get_sitemap(sitemap_server(etag='"v2"'), cache)
    page_visit(_robots_site(200, b"User-agent: *\nAllow: /\n"), cache, T0)
    assert inner.writes == 0 and inner.robots == {} and inner.sitemaps[SITEMAP].etag == '"v1"'


def test_state_db_is_a_fetch_cache(tmp_path):
    from sync.edges.state import StateDB

    with StateDB(tmp_path / "state.db") as db:
        get_sitemap(sitemap_server(), db)
        page_visit(_robots_site(200, b"User-agent: *\nAllow: /\n"), db, T0)
    with StateDB(tmp_path / "state.db") as db:  # next pass, next process
        rec = sitemap_server()
        body, _, not_modified = get_sitemap(rec, db, T0 + timedelta(hours=1))
        site = _robots_site(200, b"User-agent: *\nDisallow: /\n")
        assert page_visit(site, db, T0 + timedelta(hours=1)).outcome is Outcome.OK
    assert body == SITEMAP_BODY and not_modified == 1 and robots_paths(site) == 0


class _Counted(httpx.AsyncByteStream):
    """A large body served in chunks, counting what was read and whether it was closed."""

    def __init__(self, size: int, chunk: int = 65536):
        self.size, self.chunk, self.read, self.closed = size, chunk, 0, False

    async def __aiter__(self):
        sent = 0
        while sent < self.size:
            n = min(self.chunk, self.size - sent)
            self.read += n
            sent += n
            yield b"x" * n

    async def aclose(self):
        self.closed = True


def test_content_length_over_max_bytes_is_skipped_without_reading_the_body():
    streams = []

    def handler(request):
        s = _Counted(12 * 1024 * 1024)
        streams.append(s)
        return httpx.Response(
            200, stream=s, headers={"content-type": "text/html", "content-length": str(12 * 1024 * 1024)}
        )

    res = fetch_page(handler)  # the default cap: 10 MB
    assert res.outcome is Outcome.SKIPPED and res.error == f"larger than {10 * 1024 * 1024} bytes"
    assert res.body == b"" and streams[0].read == 0 and streams[0].closed


def test_content_length_within_max_bytes_is_read():
    res = fetch_page(
        lambda r: httpx.Response(
            200, stream=Streamed(b"x" * 100), headers={"content-type": "text/html", "content-length": "100"}
        ),
        max_bytes=100,
    )
    assert res.outcome is Outcome.OK and res.body == b"x" * 100


def test_robots_txt_over_the_cap_by_content_length_is_still_read_up_to_the_cap():
    body = b"User-agent: *\nDisallow: /private\n" + b"#" * 600_000

    def handler(request):
        if request.url.path == "/robots.txt":
            return httpx.Response(
                200, stream=Streamed(body), headers={"content-type": "text/plain", "content-length": str(len(body))}
            )
        return html_response()

    assert (
        fetch_page(handler, url="https://docs.example.com/private/a.html", respect_robots=True).outcome
        is Outcome.SKIPPED
    )  # the rules at the top were read and applied
