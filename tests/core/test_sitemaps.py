"""Sitemaps: parsing (urlset, index, gzip, hostile XML), diffing, trust in lastmod, collection."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from datetime import datetime, timezone
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sync.core.sitemaps as sitemaps_mod
from sync.errors import FetchError, SitemapError
from sync.core.sitemaps import (
    MAX_SITEMAP_URLS,
    ParsedSitemap,
    SitemapDiff,
    SitemapEntry,
    collect_sitemaps,
    diff_sitemap,
    feed_hosts,
    lastmod_advanced,
    lastmod_state,
    lastmod_to_record,
    lastmods_to_record,
    lastmod_trusted,
    pack_parsed,
    parse_key,
    parse_lastmod,
    parse_sitemap,
    unpack_parsed,
)

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(*items: tuple[str, str | None], ns: str | None = NS, decl: bool = True) -> bytes:
    body = ""
    for loc, lastmod in items:
        body += f"<url><loc>{loc}</loc>" + (f"<lastmod>{lastmod}</lastmod>" if lastmod is not None else "") + "</url>"
    xmlns = f' xmlns="{ns}"' if ns else ""
    head = '<?xml version="1.0" encoding="UTF-8"?>\n' if decl else ""
    return f"{head}<urlset{xmlns}>{body}</urlset>".encode()


def index(*locs: str, ns: str | None = NS) -> bytes:
    xmlns = f' xmlns="{ns}"' if ns else ""
    inner = "".join(f"<sitemap><loc>{u}</loc><lastmod>2024-01-01</lastmod></sitemap>" for u in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex{xmlns}>{inner}</sitemapindex>'.encode()


def urls(parsed) -> list[str]:
    return [e.url for e in parsed.entries]


# -- parse_sitemap ----------------------------------------------------------------------------


def test_parse_urlset_namespaced():
    p = parse_sitemap(urlset(("https://example.com/a", "2024-01-02T03:04:05+00:00"), ("https://example.com/b", None)))
    assert urls(p) == ["https://example.com/a", "https://example.com/b"]
    assert p.entries[0].lastmod == "2024-01-02T03:04:05+00:00"
    assert p.entries[1].lastmod is None
    assert p.sitemaps == []


def test_parse_urlset_without_namespace_or_declaration():
    p = parse_sitemap(urlset(("https://example.com/a", None), ("https://example.com/b", None), ns=None, decl=False))
    assert urls(p) == ["https://example.com/a", "https://example.com/b"]


def test_parse_urlset_with_prefixed_namespace_and_extensions():
    data = (
        f'<?xml version="1.0"?><sm:urlset xmlns:sm="{NS}" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        "<sm:url><sm:loc>https://example.com/a</sm:loc><image:image><image:loc>https://example.com/i.png</image:loc>"
        "</image:image><sm:lastmod>2024-05-06</sm:lastmod></sm:url>"
        "<!-- a comment --><?pi something?>"
        "<sm:url><sm:loc>https://example.com/b</sm:loc></sm:url></sm:urlset>"
    ).encode()
    p = parse_sitemap(data)
    assert urls(p) == ["https://example.com/a", "https://example.com/b"]
    assert p.entries[0].lastmod == "2024-05-06T00:00:00+00:00"


def test_parse_canonicalises_and_strips_locs():
    p = parse_sitemap(
        urlset(("  HTTPS://Example.COM:443/Docs/?q=1#top  ", None), ("\n\thttp://Example.com:80/x\n", None))
    )
    assert urls(p) == ["https://example.com/Docs/?q=1", "http://example.com/x"]


def test_parse_sitemap_index():
    p = parse_sitemap(index("https://example.com/s1.xml", " https://example.com/s2.xml.gz "))
    assert p.sitemaps == ["https://example.com/s1.xml", "https://example.com/s2.xml.gz"]
    assert p.entries == []


def test_parse_sitemap_index_without_namespace():
    p = parse_sitemap(index("https://example.com/s1.xml", ns=None))
    assert p.sitemaps == ["https://example.com/s1.xml"]


def test_parse_gzip_bytes():
    raw = urlset(("https://example.com/a", "2024-01-02"), ("https://example.com/b", None))
    assert parse_sitemap(gzip.compress(raw)) == parse_sitemap(raw)
    assert urls(parse_sitemap(gzip.compress(raw))) == ["https://example.com/a", "https://example.com/b"]


def test_parse_gzip_index():
    p = parse_sitemap(gzip.compress(index("https://example.com/s1.xml")))
    assert p.sitemaps == ["https://example.com/s1.xml"]


def test_duplicates_are_dropped_first_wins():
    p = parse_sitemap(
        urlset(
            ("https://example.com/a", "2024-01-01"),
            ("https://example.com/a", "2024-02-02"),
            ("HTTPS://EXAMPLE.com/a#frag", "2024-03-03"),
            ("https://example.com:443/a", None),
            ("https://example.com/A", None),  # path case matters: a different page
        )
    )
    assert urls(p) == ["https://example.com/a", "https://example.com/A"]
    assert p.entries[0].lastmod == "2024-01-01T00:00:00+00:00"


def test_non_http_and_empty_locs_are_skipped():
    p = parse_sitemap(
        urlset(
            ("ftp://example.com/file", None),
            ("mailto:someone@example.com", None),
            ("javascript:alert(1)", None),
            ("file:///etc/passwd", None),
            ("/relative/path", None),
            ("", None),
            ("   ", None),
            ("https://example.com/ok", None),
            ("HTTP://example.com/upper-scheme", None),
        )
    )
    assert urls(p) == ["https://example.com/ok", "http://example.com/upper-scheme"]
    # Each dropped entry is kept with its reason, for the run report (they
    # used to vanish uncounted); the same <loc> twice is one entry, as for valid URLs.
    assert p.invalid == [
        ("ftp://example.com/file", "invalid <loc>: scheme ftp, not http(s)"),
        ("mailto:someone@example.com", "invalid <loc>: scheme mailto, not http(s)"),
        ("javascript:alert(1)", "invalid <loc>: scheme javascript, not http(s)"),
        ("file:///etc/passwd", "invalid <loc>: scheme file, not http(s)"),
        ("/relative/path", "invalid <loc>: relative URL (a sitemap lists absolute URLs)"),
        ("", "invalid <loc>: empty"),
    ]


def test_malformed_and_repeated_invalid_locs_are_kept_once_each():
    p = parse_sitemap(urlset(("http://[::1/a", None), ("/rel", None), ("/rel", None), ("https://e.com/a", None)))
    assert urls(p) == ["https://e.com/a"]
    assert [loc for loc, _ in p.invalid] == ["http://[::1/a", "/rel"]
    assert p.invalid[0][1].startswith("invalid <loc>: malformed URL")


def test_url_without_loc_is_skipped():
    data = (
        f'<urlset xmlns="{NS}"><url><lastmod>2024-01-01</lastmod></url><url><loc>https://e.com/a</loc></url></urlset>'
    )
    p = parse_sitemap(data.encode())
    assert urls(p) == ["https://e.com/a"]
    assert p.invalid == [("", "invalid <loc>: empty")]


@pytest.mark.parametrize(
    "written, normalised",
    [
        ("2024-01-02", "2024-01-02T00:00:00+00:00"),  # date only
        ("2024-01-02T10:00:00Z", "2024-01-02T10:00:00+00:00"),
        ("2024-01-02T10:00:00+00:00", "2024-01-02T10:00:00+00:00"),
        ("2024-01-02T10:00:00+02:00", "2024-01-02T08:00:00+00:00"),
        ("2024-01-02T01:00:00+02:00", "2024-01-01T23:00:00+00:00"),  # crosses midnight
        ("2024-01-02T22:30:00-05:00", "2024-01-03T03:30:00+00:00"),
        ("2024-01-02T10:30+01:00", "2024-01-02T09:30:00+00:00"),  # W3C hh:mm TZD
        ("2024-01-02T10:30:00.5Z", "2024-01-02T10:30:00.500000+00:00"),
        ("  2024-01-02  ", "2024-01-02T00:00:00+00:00"),
    ],
)
def test_lastmod_normalisation(written, normalised):
    p = parse_sitemap(urlset(("https://example.com/a", written)))
    assert p.entries[0].lastmod == normalised


def test_equal_instants_normalise_equal():
    p = parse_sitemap(
        urlset(("https://e.com/a", "2024-01-02T12:00:00+02:00"), ("https://e.com/b", "2024-01-02T10:00:00Z"))
    )
    assert p.entries[0].lastmod == p.entries[1].lastmod


@pytest.mark.parametrize(
    "written, read",
    [
        # The HTTP date format, which some generators write, is read: such a site keeps its lastmod.
        ("Tue, 02 Jan 2024 10:00:00 GMT", "2024-01-02T10:00:00+00:00"),
        ("Tue, 02 Jan 2024 12:00:00 +0200", "2024-01-02T10:00:00+00:00"),
        # Anything else is no lastmod: a changed typo must not read as an advance (nor cost trust).
        ("garbage", None),
        ("2025-13-45", None),
        ("2024-02-30T10:00:00Z", None),
    ],
)
def test_non_w3c_lastmod(written, read):
    p = parse_sitemap(urlset(("https://e.com/a", written)))
    assert p.entries[0].lastmod == read


def test_a_changed_unreadable_lastmod_is_no_advance():
    before = {
        e.url: e.lastmod
        for e in parse_sitemap(urlset(("https://e.com/a", "junk"), ("https://e.com/b", "2024-01-01"))).entries
    }
    now = {
        e.url: e.lastmod
        for e in parse_sitemap(urlset(("https://e.com/a", "junk2"), ("https://e.com/b", "2024-01-01"))).entries
    }
    assert diff_sitemap(before, now).lastmod_changed == []


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        ("", None),
        ("not a date", None),
        ("2024-01-02", datetime(2024, 1, 2, tzinfo=timezone.utc)),
        ("2024-01-02T10:00:00Z", datetime(2024, 1, 2, 10, tzinfo=timezone.utc)),
        ("2024-01-02T12:00:00+02:00", datetime(2024, 1, 2, 10, tzinfo=timezone.utc)),
        # W3C Datetime (the protocol's lastmod format) also allows year-month and year.
        ("2024-03", datetime(2024, 3, 1, tzinfo=timezone.utc)),
        ("2024", datetime(2024, 1, 1, tzinfo=timezone.utc)),
    ],
)
def test_parse_lastmod(value, expected):
    got = parse_lastmod(value)
    assert got == expected
    if got is not None:
        assert got.utcoffset().total_seconds() == 0


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not xml at all",
        b"<urlset><url><loc>https://e.com/a</loc></url>",  # unclosed
        b"<html>oops</html",
        b"<?xml version='1.0'?><urlset><url></urlset>",
        gzip.compress(b"<urlset><url><loc>https://e.com/a</loc></url", mtime=0),  # same bytes in every worker
    ],
)
def test_broken_xml_raises_sitemap_error(data):
    with pytest.raises(SitemapError):
        parse_sitemap(data)


@pytest.mark.parametrize("root", [b"<html><body>hi</body></html>", b"<rss version='2.0'><channel/></rss>"])
def test_wrong_root_element_raises_sitemap_error(root):
    with pytest.raises(SitemapError):
        parse_sitemap(root)


def test_sitemap_error_is_a_fetch_error():
    assert issubclass(SitemapError, FetchError)


def test_bad_gzip_raises_sitemap_error():
    with pytest.raises(SitemapError):
        parse_sitemap(b"\x1f\x8b" + b"definitely not deflate data")


def test_truncated_gzip_raises_sitemap_error():
    gz = gzip.compress(urlset(*[(f"https://e.com/{i}", None) for i in range(200)]))
    with pytest.raises(SitemapError):
        parse_sitemap(gz[: len(gz) // 2])


def test_corrupt_deflate_stream_raises_sitemap_error():
    # Valid gzip header, corrupted compressed blocks: must surface as SitemapError, not zlib.error.
    gz = gzip.compress(urlset(("https://example.com/a", None)))
    corrupt = gz[:10] + bytes(b ^ 0x55 for b in gz[10:-8]) + gz[-8:]
    with pytest.raises(SitemapError):
        parse_sitemap(corrupt)


def test_malformed_loc_does_not_escape_as_a_non_sitemap_error():
    # One malformed <loc> (an unclosed IPv6 literal) must not break with a ValueError: it is
    # skipped (like non-http locs), or the file is reported unreadable with SitemapError.
    data = urlset(("http://[::1/broken", None), ("https://example.com/ok", None))
    try:
        p = parse_sitemap(data)
    except SitemapError:
        return
    assert "https://example.com/ok" in urls(p)


def test_external_entity_is_not_expanded(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET-XXE-42")
    data = (
        '<?xml version="1.0"?>\n'
        f'<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file://{secret}">]>'
        f'<urlset xmlns="{NS}"><url><loc>https://e.com/&xxe;</loc><lastmod>&xxe;</lastmod></url></urlset>'
    ).encode()
    try:
        p = parse_sitemap(data)
    except SitemapError:
        return  # refusing the document is also safe
    dump = repr(p)
    assert "TOPSECRET" not in dump
    for e in p.entries:
        assert "TOPSECRET" not in e.url and "TOPSECRET" not in (e.lastmod or "")


def test_internal_entity_bomb_is_not_expanded():
    ents = '<!ENTITY a "AAAAAAAAAA">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(6)
    )  # &g; would expand to 10**7 characters
    data = f'<?xml version="1.0"?><!DOCTYPE urlset [{ents}]><urlset><url><loc>https://e.com/&g;</loc></url></urlset>'
    try:
        p = parse_sitemap(data.encode())
    except SitemapError:
        return
    assert all(len(e.url) < 1000 for e in p.entries)
    assert all("AAAA" not in e.url for e in p.entries)


def test_url_count_is_capped():
    n = MAX_SITEMAP_URLS + 25
    body = "".join(f"<url><loc>https://e.com/p{i}</loc></url>" for i in range(n))
    p = parse_sitemap(f'<urlset xmlns="{NS}">{body}</urlset>'.encode())
    assert len(p.entries) == MAX_SITEMAP_URLS and p.truncated
    assert p.entries[0].url == "https://e.com/p0"
    assert p.entries[-1].url == f"https://e.com/p{MAX_SITEMAP_URLS - 1}"
    assert unpack_parsed(pack_parsed(p)) == p  # a kept parse remembers the cut
    exact = "".join(f"<url><loc>https://e.com/p{i}</loc></url>" for i in range(MAX_SITEMAP_URLS))
    assert not parse_sitemap(f'<urlset xmlns="{NS}">{exact}</urlset>'.encode()).truncated


def test_a_sitemap_over_the_url_limit_is_an_error_so_nothing_is_removed():
    """URLs past the cut are unknown: reading them as removed would purge live pages."""
    n = MAX_SITEMAP_URLS + 2
    body = "".join(f"<url><loc>https://e.com/p{i}</loc></url>" for i in range(n)).encode()
    big = f'<urlset xmlns="{NS}">'.encode() + body + b"</urlset>"

    async def fetch(url):
        return big, len(big)

    out = asyncio.run(collect_sitemaps(["https://e.com/sitemap.xml"], fetch))
    assert not out.complete
    ((where, why),) = out.errors
    assert where == "https://e.com/sitemap.xml" and "more than 50,000 URLs" in why
    assert len(out.entries) == MAX_SITEMAP_URLS


def test_uncompressed_size_cap_applies_to_gzip_and_plain(monkeypatch):
    monkeypatch.setattr(sitemaps_mod, "MAX_SITEMAP_BYTES", 2000)
    big = urlset(*[(f"https://e.com/p{i}", None) for i in range(200)])
    assert len(big) > 2000
    with pytest.raises(SitemapError):
        parse_sitemap(gzip.compress(big))  # a small download that inflates past the cap
    with pytest.raises(SitemapError):
        parse_sitemap(big)


# -- lastmod_trusted ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lastmods, trusted",
    [
        ([], False),
        ([None], False),
        (["2024-01-01"], True),  # one URL: nothing to compare, trusted
        ([None, None], False),
        (["2024-01-01", "2024-01-01"], False),  # everything stamped with the deploy date
        (["d"] * 50, False),
        (["2024-01-01", "2024-01-02"], True),
        (["2024-01-01", None], True),
        (["d", "d", "e"], True),
    ],
)
def test_lastmod_trusted_table(lastmods, trusted):
    assert lastmod_trusted(lastmods) is trusted
    assert lastmod_trusted(iter(lastmods)) is trusted  # any iterable, e.g. dict.values()


def _lastmod_trusted_reference(lastmods):
    """The rule as first written (list comprehensions), to check the set-based version against."""
    values = [v for v in lastmods]
    stamped = [v for v in values if v]
    if len(values) < 2 or not stamped:
        return bool(stamped)
    return not (len(stamped) == len(values) and len(set(stamped)) == 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([None, "", "2024-01-01", "2024-01-02", "x"]), max_size=12))
def test_lastmod_trusted_matches_the_reference_rule(lastmods):
    assert lastmod_trusted(lastmods) is _lastmod_trusted_reference(lastmods)


@pytest.mark.parametrize(
    "lastmods, state",
    [
        ([], "none"),
        ([None], "none"),
        ([None, None, ""], "none"),  # no lastmod at all: not "one stamp"
        (["d", "d"], "same"),
        (["d"] * 50, "same"),
        (["d"], "varied"),
        (["d", "e"], "varied"),
        (["d", None], "varied"),
        (["d", "d", "e"], "varied"),
    ],
)
def test_lastmod_state_tells_no_lastmod_from_one_stamp(lastmods, state):
    assert lastmod_state(iter(lastmods)) == state


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([None, "", "2024-01-01", "2024-01-02", "x"]), max_size=12))
def test_lastmod_state_agrees_with_lastmod_trusted(lastmods):
    assert (lastmod_state(lastmods) == "varied") is lastmod_trusted(lastmods)


# -- kept parses: parse_key, pack_parsed, unpack_parsed --------------------------------------------


def test_parse_key_follows_the_body_and_the_parser_version(monkeypatch):
    body = urlset(("https://e.com/a", "2024-01-01"))
    key = parse_key(body)
    assert key == parse_key(bytes(body))  # a function of the bytes alone
    assert parse_key(body + b" ") != key and parse_key(body.replace(b"/a", b"/b")) != key
    monkeypatch.setattr(sitemaps_mod, "PARSE_VERSION", sitemaps_mod.PARSE_VERSION + 1)
    assert parse_key(body) != key  # a new parser never reads an old parser's results


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_parsed = st.builds(
    ParsedSitemap,
    st.lists(st.builds(SitemapEntry, _text, st.one_of(st.none(), _text)), max_size=20),
    st.lists(_text, max_size=5),
    st.booleans(),
    st.lists(st.tuples(_text, _text), max_size=5),
)


@settings(max_examples=200, deadline=None)
@given(_parsed)
def test_pack_parsed_round_trip(parsed):
    assert unpack_parsed(pack_parsed(parsed)) == parsed


def test_pack_parsed_round_trip_of_real_parses():
    for body in (
        urlset(
            ("https://e.com/a", "2024-01-02T03:04:05+01:00"),
            ("HTTPS://E.com:443/b#x", None),
            ("https://e.com/c", "someday"),
            ("/relative", None),
            ("mailto:a@e.com", None),
        ),
        index("https://e.com/s1.xml", "https://e.com/s2.xml.gz"),
    ):
        parsed = parse_sitemap(body)
        assert unpack_parsed(pack_parsed(parsed)) == parsed


def test_a_packed_parse_is_small():
    parsed = parse_sitemap(
        urlset(*((f"https://e.com/docs/page-{i}.html", f"2024-01-{i % 28 + 1:02d}") for i in range(2000)))
    )
    assert len(pack_parsed(parsed)) < 40 * 2000 // 4


@pytest.mark.parametrize(
    "packed",
    [
        b"",
        b"not zlib",
        zlib.compress(b"not json"),
        zlib.compress(b"\xff\xfe"),
        zlib.compress(b"[]"),
        zlib.compress(b'{"urls": [], "lastmods": []}'),  # no "sitemaps"
        zlib.compress(b'{"urls": ["a"], "lastmods": [], "sitemaps": []}'),  # lengths differ
        zlib.compress(b'{"urls": [1], "lastmods": [null], "sitemaps": []}'),
        zlib.compress(b'{"urls": ["a"], "lastmods": [2], "sitemaps": []}'),
        zlib.compress(b'{"urls": ["a"], "lastmods": [null], "sitemaps": [null]}'),
        zlib.compress(b'{"urls": "a", "lastmods": "b", "sitemaps": []}'),
        zlib.compress(b'{"entries": [["a", null]], "sitemaps": []}'),  # another layout
        pack_parsed(ParsedSitemap([SitemapEntry("https://e.com/a", None)]))[:-3],  # truncated
    ],
)
def test_damaged_or_foreign_packed_parses_unpack_to_none(packed):
    assert unpack_parsed(packed) is None


def test_an_empty_parse_round_trips_as_empty_not_as_none():
    assert unpack_parsed(pack_parsed(ParsedSitemap())) == ParsedSitemap()


# -- diff_sitemap --------------------------------------------------------------------------------

A, B, C, D = (f"https://e.com/{x}" for x in "abcd")


@pytest.mark.parametrize(
    "previous, current, added, removed, changed, trusted",
    [
        ({}, {}, [], [], [], False),
        ({}, {A: "1", B: "2"}, [A, B], [], [], True),
        ({A: "1", B: "2"}, {}, [], [A, B], [], False),
        ({A: "1", B: "2"}, {A: "1", B: "2"}, [], [], [], True),
        ({A: "1", B: "2"}, {A: "1", B: "3"}, [], [], [B], True),
        ({A: "1", B: "2"}, {B: "2", C: "9"}, [C], [A], [], True),
        ({A: "1", B: "2", C: "3"}, {A: "5", B: "5", C: "5"}, [], [], [], False),  # all one stamp: untrusted
        ({A: None, B: "2"}, {A: "7", B: "2"}, [], [], [A], True),  # lastmod appears
        ({A: "1", B: "2"}, {A: None, B: "2"}, [], [], [], True),  # lastmod disappears: not a change
        ({A: "1", B: "2", D: "4"}, {D: "4", C: "3", B: "9", A: "1"}, [C], [], [B], True),
        ({A: "5", B: "2"}, {A: "3", B: "2"}, [], [], [], True),  # lastmod moves backwards: not a change
        # A deploy-date night's stamp on record (as pagesync < 2026-12 kept it), the old stamps back:
        (
            {A: "2026-11-02T00:00:00+00:00", B: "2026-11-02T00:00:00+00:00"},
            {A: "2026-10-01T00:00:00+00:00", B: "2026-10-02T00:00:00+00:00"},
            [],
            [],
            [],
            True,
        ),
        # ...and one really newer: followed. Instants, not strings, are compared (+02:00 is earlier).
        (
            {A: "2026-11-02T00:00:00+00:00", B: "2026-11-02T00:00:00+00:00"},
            {A: "2026-11-03T00:00:00+00:00", B: "2026-11-02T01:00:00+02:00"},
            [],
            [],
            [A],
            True,
        ),
    ],
)
def test_diff_sitemap_table(previous, current, added, removed, changed, trusted):
    d = diff_sitemap(previous, current)
    assert isinstance(d, SitemapDiff)
    assert d.added == added
    assert d.removed == removed
    assert d.lastmod_changed == changed
    assert d.lastmod_trusted is trusted


_url = st.sampled_from([f"https://e.com/p{i}" for i in range(12)])
_stamp = st.one_of(st.none(), st.sampled_from(["2024-01-01", "2024-01-02", "2024-02-01", "2025-06-30"]))
_maps = st.dictionaries(_url, _stamp, max_size=12)


@settings(max_examples=200, deadline=None)
@given(_maps, _maps)
def test_diff_sitemap_properties(previous, current):
    d = diff_sitemap(previous, current)
    assert set(d.added).isdisjoint(d.removed)
    assert set(d.added) <= set(current)
    assert set(d.removed) <= set(previous)
    assert set(d.added) == set(current) - set(previous)
    assert set(d.removed) == set(previous) - set(current)
    assert set(d.lastmod_changed) <= set(current) & set(previous)
    assert d.added == sorted(d.added) and d.removed == sorted(d.removed)
    assert d.lastmod_trusted is lastmod_trusted(current.values())
    for u in d.lastmod_changed:
        assert current[u] and current[u] != previous[u]
    if d.lastmod_trusted:  # an advance is a later stamp (these ISO dates order as strings), or a first one
        expected = sorted(
            u for u in current if u in previous and current[u] and (previous[u] is None or current[u] > previous[u])
        )
        assert d.lastmod_changed == expected
    assert diff_sitemap(MappingProxyType(previous), MappingProxyType(current)) == d  # any Mapping


# -- several sites in one run: the feed is judged per host ----------------------------------

_murl = st.sampled_from([f"https://{h}/p{i}" for h in ("a.com", "B.com:8443", "c.org") for i in range(5)])
_mmaps = st.dictionaries(_murl, _stamp, max_size=15)


def _feed_reference(current):
    from urllib.parse import urlsplit

    hosts: dict[str, list] = {}
    for u, lm in current.items():
        hosts.setdefault(urlsplit(u).netloc.lower(), []).append(lm)
    return {h for h, lms in hosts.items() if lastmod_state(lms) == "varied"}


def test_a_deploy_stamped_site_is_no_feed_beside_one_whose_stamps_vary():
    """Site A's lastmods move with its pages; site B stamps every URL with its deploy
    date. B's deploy moves every B stamp: that says nothing, and is no advance."""
    a = {f"https://a.com/p{i}": f"2024-01-0{i + 1}" for i in range(3)}
    b_before = {f"https://b.com/p{i}": "2024-05-01" for i in range(3)}
    b_now = {u: "2024-06-01" for u in b_before}
    before = {**a, **b_before}
    now = {**a, "https://a.com/p0": "2024-02-01", **b_now}
    assert feed_hosts(now) == {"a.com"}
    d = diff_sitemap(before, now)
    assert d.lastmod_changed == ["https://a.com/p0"] and d.lastmod_trusted
    # Two deploy-stamped sites with different dates: stamps vary across the run, but no feed.
    assert feed_hosts({**b_now, "https://c.org/x": "2024-01-01", "https://c.org/y": "2024-01-01"}) == set()
    assert not diff_sitemap(
        {}, {**b_now, "https://c.org/x": "2024-01-01", "https://c.org/y": "2024-01-01"}
    ).lastmod_trusted


