"""Content-Encoding decoded under the byte cap: bombs (zstd, gzip in gzip, deflate) stop at
the cap with bounded memory, for a page, a sitemap and robots.txt; ordinary compressed
answers decode exactly; only bounded codings are advertised."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import httpx
import pytest
import zstandard
from hypothesis import given, settings, strategies as st

import sync.edges.fetcher as fetcher_mod
from sync.core.decision import Outcome
from sync.errors import FetchError
from sync.core.inflate import ACCEPT_ENCODING, BoundedDecoder
from tests.fetch_helpers import Recorder, Streamed, fetch_page, run_fetcher

CAP = 1024 * 1024
INFLATED = 64 * CAP  # what each bomb inflates to


def _zeros_stream(n: int, compressobj) -> bytes:
    """`n` zero bytes compressed piecewise (never held inflated)."""
    block = bytes(CAP)
    out = [compressobj.compress(block) for _ in range(n // CAP)]
    return b"".join(out) + compressobj.flush()


def _zstd_bomb() -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(bytes(INFLATED))


def _gzip_bomb() -> bytes:
    return _zeros_stream(INFLATED, zlib.compressobj(9, zlib.DEFLATED, 31))


def _deflate_bomb() -> bytes:
    return _zeros_stream(INFLATED, zlib.compressobj(9))


BOMBS = {
    "zstd": lambda: (_zstd_bomb(), "zstd"),
    "gzip, gzip": lambda: (gzip.compress(_gzip_bomb(), 9), "gzip, gzip"),
    "deflate": lambda: (_deflate_bomb(), "deflate"),
}


def _answer(body: bytes, coding: str, ctype: str = "text/html") -> httpx.Response:
    return httpx.Response(200, stream=Streamed(body, 4096), headers={"content-type": ctype, "content-encoding": coding})


def _peak(fn):
    """(fn's result, the peak of Python allocations while it ran)."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_page_bomb_stops_at_the_cap_with_bounded_memory(name):
    body, coding = BOMBS[name]()
    assert len(body) < 200_000
    res, peak = _peak(lambda: fetch_page(lambda r: _answer(body, coding), max_bytes=CAP))
    assert res.outcome is Outcome.SKIPPED and res.error == f"larger than {CAP} bytes"
    assert peak < 8 * CAP, f"peak {peak} bytes for a {INFLATED}-byte bomb"


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_sitemap_bomb_is_a_fetch_error_with_bounded_memory(name, monkeypatch):
    monkeypatch.setattr(fetcher_mod, "MAX_SITEMAP_BYTES", CAP)
    body, coding = BOMBS[name]()

    def go():
        with pytest.raises(FetchError, match=f"larger than {CAP} bytes"):
            run_fetcher(
                lambda r: _answer(body, coding, "application/xml"), lambda f: f.fetch_bytes("https://e.com/s.xml")
            )

    _, peak = _peak(go)
    assert peak < 8 * CAP


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_robots_txt_bomb_is_read_to_its_limit_only(name, monkeypatch):
    monkeypatch.setattr(fetcher_mod, "MAX_ROBOTS_BYTES", CAP)
    body, coding = BOMBS[name]()

    def handler(request):
        if request.url.path == "/robots.txt":
            return _answer(body, coding, "text/plain")
        return httpx.Response(200, stream=Streamed(b"<p>hi</p>"), headers={"content-type": "text/html"})

    res, peak = _peak(lambda: fetch_page(handler, respect_robots=True))
    assert res.outcome is Outcome.OK  # zeros are no rules: everything allowed
    assert peak < 8 * CAP


def test_only_bounded_codings_are_advertised():
    rec = Recorder(lambda r: httpx.Response(200, stream=Streamed(b"<p>x</p>"), headers={"content-type": "text/html"}))
    fetch_page(rec)
    assert rec.requests[0].headers["accept-encoding"] == ACCEPT_ENCODING
    assert "br" not in ACCEPT_ENCODING and "zstd" in ACCEPT_ENCODING


def test_an_unrequested_coding_that_cannot_be_bounded_is_an_error():
    res = fetch_page(lambda r: _answer(b"\x0b\x02\x80hello\x03", "br"))
    assert res.outcome is Outcome.ERROR and "br" in res.error


def _encode(data: bytes, coding: str) -> bytes:
    if coding in ("gzip", "x-gzip"):
        return gzip.compress(data)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "raw-deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if coding == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    return data


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=3000),
    codings=st.lists(st.sampled_from(["gzip", "deflate", "raw-deflate", "zstd", "identity"]), max_size=3),
    chunk=st.integers(1, 700),
    cap=st.integers(0, 4000),
)
def test_decoding_is_exact_up_to_the_cap(data, codings, chunk, cap):
    body = data
    for c in codings:  # applied in the order listed
        body = _encode(body, c)
    header = ", ".join("deflate" if c == "raw-deflate" else c for c in codings)
    d = BoundedDecoder(header, cap)
    out = b"".join(p for i in range(0, len(body), chunk) for p in d.feed(body[i : i + chunk]))
    if len(data) <= cap and not d.full:
        assert out == data
    else:
        # Over the cap somewhere: what came out is a prefix of the page, never more than cap + 1.
        assert d.full and len(out) <= cap + 1 and data.startswith(out)


def test_every_gzip_member_and_zstd_frame_is_decoded():
    two_members = gzip.compress(b"abc") + gzip.compress(b"def")
    two_frames = zstandard.ZstdCompressor().compress(b"abc") + zstandard.ZstdCompressor().compress(b"def")
    for body, coding in ((two_members, "gzip"), (two_frames, "zstd")):
        d = BoundedDecoder(coding, 100)
        assert b"".join(d.feed(body)) == b"abcdef"


def test_a_gzipped_sitemap_file_bomb_is_a_sitemap_error_with_bounded_memory(monkeypatch):
    import sync.core.sitemaps as sitemaps_mod
    from sync.errors import SitemapError

    monkeypatch.setattr(sitemaps_mod, "MAX_SITEMAP_BYTES", CAP)
    body = _gzip_bomb()  # a sitemap.xml.gz: gzip bytes the parser inflates itself

    def go():
        with pytest.raises(SitemapError, match="exceeds"):
            sitemaps_mod.parse_sitemap(body)

    _, peak = _peak(go)
    assert peak < 8 * CAP


@pytest.mark.parametrize("cap", [0, 1, 99, 100, 101, 250, 1000])
@pytest.mark.parametrize("coding", ["identity", "gzip"])
def test_a_body_is_read_up_to_the_cap_exactly(cap, coding):
    import asyncio

    from sync.edges.hops import read_bounded as _read_bounded

    data = bytes(range(256)) * 2
    raw = gzip.compress(data) if coding == "gzip" else data

    async def go():
        resp = httpx.Response(200, stream=Streamed(raw, 37), headers={"content-encoding": coding})
        return await _read_bounded(resp, dict(resp.headers.items()), cap)

    body, truncated = asyncio.run(go())
    assert body == data[:cap] and truncated is (len(data) > cap)
