"""`pagesync run`'s site flags on the command line: --include/--exclude/--no-default-excludes,
--select (a bad one is exit 2 before anything is fetched)."""

from __future__ import annotations

import json

from tests.cli_helpers import cli_run, one_error_line
from tests.helpers import page_html, para


def test_a_selector_that_is_no_css_is_exit_2_before_any_request(site, work):
    site.set("/p.html", page_html("P", [para("p")]))
    r = cli_run(site, work, "--select", "div[")
    assert r.returncode == 2
    assert "--select 'div[' is not a CSS selector" in one_error_line(r)
    assert site.requests == [] and not (work / "s.db").exists()


def test_exclude_include_and_the_default_excludes_from_the_command_line(site, work):
    for name in ("/guide/a.html", "/guide/b.html", "/blog/c.html", "/genindex.html"):
        site.set(name, page_html(name, [para(name)]))
    r = cli_run(
        site, work, "--include", "*/guide/*", "--include", "*/genindex.html", "--exclude", "*/b.html", report="rep.json"
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "rep.json").read_text())
    assert rep["pages_added"] == 1 and rep["pages_excluded"] == 3
    r = cli_run(
        site, work, "--no-default-excludes", "--include", "*/genindex.html", "--include", "*/guide/*", report="rep.json"
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "rep.json").read_text())
    assert rep["pages_added"] == 2 and rep["pages_excluded"] == 1  # genindex.html and b.html now; c.html still out