@settings(max_examples=300, deadline=None)
@given(_mmaps, _mmaps)
def test_diff_sitemap_follows_advances_only_on_feed_hosts(previous, current):
    feed = feed_hosts(current)
    assert feed == _feed_reference(current)
    d = diff_sitemap(previous, current)
    assert d == diff_sitemap(previous, current, feed)
    assert d.lastmod_trusted is bool(feed)
    from urllib.parse import urlsplit

    expected = sorted(
        u
        for u in current
        if u in previous
        and current[u]
        and (previous[u] is None or current[u] > previous[u])
        and urlsplit(u).netloc.lower() in feed
    )
    assert d.lastmod_changed == expected


@settings(max_examples=200, deadline=None)
@given(_maps, st.sets(_url, min_size=2, max_size=12), st.sampled_from(["2024-01-01", "2030-12-31"]))
def test_diff_sitemap_untrusted_when_every_url_shares_one_stamp(previous, current_urls, stamp):
    current = {u: stamp for u in current_urls}
    d = diff_sitemap(previous, current)
    assert d.lastmod_trusted is False
    assert d.lastmod_changed == []


# -- lastmod advances and the stamps on record: a deploy-date night changes nothing ----------


@pytest.mark.parametrize(
    "previous, current, advanced",
    [
        (None, None, False),
        ("2026-10-01T00:00:00+00:00", None, False),  # a stamp that disappears
        (None, "2026-10-01T00:00:00+00:00", True),  # a first stamp is news
        ("2026-10-01T00:00:00+00:00", "2026-10-01T00:00:00+00:00", False),
        ("2026-10-01T00:00:00+00:00", "2026-10-02T00:00:00+00:00", True),
        ("2026-10-02T00:00:00+00:00", "2026-10-01T00:00:00+00:00", False),  # backwards
        ("2026-10-01T00:00:00+00:00", "2026-10-01T00:00:00.500000+00:00", True),
        ("2026-10-01T12:00:00+00:00", "2026-10-01T13:00:00+02:00", False),  # an earlier instant
        ("1", "3", True),
        ("3", "1", False),  # not dates: the strings' order
    ],
)
def test_lastmod_advanced_table(previous, current, advanced):
    assert lastmod_advanced(previous, current) is advanced


