"""Identity rules from the contract: canonical URL, chunk id, point id."""

from __future__ import annotations

import hashlib
import re
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.core.ids import POINT_ID_NAMESPACE, canonical_url, chunk_id, point_id, url_digest

CANONICAL_CASES = [
    # scheme and host lowercased
    ("HTTP://Example.COM/a", "http://example.com/a"),
    ("HtTpS://DOCS.Example.org/", "https://docs.example.org/"),
    # default ports dropped, per scheme
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("HTTPS://EXAMPLE.com:443", "https://example.com"),
    # non-default ports kept (including the other scheme's default)
    ("http://example.com:8080/a", "http://example.com:8080/a"),
    ("https://example.com:80/a", "https://example.com:80/a"),
    ("http://example.com:443/a", "http://example.com:443/a"),
    ("https://example.com:8443/", "https://example.com:8443/"),
    # fragment dropped
    ("https://example.com/a#section-2", "https://example.com/a"),
    ("https://example.com/a?x=1#frag", "https://example.com/a?x=1"),
    ("https://example.com/a#", "https://example.com/a"),
    # path and query kept exactly: case, trailing slash, encoding, order, empty values
    ("https://example.com/Docs/Install/", "https://example.com/Docs/Install/"),
    ("https://example.com/Docs/Install", "https://example.com/Docs/Install"),
    ("https://example.com/a//b/./c/../d", "https://example.com/a//b/./c/../d"),
    ("https://example.com/a%2Fb%7e?Q=Upper&b=2&a=1", "https://example.com/a%2Fb%7e?Q=Upper&b=2&a=1"),
    ("https://example.com/search?q=&x", "https://example.com/search?q=&x"),
    ("https://example.com?q=1", "https://example.com?q=1"),
    ("https://example.com", "https://example.com"),
    # IPv6 literal hosts keep their brackets; lowercased; default port dropped, others kept
    ("http://[::1]/a", "http://[::1]/a"),
    ("http://[::1]:80/a", "http://[::1]/a"),
    ("https://[2001:DB8::1]:8443/a?b#c", "https://[2001:db8::1]:8443/a?b"),
    ("https://[FE80::1]:443/", "https://[fe80::1]/"),
    # IPv4 literal
    ("http://127.0.0.1:8000/x", "http://127.0.0.1:8000/x"),
    # surrounding whitespace (as in a sitemap <loc>) ignored
    ("  https://Example.com/a \n", "https://example.com/a"),
]


@pytest.mark.parametrize("url, expected", CANONICAL_CASES)
def test_canonical_url_table(url, expected):
    assert canonical_url(url) == expected


@pytest.mark.parametrize("url, expected", CANONICAL_CASES)
def test_canonical_url_table_is_a_fixed_point(url, expected):
    assert canonical_url(expected) == expected


# -- Hypothesis: well-formed http(s) URLs built from parts ---------------------------------

_label = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=10)
_host = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.sampled_from(["[::1]", "[2001:DB8::AB]", "[fe80::1]", "127.0.0.1", "10.0.0.254"]),
)
_scheme = st.sampled_from(["http", "https", "HTTP", "Https", "hTTp", "HTTPS"])
_port = st.one_of(st.none(), st.sampled_from([80, 443, 8080, 8443, 1, 65535]), st.integers(1, 65535))
_pchar = "abcXYZ019-._~%2F!$&'()*+,;=:@/"
_path = st.one_of(st.just(""), st.text(alphabet=_pchar, max_size=30).map(lambda p: "/" + p))
_query = st.one_of(st.none(), st.text(alphabet=_pchar + "?", max_size=20))
_fragment = st.one_of(st.none(), st.text(alphabet=_pchar + "?#", max_size=20))


@st.composite
def http_urls(draw):
    scheme, host, port = draw(_scheme), draw(_host), draw(_port)
    path, query, frag = draw(_path), draw(_query), draw(_fragment)
    url = f"{scheme}://{host}"
    if port is not None:
        url += f":{port}"
    url += path
    if query is not None:
        url += "?" + query
    if frag is not None:
        url += "#" + frag
    return url, scheme, host, port, path, query


@settings(max_examples=200, deadline=None)
@given(http_urls())
def test_canonical_url_is_idempotent(parts):
    url = parts[0]
    once = canonical_url(url)
    assert canonical_url(once) == once


@settings(max_examples=200, deadline=None)
@given(http_urls())
def test_canonical_url_drops_fragment_and_keeps_path_and_query(parts):
    url, scheme, host, port, path, query = parts
    c = canonical_url(url)
    assert "#" not in c
    default = {"http": 80, "https": 443}[scheme.lower()]
    netloc = host.lower() + (f":{port}" if port is not None and port != default else "")
    expected = f"{scheme.lower()}://{netloc}{path}" + (f"?{query}" if query else "")
    assert c == expected


# -- chunk ids and point ids --------------------------------------------------------------

CHUNK_ID_RE = re.compile(r"^[0-9a-f]{64}_c\d+$")


def test_chunk_id_format_and_value():
    url = "https://example.com/docs/install"
    cid = chunk_id(url, 0)
    assert CHUNK_ID_RE.match(cid)
    assert cid == hashlib.sha256(url.encode()).hexdigest() + "_c0"
    assert chunk_id(url, 17) == hashlib.sha256(url.encode()).hexdigest() + "_c17"
    assert url_digest(url) == hashlib.sha256(url.encode()).hexdigest()


def test_chunk_id_uses_utf8_of_the_url():
    url = "https://example.com/caf\u00e9"
    assert chunk_id(url, 3) == hashlib.sha256(url.encode("utf-8")).hexdigest() + "_c3"


def test_chunk_id_rejects_negative_index():
    with pytest.raises(ValueError):
        chunk_id("https://example.com/", -1)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(0, 10**6))
def test_chunk_id_property(url, n):
    cid = chunk_id(url, n)
    assert CHUNK_ID_RE.match(cid)
    assert cid == hashlib.sha256(url.encode("utf-8")).hexdigest() + f"_c{n}"


def test_point_id_is_uuid5_of_chunk_id():
    cid = chunk_id("https://example.com/a", 0)
    pid = point_id(cid)
    parsed = uuid.UUID(pid)
    assert str(parsed) == pid  # canonical lowercase hyphenated form
    assert parsed.version == 5
    assert pid == str(uuid.uuid5(POINT_ID_NAMESPACE, cid))
    assert point_id(cid) == pid  # deterministic


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_point_id_equals_the_standard_librarys_uuid5_for_any_name(name):
    # point_id computes uuid5 by hand (no UUID objects): it must agree on any string, not just chunk ids.
    assert point_id(name) == str(uuid.uuid5(POINT_ID_NAMESPACE, name))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=100), st.integers(0, 1000))
def test_point_id_valid_and_deterministic(url, n):
    cid = chunk_id(url, n)
    pid = point_id(cid)
    assert str(uuid.UUID(pid)) == pid
    assert point_id(cid) == pid


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.integers(0, 500), st.text(max_size=60), st.integers(0, 500))
def test_point_id_distinct_for_distinct_chunk_ids(u1, n1, u2, n2):
    c1, c2 = chunk_id(u1, n1), chunk_id(u2, n2)
    if c1 != c2:
        assert point_id(c1) != point_id(c2)
    else:
        assert point_id(c1) == point_id(c2)


def test_point_ids_distinct_across_many_chunks_of_many_pages():
    ids = {point_id(chunk_id(f"https://example.com/p{i}", n)) for i in range(50) for n in range(40)}
    assert len(ids) == 50 * 40
