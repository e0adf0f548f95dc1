"""--header: sent to this run's sites only (robots.txt, sitemaps, pages), never to a host a
redirect leads off to; its value never printed, logged, or in the report."""

from __future__ import annotations

import json
import logging

import pytest

from demo.site_server import Site, SiteServer
from sync.core.site_rules import SiteRules, SiteRuleSet
from tests.cli_helpers import cli, cli_run, one_error_line
from tests.helpers import Harness, page_html, para

SECRET = "Bearer s3cret-token-value"


@pytest.fixture
def two_sites():
    sites = [Site(), Site()]
    with SiteServer(sites[0]) as s0, SiteServer(sites[1]) as s1:
        sites[0].server, sites[1].server = s0, s1  # type: ignore[attr-defined]
        yield sites


def port_of(site) -> str:
    return site.base_url.rsplit(":", 1)[1]


def auth_by_path(site) -> dict[str, set]:
    out: dict[str, set] = {}
    for _, path, _, headers in site.requests:
        out.setdefault(path, set()).add(headers.get("authorization"))
    return out


def build(a, b):
    a.set("/p.html", page_html("P", [para("private page")]))
    a.set("/away.html", b"", in_sitemap=True)
    a.redirect("/away.html", b.server.url("/landing.html"), status=302)
    a.resources["/away.html"].in_sitemap = True
    b.set("/landing.html", page_html("Landing", [para("other host")]))


def test_headers_go_to_every_request_of_the_site_and_never_off_it(two_sites, tmp_path, caplog):
    a, b = two_sites
    build(a, b)
    h = Harness(a, tmp_path)
    caplog.set_level(logging.DEBUG)
    rules = SiteRuleSet(SiteRules(headers=(("Authorization", SECRET),)))
    rep = h.run(site_rules=rules)
    seen = auth_by_path(a)
    assert {"/robots.txt", "/sitemap.xml", "/p.html", "/away.html"} <= seen.keys()
    assert all(v == {SECRET} for v in seen.values()), seen
    assert b.requests == []  # the redirect off the site was not followed
    assert rep.pages_failed == 1 and "not followed" in rep.errors[0]["error"]
    for text in (json.dumps(rep.to_dict()), caplog.text, repr(rules)):
        assert "s3cret" not in text


def test_an_allowed_host_gets_the_run_headers_but_not_another_sites_own(two_sites, tmp_path):
    a, b = two_sites
    build(a, b)
    h = Harness(a, tmp_path)
    allow = [f"127.0.0.1:{port_of(b)}"]
    # The run's header goes to both sites (b is one of the run's hosts now) ...
    rep = h.run(site_rules=SiteRuleSet(SiteRules(headers=(("Authorization", SECRET),))), allow_hosts=allow)
    assert rep.ok, rep.errors
    assert auth_by_path(b)["/landing.html"] == {SECRET}
    # ... a site's own header only to that site.
    b.clear_log()
    a.clear_log()
    own = SiteRuleSet(sites=((f"127.0.0.1:{port_of(a)}", SiteRules(headers=(("Authorization", SECRET),))),))
    rep = Harness(a, tmp_path / "again").run(site_rules=own, allow_hosts=allow)
    assert rep.ok, rep.errors
    assert auth_by_path(a)["/p.html"] == {SECRET}
    assert auth_by_path(b)["/landing.html"] == {None}


def test_a_missing_environment_variable_is_exit_2_naming_it(site, work):
    site.set("/p.html", page_html("P", [para("p")]))
    r = cli_run(site, work, "--header", "Authorization: env:PAGESYNC_TEST_NO_SUCH_VAR")
    assert r.returncode == 2
    line = one_error_line(r)
    assert "PAGESYNC_TEST_NO_SUCH_VAR is not set" in line and "Authorization" in line
    assert site.requests == [] and not (work / "s.db").exists()


def test_the_value_of_an_env_header_is_never_printed(site, work):
    site.set("/p.html", page_html("P", [para("p")]))
    site.error("/bad.html", 500)
    site.resources["/bad.html"].in_sitemap = True
    args = [
        "run",
        "--sitemap",
        site.server.url("/sitemap.xml"),
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        "--embedder",
        "fake",
        "-v",
        "--report",
        "rep.json",
        "--header",
        "Authorization: env:DOCS_TOKEN",
        "--header",
        "X-Plain: env:DOCS_TOKEN",
    ]
    r = cli(work, *args, env={"DOCS_TOKEN": SECRET})
    assert r.returncode == 1, r.stderr  # /bad.html failed
    assert {h.get("authorization") for _, p, _, h in site.requests if p == "/p.html"} == {SECRET}
    for text in (r.stdout, r.stderr, (work / "rep.json").read_text()):
        assert "s3cret" not in text