S, OLD, NEW = "2026-11-02T00:00:00+00:00", "2026-10-01T00:00:00+00:00", "2026-11-04T00:00:00+00:00"


@pytest.mark.parametrize(
    "previous, current, feed, recorded",
    [
        (OLD, NEW, True, NEW),  # a feed's stamp is the baseline
        (NEW, OLD, True, OLD),  # backwards too (no advance, but today's stamp is the one to compare with)
        (OLD, S, False, OLD),  # a deploy-date night: the last feed stamp stays on record
        (OLD, None, False, OLD),  # a night without stamps: likewise
        (OLD, None, True, OLD),  # one URL without its stamp on a feed: likewise
        (None, S, False, S),  # nothing on record (a new URL): even a deploy date, read after the page
        (None, None, False, None),
        (None, NEW, True, NEW),
    ],
)
def test_lastmod_to_record_table(previous, current, feed, recorded):
    assert lastmod_to_record(previous, current, feed) == recorded


def _night(urls, stamps):
    return {u: s for u, s in zip(sorted(urls), stamps)}


def _apply(record, current):
    """The state after a pass: what `lastmods_to_record` changes, over what was on record."""
    return {**{u: lm for u, lm in record.items() if u in current}, **lastmods_to_record(record, current)}


def test_one_deploy_date_night_leaves_the_next_nights_advances_alone():
    """Nights of a real site: varied stamps, the deploy date on every URL (a newer stamp),
    the varied stamps back, then one page edited: one advance in all, on the last night."""
    urls = [f"https://e.com/p{i}" for i in range(10)]
    varied = {u: f"2026-10-{i + 1:02d}T00:00:00+00:00" for i, u in enumerate(urls)}
    nights = [varied, {u: S for u in urls}, varied, {**varied, urls[2]: NEW}]
    record: dict[str, str | None] = {}
    advances = []
    for night in nights:
        advances.append(diff_sitemap(record, night).lastmod_changed)
        record = _apply(record, night)
    assert advances == [[], [], [], [urls[2]]]
    assert record == {**varied, urls[2]: NEW}


