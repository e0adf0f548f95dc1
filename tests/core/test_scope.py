"""Scope, pure (name resolution injected): which URLs a pass may fetch, and the per-origin
memo of its answers (one urlsplit per site, not per URL), which must never change one."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sync.core.scope import Scope, origin_key

ADDRS = {
    "docs.example.com": ["93.184.216.34"],
    "cdn.example.com": ["93.184.216.35"],
    "evil.example.com": ["10.0.0.5"],
    "intranet": ["192.168.1.10"],
}


def resolve(host: str) -> list[str]:
    return ADDRS.get(host, [])


def public_scope() -> Scope:
    return Scope.from_urls(["https://docs.example.com/sitemap.xml"], ["cdn.example.com"], resolve=resolve)


@pytest.mark.parametrize(
    "url, allowed",
    [
        ("https://docs.example.com/a", True),
        ("http://docs.example.com/a?x=1#f", True),
        ("https://DOCS.example.com:443/a", True),  # the default port, written
        ("http://docs.example.com:80/a", True),
        ("https://DOCS.example.com:8443/a", False),  # another port: another site of the host
        ("http://docs.example.com:443/a", False),  # not http's default port
        ("https://docs.example.com:99999/a", False),  # malformed port
        ("https://user:pw@docs.example.com/a", True),
        ("https://cdn.example.com/a", True),  # --allow-host
        ("https://other.example.com/a", False),  # not a configured host
        ("https://evil.example.com/a", False),
        ("ftp://docs.example.com/a", False),
        ("mailto:someone@docs.example.com", False),
        ("//docs.example.com/a", False),  # no scheme
        ("https://[::1/a", False),  # malformed
        ("https://docs.example.com\t.evil/a", False),  # urlsplit deletes the tab: host docs.example.com.evil
        ("https://127.0.0.1/a", False),
    ],
)
def test_check_table(url, allowed):
    assert (public_scope().check(url) is None) is allowed


def test_a_site_on_a_private_network_may_reach_its_own_hosts_only():
    scope = Scope.from_urls(["http://intranet/sitemap.xml"], ["evil.example.com"], resolve=resolve)
    assert scope.check("http://intranet/a") is None
    assert scope.check("https://evil.example.com/a") is None
    assert scope.check("http://docs.example.com/a") is not None


@pytest.mark.parametrize(
    "allow",
    [
        "cdn.example.com",
        "CDN.example.com",
        "cdn.example.com:443",
        "https://cdn.example.com/",
        "http://cdn.example.com:80/docs",
    ],
)
def test_allow_host_names_a_site_however_written(allow):
    """A host, host:port or a URL given to --allow-host allows that site (its default ports
    when none is written)."""
    scope = Scope.from_urls(["https://docs.example.com/sitemap.xml"], [allow], resolve=resolve)
    assert scope.check("https://cdn.example.com/a") is None and scope.check("http://cdn.example.com/a") is None
    assert scope.check("https://cdn.example.com:8443/a") is not None
    assert scope.check("https://other.example.com/a") is not None


@pytest.mark.parametrize("allow", ["cdn.example.com:8443", "https://CDN.example.com:8443/docs"])
def test_allow_host_with_a_port_allows_that_port_only(allow):
    scope = Scope.from_urls(["https://docs.example.com/sitemap.xml"], [allow], resolve=resolve)
    assert scope.check("https://cdn.example.com:8443/a") is None
    assert scope.check("https://cdn.example.com/a") is not None


def test_a_site_is_its_host_and_port():
    """A sitemap on the configured site may list another port of its host (a metrics
    endpoint, an admin app): that is another site, out of scope unless allowed."""
    scope = Scope.from_urls(["http://127.0.0.1:8000/sitemap.xml"])
    assert scope.check("http://127.0.0.1:8000/a") is None
    reason = scope.check("http://127.0.0.1:9100/metrics")
    assert reason == "host 127.0.0.1:9100 is not one of the configured sites (use --allow-host)"
    assert scope.check("http://127.0.0.1/a") is not None
    allowed = Scope.from_urls(["http://127.0.0.1:8000/sitemap.xml"], ["127.0.0.1:9100"])
    assert allowed.check("http://127.0.0.1:9100/metrics") is None


def test_allow_host_takes_an_ipv6_literal():
    scope = Scope.from_urls(["http://[::1]:8080/sitemap.xml"], ["[fd00::5]", "fd00::6", "[fd00::7]:81"])
    assert scope.check("http://[::1]:8080/a") is None and scope.check("http://[::1]:8081/a") is not None
    assert scope.check("http://[fd00::5]/a") is None and scope.check("http://[fd00::6]:81/a") is not None
    assert scope.check("http://[fd00::7]:81/a") is None


def test_reasons_name_the_problem():
    scope = public_scope()
    assert "ftp" in scope.check("ftp://docs.example.com/a")
    assert "other.example.com" in scope.check("https://other.example.com/a")


def test_one_resolution_and_one_verdict_per_origin():
    asked = []

    def counting(host):
        asked.append(host)
        return resolve(host)

    scope = Scope.from_urls(["https://docs.example.com/sitemap.xml"], resolve=counting)
    for i in range(500):
        assert scope.check(f"https://docs.example.com/p/{i}.html") is None
    assert asked == ["docs.example.com"]
    assert len(scope._verdicts) == 1


# Text that exercises urlsplit's corners: delimiters, brackets, userinfo, ports, controls, spaces.
_pieces = st.sampled_from(
    [
        "http",
        "https",
        "HTTPS",
        "ftp",
        ":",
        "//",
        "/",
        "?",
        "#",
        "@",
        "[",
        "]",
        "::1",
        ":80",
        ":8443",
        ":99999",
        "docs.example.com",
        "DOCS.EXAMPLE.COM",
        "cdn.example.com",
        "evil.example.com",
        "other",
        "user:pw",
        "127.0.0.1",
        "\t",
        "\n",
        " ",
        "\x00",
        "\x7f",
        "%2F",
        "é",
        "a",
        ".",
        "-",
    ]
)
_urlish = st.lists(_pieces, max_size=12).map("".join)


def _split(url):
    try:
        parts = urlsplit(url)
        return parts.scheme, parts.hostname, parts.port
    except ValueError as exc:
        return type(exc)


@settings(max_examples=1000, deadline=None)
@given(_urlish)
@example("https://docs.example.com\t.evil/a")
@example("https://docs.example.com?x/y")
@example(" https://docs.example.com/")
def test_origin_key_decides_scheme_host_and_port_as_urlsplit_does(url):
    key = origin_key(url)
    if key is not None:
        assert url.startswith(key)
        assert _split(key) == _split(url)


@settings(max_examples=500, deadline=None)
@given(st.lists(_urlish, max_size=15))
def test_remembered_verdicts_equal_fresh_ones(urls):
    scope = public_scope()
    for url in urls + urls:  # the second round answers from the memo
        assert scope.check(url) == public_scope()._check(url), url
