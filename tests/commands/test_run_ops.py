"""`run --max-failed-share` (the failure budget) and `run --metrics` (Prometheus text), end to end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sync.commands.cli import app
from tests.helpers import page_html, para

prometheus = pytest.importorskip(
    "prometheus_client.parser", reason="prometheus-client is a dependency: pip install -e ."
)


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("PAGESYNC_", "QDRANT_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def ten_pages_one_failing(site) -> None:
    for i in range(10):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}") for j in range(2)]))
    site.error("/p3.html", 500)


def run(site, *extra: str):
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
        "--report",
        "r.json",
        *extra,
    ]
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize("budget, code", [(None, 1), ("0", 1), ("0.05", 1), ("0.1", 0), ("0.5", 0)])
def test_failed_pages_within_the_budget_are_exit_0(site, cwd, budget, code):
    ten_pages_one_failing(site)
    r = run(site, *(["--max-failed-share", budget] if budget else []))
    assert r.exit_code == code, r.stderr
    rep = json.loads(Path("r.json").read_text())
    assert rep["pages_failed"] == 1 and rep["pages_visited"] == 10 and rep["pages_failed_share"] == 0.1
    assert [e["url"] for e in rep["errors"]] == [site.server.url("/p3.html")]
    summary = r.stderr.strip().splitlines()[-1]
    assert "1 failed" in summary  # the summary still says so
    assert ("within --max-failed-share" in summary) is (code == 0)


def test_a_sitemap_error_is_exit_1_whatever_the_budget(site, cwd):
    ten_pages_one_failing(site)
    site.sitemap_mode = "missing"
    assert run(site, "--max-failed-share", "1").exit_code == 1


def test_metrics_file_holds_the_report_and_the_freshness(site, cwd):
    ten_pages_one_failing(site)
    r = run(site, "--metrics", "textfile/pagesync.prom", "--max-failed-share", "0.2", "--now", "2026-01-01T00:00:00Z")
    assert r.exit_code == 0, r.stderr
    text = Path("textfile/pagesync.prom").read_text()
    got = {s.name: s for fam in prometheus.text_string_to_metric_families(text) for s in fam.samples}
    rep = json.loads(Path("r.json").read_text())
    for key, value in rep.items():
        if isinstance(value, (int, float)):  # bools included, as 0/1
            assert got[f"pagesync_{key}"].value == float(value), key
            assert got[f"pagesync_{key}"].labels == {"collection": "pages"}
    assert got["pagesync_pages_added"].value == 9
    assert got["pagesync_status_pages_tracked"].value == 10
    assert got["pagesync_status_pages_due"].value == 0  # visited: due again later (the failed one backs off)
    assert got["pagesync_status_oldest_visit_age_seconds"].value == 0.0  # every page visited at this pass's clock


@pytest.mark.parametrize("flag", ["--metrics", "--report"])
@pytest.mark.parametrize("where", ["afile/out", "adir"])
def test_an_output_path_that_cannot_be_a_file_is_exit_2_before_anything_is_written(site, cwd, flag, where):
    """Found after the pass, it would be exit 2 ("nothing written") with the collection written."""
    ten_pages_one_failing(site)
    Path("afile").write_text("")
    Path("adir").mkdir()
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
        flag,
        where,
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.stderr
    if not (flag == "--metrics" and where == "adir"):  # that one click refuses itself (dir_okay=False)
        assert r.stderr.startswith(f"pagesync: error: {flag} {where}") and len(r.stderr.strip().splitlines()) == 1
    assert not Path("s.db").exists() and not Path("q").exists()