def test_an_edit_hidden_by_deploy_date_nights_is_an_advance_when_stamps_vary_again():
    urls = [f"https://e.com/p{i}" for i in range(4)]
    varied = {u: f"2026-10-{i + 1:02d}T00:00:00+00:00" for i, u in enumerate(urls)}
    record = _apply({}, varied)
    for night in ({u: S for u in urls}, {u: NEW for u in urls}, {u: None for u in urls}):  # nothing said
        assert diff_sitemap(record, night).lastmod_changed == []
        record = _apply(record, night)
    assert record == varied
    # p1 was edited meanwhile: its own stamp, later than the one on record, is followed.
    assert diff_sitemap(record, {**varied, urls[1]: "2026-11-03T09:00:00+00:00"}).lastmod_changed == [urls[1]]


_fixed_urls = st.sets(_url, min_size=2, max_size=12)
_stamp_on = st.sampled_from(["2024-01-01", "2024-01-02", "2024-02-01", "2025-06-30"])


@settings(max_examples=300, deadline=None)
@given(_fixed_urls, st.data())
def test_a_night_that_is_no_feed_changes_no_later_advance(urls, data):
    """Property: between two sitemaps (all URLs stamped on record), a night whose stamps
    say nothing (one stamp on every URL, or none) changes neither the advances the next
    sitemap shows nor the record, whatever its stamp; a night's advances are always later
    stamps than the ones on record."""
    n = len(urls)
    previous = _night(urls, data.draw(st.lists(_stamp_on, min_size=n, max_size=n)))
    current = _night(urls, data.draw(st.lists(_stamp, min_size=n, max_size=n)))
    quiet = data.draw(st.one_of(st.none(), _stamp_on))
    night = {u: quiet for u in urls}
    assert lastmod_state(night.values()) in ("same", "none")
    assert diff_sitemap(previous, night).lastmod_changed == []
    after = _apply(previous, night)
    assert after == previous and lastmods_to_record(previous, night) == {}
    d = diff_sitemap(after, current)
    assert d == diff_sitemap(previous, current)
    for u in d.lastmod_changed:
        assert parse_lastmod(current[u]) > parse_lastmod(previous[u])


