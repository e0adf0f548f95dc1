"""`pagesync run --changed URL` and `--changed-from FILE|-`, as subprocesses: the named pages
are visited now, nothing else that is not due; a URL outside the run's scope is exit 2."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import T0_ISO, cli
from tests.helpers import page_html, para

pytestmark = pytest.mark.slow
PAGES = [f"/c{i}.html" for i in range(4)]


@pytest.fixture
def synced(site, tmp_path):
    for p in PAGES:
        site.set(p, page_html(p, [para(p)]))
    sm = site.server.url("/sitemap.xml")
    args = ("--sitemap", sm, "--embedder", "fake", "--qdrant-path", "q", "--state", "s.db")
    r = cli(tmp_path, "run", *args, "--now", T0_ISO)
    assert r.returncode == 0, r.stderr
    site.clear_log()
    return args


def visited(site) -> list[str]:
    return sorted(p for _, p, _, _ in site.requests if p.endswith(".html"))


def test_changed_pages_are_visited_now_and_nothing_else(site, tmp_path, synced):
    site.set("/c2.html", page_html("/c2.html", [para("new text")]))
    r = cli(
        tmp_path,
        "run",
        *synced,
        "--now",
        "2026-01-01T01:00:00Z",
        "--changed",
        site.server.url("/c2.html"),
        "--report",
        "r.json",
    )
    assert r.returncode == 0, r.stderr
    assert visited(site) == ["/c2.html"]
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["pages_changed"] == 1 and rep["pages_changed_given"] == 1


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_changed_from_a_file_or_stdin(site, tmp_path, synced, source):
    urls = "\n".join([site.server.url("/c0.html"), "", "# a comment", site.server.url("/c3.html")]) + "\n"
    if source == "file":
        (tmp_path / "changed.txt").write_text(urls)
        r = cli(tmp_path, "run", *synced, "--now", "2026-01-01T01:00:00Z", "--changed-from", "changed.txt")
    else:
        r = cli(tmp_path, "run", *synced, "--now", "2026-01-01T01:00:00Z", "--changed-from", "-", input=urls)
    assert r.returncode == 0, r.stderr
    assert visited(site) == ["/c0.html", "/c3.html"]


def test_a_changed_url_outside_the_scope_is_exit_2_naming_it(site, tmp_path, synced):
    r = cli(tmp_path, "run", *synced, "--now", "2026-01-01T01:00:00Z", "--changed", "https://elsewhere.example/x")
    assert r.returncode == 2
    assert "https://elsewhere.example/x" in r.stderr and "scope" in r.stderr
    assert visited(site) == []


def test_an_unreadable_changed_from_is_exit_2(site, tmp_path, synced):
    r = cli(tmp_path, "run", *synced, "--changed-from", "missing.txt")
    assert r.returncode == 2 and "missing.txt" in r.stderr
