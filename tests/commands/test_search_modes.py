"""`pagesync search --mode` through the command line: hybrid (the default), dense and keyword find
the chunk that holds an exact token, and an unknown mode is exit 2 with one line."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import cli, cli_build, cli_run, one_error_line, parallel
from tests.helpers import page_html

pytestmark = pytest.mark.slow


def test_each_mode_finds_the_chunk_that_holds_the_identifier(site, work):
    cli_build(site)
    site.set("/testing.html", page_html("Testing", ["Use the CliRunner to invoke a command in a test."]))
    assert cli_run(site, work).returncode == 0
    want = site.server.url("/testing.html")
    default, hybrid, keyword, dense = parallel(
        *[
            lambda m=m: cli(work, "search", "CliRunner", "--qdrant-path", "q", "--json", *m)
            for m in ([], ["--mode", "hybrid"], ["--mode", "keyword"], ["--mode", "dense"])
        ]
    )
    for r in (default, hybrid, keyword, dense):
        assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(default.stdout) == json.loads(hybrid.stdout)  # hybrid is the default
    assert json.loads(keyword.stdout)[0]["payload"]["url"] == want
    assert json.loads(hybrid.stdout)[0]["payload"]["url"] == want
    assert len(json.loads(dense.stdout)) == 3


def test_an_unknown_mode_is_exit_2_with_one_line(site, work):
    r = cli(work, "search", "x", "--mode", "fuzzy", "--qdrant-path", "q")
    assert r.returncode == 2
    assert "unknown search mode 'fuzzy'" in one_error_line(r)