@settings(max_examples=200, deadline=None)
@given(_mmaps, _mmaps)
def test_lastmods_to_record_lists_exactly_the_records_that_change(previous, current):
    feed = feed_hosts(current)
    rec = lastmods_to_record(previous, current)
    assert rec == lastmods_to_record(MappingProxyType(previous), MappingProxyType(current), feed)
    from urllib.parse import urlsplit

    for u, lm in current.items():
        keep = lastmod_to_record(previous.get(u), lm, urlsplit(u).netloc.lower() in feed)
        if u not in previous or keep != previous[u]:
            assert rec[u] == keep
        else:
            assert u not in rec
    assert rec.keys() <= current.keys()
    # Every advance is recorded (the next pass compares against it), never a stamp of a host that is no feed.
    assert set(diff_sitemap(previous, current, feed).lastmod_changed) <= rec.keys()


# -- collect_sitemaps ----------------------------------------------------------------------------


class FakeFetch:
    """url -> bytes or exception; records the order of requests."""

    def __init__(self, responses: dict[str, bytes | Exception]):
        self.responses = responses
        self.calls: list[str] = []

    async def __call__(self, url: str) -> tuple[bytes, int]:
        self.calls.append(url)
        await asyncio.sleep(0)
        r = self.responses.get(url)
        if r is None:
            raise FetchError(f"{url}: HTTP 404")
        if isinstance(r, Exception):
            raise r
        return r, len(r) + 7  # wire bytes differ from body bytes


