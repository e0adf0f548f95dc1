"""`--config FILE`, `./pagesync.toml` and `PAGESYNC_*` variables at the command line: every
command takes the keys it has, flags win over the file, the file over the environment."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sync.commands.cli import app
from tests.helpers import DOCS, build_docs, page_html, para


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """A fresh working directory and an environment without PAGESYNC_* or QDRANT_* variables."""
    for name in list(os.environ):
        if name.startswith(("PAGESYNC_", "QDRANT_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def error_line(r) -> str:
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


# `status` on a fresh directory names the state path it looked for: which layer gave --state.
@pytest.mark.parametrize(
    "flag, file, env, used",
    [
        (None, None, None, ".pagesync/state.db"),
        (None, None, "e.db", "e.db"),
        (None, "f.db", None, "f.db"),
        (None, "f.db", "e.db", "f.db"),
        ("c.db", None, None, "c.db"),
        ("c.db", None, "e.db", "c.db"),
        ("c.db", "f.db", None, "c.db"),
        ("c.db", "f.db", "e.db", "c.db"),
    ],
)
def test_flags_over_the_file_over_the_environment(cwd, flag, file, env, used):
    if file:
        (cwd / "pagesync.toml").write_text(f'state = "{file}"\n')
    r = invoke("status", *(["--state", flag] if flag else []), env={"PAGESYNC_STATE": env} if env else None)
    assert r.exit_code == 2
    assert error_line(r) == f"pagesync: error: no page state at {used}: run 'pagesync run' first"


def test_qdrant_url_from_the_environment_ranks_below_the_file(cwd):
    # The file names the embedded store (no server): QDRANT_URL alone would name a server.
    (cwd / "pagesync.toml").write_text('qdrant_url = ""\nstate = "s.db"\n')
    r = invoke("status", env={"QDRANT_URL": "http://127.0.0.1:9"})
    assert "no page state at s.db" in error_line(r)


def test_an_unknown_key_is_exit_2_naming_it_and_the_nearest(cwd):
    (cwd / "pagesync.toml").write_text('colection = "docs"\n')
    for command in ("run", "status", "audit", "export"):
        r = invoke(command)
        assert r.exit_code == 2
        assert error_line(r) == "pagesync: error: pagesync.toml: unknown key 'colection' (did you mean 'collection'?)"


def test_keys_of_other_commands_are_known_and_ignored(cwd):
    # embed_batch and sitemap are run's; status reads the same file and ignores them.
    (cwd / "pagesync.toml").write_text(
        'sitemap = ["https://a.example/s.xml"]\nembed_batch = 8\nstate = "x.db"\n'
        '[[site]]\nurl = "https://b.example/"\nexclude = ["*/genindex.html"]\n'
    )
    r = invoke("status")
    assert "no page state at x.db" in error_line(r)


def test_a_value_of_the_wrong_type_is_named_by_its_source(cwd):
    (cwd / "cfg.toml").write_text("workers = 0\n")
    r = invoke("run", "--config", "cfg.toml")
    assert r.exit_code == 2
    line = error_line(r)
    assert line.startswith("pagesync: error: cfg.toml: workers: ") and "1" in line
    r = invoke("status", env={"PAGESYNC_NOW": "yesterday"})
    assert r.exit_code == 2 and "not ISO 8601" in error_line(r)
    r = invoke("run", env={"PAGESYNC_FULL": "maybe"})
    assert r.exit_code == 2 and "PAGESYNC_FULL='maybe'" in error_line(r)


@pytest.mark.parametrize(
    "text, message",
    [
        ("collection = ", "cfg.toml: not valid TOML"),
        (None, "cfg.toml: no such configuration file"),
    ],
)
def test_a_file_that_cannot_be_read_is_exit_2(cwd, text, message):
    if text is not None:
        (cwd / "cfg.toml").write_text(text)
    r = invoke("status", "--config", "cfg.toml")
    assert r.exit_code == 2 and message in error_line(r)


def test_pagesync_config_names_the_file(cwd):
    (cwd / "other.toml").write_text('state = "o.db"\n')
    r = invoke("status", env={"PAGESYNC_CONFIG": "other.toml"})
    assert "no page state at o.db" in error_line(r)


def test_a_run_and_the_commands_after_it_need_no_flags(site, cwd):
    for i in range(3):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}") for j in range(2)]))
    site.set("/extra.html", page_html("Extra", [para("extra")]), in_sitemap=False)
    (cwd / "pagesync.toml").write_text(
        'collection = "docs"\nqdrant_path = "store"\nstate = "state.db"\nembedder = "fake"\n'
        f'[[site]]\nsitemap = "{site.server.url("/sitemap.xml")}"\n'
        f'[[site]]\nurl = ["{site.server.url("/extra.html")}"]\n'
    )
    r = invoke("run", "--report", "r.json")
    assert r.exit_code == 0, r.stderr
    rep = json.loads(Path("r.json").read_text())
    assert rep["collection"] == "docs" and rep["pages_added"] == 4 and rep["pages_in_sitemaps"] == 3
    status = invoke("status", "--json")
    assert status.exit_code == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["pages_tracked"] == 4 and info["oldest_visit_age_s"] >= 0 and info["oldest_visit_at"]
    assert invoke("audit").exit_code == 0
    hits = invoke("search", "Extra", "--json")
    assert hits.exit_code == 0, hits.stderr
    assert json.loads(hits.stdout)
    # A --url on the command line replaces the file's sites: their sitemap is not read.
    r = invoke("run", "--url", site.server.url("/extra.html"), "--report", "r2.json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(Path("r2.json").read_text())["pages_in_sitemaps"] == 0


def test_a_crawl_and_its_site_rules_come_from_the_file(site, cwd):
    """A Sphinx-like site with no sitemap, driven by pagesync.toml alone: the crawl starts
    where the [[site]] says, its exclude keeps a page out, the default excludes keep the
    index and search pages out, and a top-level key (max_pages) bounds it."""
    build_docs(site)
    (cwd / "pagesync.toml").write_text(
        'qdrant_path = "store"\nstate = "state.db"\nembedder = "fake"\nmax_pages = 100\n'
        f'[[site]]\ncrawl = ["{site.server.url("/index.html")}"]\nexclude = ["*/changes.html"]\n'
    )
    r = invoke("run", "--report", "r.json")
    assert r.exit_code == 0, r.stderr
    rep = json.loads(Path("r.json").read_text())
    assert rep["crawl_complete"] is True
    assert rep["pages_added"] == len(DOCS) - 1  # every content page but the excluded one
    urls = {p["url"] for p in json.loads(invoke("status", "--pages", "--json").stdout)["page_list"]}
    assert urls == {site.server.url(f"/{p}.html") for p in DOCS if p != "changes"}


@pytest.mark.parametrize("doc", ["README.md", "docs/configuration.md", "docs/tasks/nightly-ci.md"])
def test_the_documented_config_files_hold_only_known_keys(doc):
    import re
    import tomllib

    import typer.main

    from sync.commands.config_file import known_keys
    from sync.core.config import parse_file

    text = (Path(__file__).resolve().parents[2] / doc).read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    cfg = parse_file(tomllib.loads(block), known_keys(typer.main.get_command(app)), doc)
    assert cfg.sites


@pytest.mark.parametrize("where", ["file", "site", "env"])
def test_audit_fix_and_reindex_read_the_site_rules_of_the_file_and_the_environment(cwd, where):
    """Their rules are run's: a selector no CSS parser reads is exit 2 before anything is
    opened, wherever it is set; a read-only audit needs no rules."""
    bad = "div["
    env = {"PAGESYNC_SELECT": bad} if where == "env" else None
    toml = 'state = "s.db"\n'
    if where == "file":
        toml += f'select = "{bad}"\n'
    if where == "site":
        toml += f'[[site]]\nsitemap = "https://a.example/sitemap.xml"\nselect = "{bad}"\n'
    (cwd / "pagesync.toml").write_text(toml)
    for args in (["reindex"], ["audit", "--fix"]):
        r = invoke(*args, env=env)
        assert r.exit_code == 2 and "is not a CSS selector" in error_line(r), (args, r.stderr)
    r = invoke("audit", env=env)
    assert r.exit_code == 2 and "no page state at s.db" in error_line(r)
    assert not (cwd / "s.db").exists()


def test_a_header_variable_not_set_is_exit_2_for_reindex_too(cwd):
    (cwd / "pagesync.toml").write_text('state = "s.db"\nheader = ["Authorization: env:PAGESYNC_TEST_NO_VAR"]\n')
    r = invoke("reindex")
    assert r.exit_code == 2 and "PAGESYNC_TEST_NO_VAR is not set" in error_line(r)
