"""http and https of one host are one site (default ports): an http -> https redirect on
every page stays in scope without --allow-host; www and the apex are two sites."""

from __future__ import annotations

from sync.core.scope import Scope


def scope(*urls: str, allow=()) -> Scope:
    return Scope.from_urls(urls, allow, resolve=lambda host: ["93.184.215.14"])


def test_http_and_https_of_a_host_are_one_site():
    s = scope("http://docs.example.com/sitemap.xml")
    assert s.check("https://docs.example.com/guide/") is None
    assert s.check("https://docs.example.com:8443/guide/") is not None  # another port: another service


def test_www_and_the_apex_are_two_sites_until_allowed():
    s = scope("https://www.example.com/sitemap.xml")
    assert "use --allow-host" in s.check("https://example.com/guide/")
    assert (
        scope("https://www.example.com/sitemap.xml", allow=["example.com"]).check("https://example.com/guide/") is None
    )