def collect(roots, fetch, **kw):
    return asyncio.run(collect_sitemaps(roots, fetch, **kw))


def test_collect_index_to_children():
    s1 = urlset(("https://e.com/a", "2024-01-01"), ("https://e.com/b", None))
    s2 = gzip.compress(urlset(("https://e.com/c", "2024-01-03"), ("https://e.com/a", "2099-01-01")))
    idx = index("https://e.com/s1.xml", "https://e.com/s2.xml.gz")
    fetch = FakeFetch({"https://e.com/sitemap.xml": idx, "https://e.com/s1.xml": s1, "https://e.com/s2.xml.gz": s2})
    out = collect(["https://e.com/sitemap.xml"], fetch)
    assert out.entries == {
        "https://e.com/a": "2024-01-01T00:00:00+00:00",  # first file wins on duplicates
        "https://e.com/b": None,
        "https://e.com/c": "2024-01-03T00:00:00+00:00",
    }
    assert out.errors == [] and out.complete
    assert out.bytes_downloaded == len(idx) + len(s1) + len(s2) + 3 * 7
    assert fetch.calls == ["https://e.com/sitemap.xml", "https://e.com/s1.xml", "https://e.com/s2.xml.gz"]


def test_collect_resolves_relative_sitemap_lines_of_robots_txt():
    """`Sitemap: /sitemap.xml` used to be skipped as 'scheme (none) not allowed', and the pass
    then failed with 'sitemap(s) listed no URLs'."""
    fetch = FakeFetch(
        {
            "https://e.com/robots.txt": b"User-agent: *\nSitemap: /s1.xml\nSitemap: https://e.com/s2.xml\n",
            "https://e.com/s1.xml": urlset(("https://e.com/a", None)),
            "https://e.com/s2.xml": urlset(("https://e.com/b", None)),
        }
    )
    scope = lambda u: None if u.startswith("https://e.com/") else "out"  # noqa: E731
    out = collect(["https://e.com/robots.txt"], fetch, scope=scope)
    assert set(out.entries) == {"https://e.com/a", "https://e.com/b"}
    assert out.complete and out.skipped == []


