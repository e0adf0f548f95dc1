"""The scheme is part of a site: a site named by an https URL gets its --header secrets
over https only, never at its http URLs (a sitemap's, robots.txt's of the http origin)."""

from __future__ import annotations

import pytest

from sync.core.scope import Scope
from sync.core.site_rules import SiteRules, SiteRuleSet, headers_in_scope

RULES = SiteRuleSet(SiteRules(headers=(("Authorization", "Bearer t"),)))


def nothing(host: str) -> list[str]:
    return ["93.184.216.34"]


@pytest.mark.parametrize(
    "named, url, sent",
    [
        (["https://docs.example/"], "https://docs.example/p", True),
        (["https://docs.example/"], "http://docs.example/p", False),  # an https site's http URL
        (["https://docs.example/"], "http://docs.example/robots.txt", False),
        (["https://docs.example:8443/"], "http://docs.example:8443/p", False),
        (["http://docs.example/"], "http://docs.example/p", True),  # a site named over http
        (["http://docs.example/"], "https://docs.example/p", True),  # an upgrade is fine
        (["http://docs.example/", "https://docs.example/x"], "http://docs.example/p", False),  # named over https too
        (["https://a.example/", "http://b.example/"], "http://b.example/p", True),
        (["https://a.example/", "http://b.example/"], "http://a.example/p", False),
    ],
)
def test_headers_go_over_http_only_to_a_site_named_over_http(named, url, sent):
    scope = Scope.from_urls(named, resolve=nothing)
    assert scope.check(url) is None  # in scope either way: only the secrets are held back
    got = headers_in_scope(RULES, url, scope.check, scope.plain_http_ok)
    assert bool(got) is sent


def test_an_allowed_host_named_without_a_scheme_is_http_only_in_a_run_over_http_alone():
    scope = Scope.from_urls(["https://a.example/"], ["b.example", "http://c.example"], resolve=nothing)
    assert not scope.plain_http_ok("http://b.example/p") and scope.plain_http_ok("https://b.example/p")
    assert scope.plain_http_ok("http://c.example/p")
    plain_run = Scope.from_urls(["http://a.example/"], ["b.example"], resolve=nothing)
    assert plain_run.plain_http_ok("http://b.example/p")


def test_without_a_scope_to_say_so_no_header_goes_over_http():
    assert headers_in_scope(RULES, "http://docs.example/p", lambda u: None) == {}
    assert headers_in_scope(RULES, "https://docs.example/p", lambda u: None) == {"Authorization": "Bearer t"}