def test_collect_several_roots_and_repeated_roots_fetched_once():
    fetch = FakeFetch(
        {
            "https://e.com/s1.xml": urlset(("https://e.com/a", None)),
            "https://e.com/s2.xml": urlset(("https://e.com/b", None)),
        }
    )
    out = collect(["https://e.com/s1.xml", "https://e.com/s2.xml", "https://e.com/s1.xml"], fetch)
    assert set(out.entries) == {"https://e.com/a", "https://e.com/b"}
    assert fetch.calls == ["https://e.com/s1.xml", "https://e.com/s2.xml"]


def test_collect_records_errors_and_keeps_going():
    idx = index(
        "https://e.com/bad-fetch.xml", "https://e.com/broken.xml", "https://e.com/good.xml", "https://e.com/missing.xml"
    )
    fetch = FakeFetch(
        {
            "https://e.com/sitemap.xml": idx,
            "https://e.com/bad-fetch.xml": FetchError("https://e.com/bad-fetch.xml: timeout"),
            "https://e.com/broken.xml": b"<html>oops</html",
            "https://e.com/good.xml": urlset(("https://e.com/a", None)),
        }
    )
    out = collect(["https://e.com/sitemap.xml"], fetch)
    assert list(out.entries) == ["https://e.com/a"]
    failed = [u for u, _ in out.errors]
    assert sorted(failed) == ["https://e.com/bad-fetch.xml", "https://e.com/broken.xml", "https://e.com/missing.xml"]
    assert all(msg for _, msg in out.errors)
    assert not out.complete


def test_collect_never_raises_when_root_fails():
    fetch = FakeFetch({})
    out = collect(["https://e.com/sitemap.xml"], fetch)
    assert out.entries == {}
    assert [u for u, _ in out.errors] == ["https://e.com/sitemap.xml"]
    assert not out.complete
    assert out.bytes_downloaded == 0


def test_collect_with_no_roots():
    out = collect([], FakeFetch({}))
    assert out.entries == {} and out.errors == [] and out.complete


def test_collect_never_raises_on_corrupt_gzip():
    gz = gzip.compress(urlset(("https://e.com/a", None)))
    corrupt = gz[:10] + bytes(b ^ 0x55 for b in gz[10:-8]) + gz[-8:]
    fetch = FakeFetch({"https://e.com/s.xml.gz": corrupt, "https://e.com/ok.xml": urlset(("https://e.com/b", None))})
    out = collect(["https://e.com/s.xml.gz", "https://e.com/ok.xml"], fetch)
    assert [u for u, _ in out.errors] == ["https://e.com/s.xml.gz"]
    assert list(out.entries) == ["https://e.com/b"]


def test_collect_never_raises_on_a_malformed_loc():
    fetch = FakeFetch(
        {
            "https://e.com/s.xml": urlset(("http://[::1/broken", None), ("https://e.com/a", None)),
            "https://e.com/ok.xml": urlset(("https://e.com/b", None)),
        }
    )
    out = collect(["https://e.com/s.xml", "https://e.com/ok.xml"], fetch)
    assert "https://e.com/b" in out.entries


def test_collect_merges_invalid_locs_once_across_files():
    fetch = FakeFetch(
        {
            "https://e.com/s1.xml": urlset(("/a.html", None), ("https://e.com/a", None)),
            "https://e.com/s2.xml": urlset(("/a.html", None), ("mailto:x@e.com", None)),
        }
    )
    out = collect(["https://e.com/s1.xml", "https://e.com/s2.xml"], fetch)
    assert list(out.entries) == ["https://e.com/a"]
    assert list(out.invalid) == ["/a.html", "mailto:x@e.com"]


def _chain(n: int) -> dict[str, bytes]:
    """idx0 -> idx1 -> ... -> idx{n-1} (an index each) -> leaf urlset."""
    out: dict[str, bytes] = {}
    for i in range(n):
        nxt = f"https://e.com/idx{i + 1}.xml" if i + 1 < n else "https://e.com/leaf.xml"
        out[f"https://e.com/idx{i}.xml"] = index(nxt)
    out["https://e.com/leaf.xml"] = urlset(("https://e.com/deep", None))
    return out


def test_collect_depth_cap():
    fetch = FakeFetch(_chain(6))
    out = collect(["https://e.com/idx0.xml"], fetch, max_depth=2)
    assert fetch.calls == ["https://e.com/idx0.xml", "https://e.com/idx1.xml", "https://e.com/idx2.xml"]
    assert out.entries == {}
    assert len(out.errors) == 1
    assert out.errors[0][0] == "https://e.com/idx3.xml"
    assert "deep" in out.errors[0][1]
    assert not out.complete


def test_collect_within_depth_reaches_the_leaf():
    fetch = FakeFetch(_chain(3))  # leaf at depth 3
    out = collect(["https://e.com/idx0.xml"], fetch, max_depth=3)
    assert out.entries == {"https://e.com/deep": None}
    assert out.complete


def test_collect_index_cycle_terminates():
    fetch = FakeFetch(
        {
            "https://e.com/a.xml": index("https://e.com/b.xml"),
            "https://e.com/b.xml": index("https://e.com/a.xml", "https://e.com/leaf.xml"),
            "https://e.com/leaf.xml": urlset(("https://e.com/x", None)),
        }
    )
    out = collect(["https://e.com/a.xml"], fetch, max_depth=10)
    assert out.entries == {"https://e.com/x": None}
    assert sorted(fetch.calls) == ["https://e.com/a.xml", "https://e.com/b.xml", "https://e.com/leaf.xml"]
