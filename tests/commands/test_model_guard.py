"""One collection, one model, from the command line: a run takes the collection's own model
when none is named (after a reindex too), `--full` switches no model, a crawl whose start
page is gone is exit 1 with nothing created, and a collection without points pins no model
(a run that writes nothing creates none)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sync.commands.cli import app
from sync.edges.edge_store import EdgeStore
from sync.edges.store import StoredPoint
from tests.cli_helpers import cli, cli_build, one_error_line, sitemap, state_db_rows, stored


@pytest.fixture
def cwd(work, monkeypatch):
    """The in-process command line, in `work`, without the caller's PAGESYNC_/QDRANT_ settings."""
    for name in list(os.environ):
        if name.startswith(("PAGESYNC_", "QDRANT_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(work)
    return work


def _run(site, work, *extra):
    return cli(work, "run", "--sitemap", sitemap(site), "--qdrant-path", "q", "--state", "s.db", *extra)


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _embedders(work: Path) -> set:
    return {p["embedder"] for p in stored(work).values()}


def _vector_size(work: Path) -> int | None:
    store = EdgeStore(work / "q", "pages")
    try:
        return store.vector_size()
    finally:
        store.close()


# -- (1) the model: the collection's own, --full or not ------------------------------------------
@pytest.mark.slow  # the command line as subprocesses
def test_a_full_run_without_embedder_keeps_the_collections_model(site, work):
    cli_build(site)
    assert _run(site, work, "--embedder", "fake-384").returncode == 0
    before = stored(work)
    r = _run(site, work, "--full", "--report", "r.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "r.json").read_text())
    assert rep["embedder"] == "fake-hash-384" and rep["chunks_embedded"] == 0
    assert stored(work) == before
    # another vector size, --full or not: exit 2 before anything is fetched
    site.clear_log()
    for extra in ((), ("--full",)):
        r = _run(site, work, "--embedder", "fake-8", *extra)
        assert r.returncode == 2 and "--embedder fake-384" in one_error_line(r)
    assert site.requests == [] and stored(work) == before


@pytest.mark.slow  # the command line as subprocesses
def test_a_run_after_a_reindex_uses_the_new_model(site, work):
    cli_build(site)
    assert _run(site, work, "--embedder", "fake-16").returncode == 0
    r = cli(work, "reindex", "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake-384")
    assert r.returncode == 0, r.stderr
    assert _embedders(work) == {"fake-hash-384"}
    r = _run(site, work, "--full", "--report", "r.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((work / "r.json").read_text())["embedder"] == "fake-hash-384"
    assert _embedders(work) == {"fake-hash-384"}
    site.clear_log()
    r = _run(site, work, "--embedder", "fake-16", "--full")  # the old model: not behind the alias any more
    assert r.returncode == 2 and "--embedder fake-384" in one_error_line(r)
    assert site.requests == []


def _points_of(work: Path, model_id: str, size: int) -> None:
    """A collection whose points name `model_id` (as another machine's pagesync made it)."""
    store = EdgeStore(work / "q", "pages")
    try:
        store.ensure_collection(size)
        store.upsert(
            [
                StoredPoint(
                    str(uuid.uuid4()), {"url": "https://example.com/a", "embedder": model_id, "text": "a"}, [1.0] * size
                )
            ]
        )
    finally:
        store.close()


@pytest.mark.parametrize(
    "model_id, says",
    [
        ("st:acme/not-here", "cannot run here"),  # a cached model's id, not on this machine
        ("st:/srv/models/docs", "cannot find by that name"),  # a folder's id: it names no folder
    ],
)
def test_the_collections_model_that_cannot_run_here_is_exit_2_naming_it(site, cwd, model_id, says):
    cli_build(site)
    _points_of(cwd, model_id, 4)
    r = _invoke("run", "--sitemap", sitemap(site), "--qdrant-path", "q", "--state", "s.db")
    assert r.exit_code == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and line.startswith("pagesync: error:"), line
    assert repr(model_id) in line and says in line and "--embedder" in line, line
    assert site.requests == []


# -- (2) a crawl whose start page is gone ----------------------------------------------------------
@pytest.mark.slow  # the command line as subprocesses
@pytest.mark.parametrize("status", [404, 410])
def test_a_crawl_whose_start_page_is_gone_is_exit_1_and_creates_nothing(site, work, status):
    cli_build(site)
    if status == 410:
        site.gone("/indx.html")
    start = site.server.url("/indx.html")
    r = cli(work, "run", "--crawl", start, "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake-384")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    said = [ln for ln in r.stderr.splitlines() if start in ln]
    assert said == [f"error {start}: crawl start page: HTTP {status}"], r.stderr
    assert "a page failed" not in r.stderr and "1 crawl start page gone" in r.stderr
    assert not (work / "q" / "pages").exists()
    assert state_db_rows(work / "s.db")[0] == []  # no page row
    # and nothing pins a model: a run with another embedder goes on
    r = _run(site, work, "--embedder", "fake-8")
    assert r.returncode == 0, r.stderr
    assert _vector_size(work) == 8


# -- (3) a collection without points pins no model ------------------------------------------------
@pytest.mark.slow  # the command line as subprocesses
def test_a_run_that_writes_nothing_creates_no_collection(site, work):
    r = _run(site, work, "--embedder", "fake-384")  # an empty sitemap: nothing to write
    assert r.returncode == 0, r.stderr
    assert not (work / "q" / "pages").exists()
    cli_build(site)
    r = _run(site, work, "--embedder", "fake-8")
    assert r.returncode == 0, r.stderr
    assert _vector_size(work) == 8 and _embedders(work) == {"fake-hash-8"}


def test_an_empty_collection_of_another_size_is_made_anew_at_the_first_write(site, cwd):
    cli_build(site)
    r = _invoke(
        "run",
        "--sitemap",
        site.server.url("/none.xml"),
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        "--embedder",
        "fake-384",
    )
    assert r.exit_code == 1  # a run into nothing: its record names fake-hash-384
    store = EdgeStore(cwd / "q", "pages")  # an empty collection, as an earlier version left one
    store.ensure_collection(384)
    store.close()
    dry = _invoke(
        "run", "--sitemap", sitemap(site), "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake-8", "--dry-run"
    )
    assert dry.exit_code == 0, dry.stderr
    assert _vector_size(cwd) == 384  # a dry run changes nothing
    r = _invoke("run", "--sitemap", sitemap(site), "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake-8")
    assert r.exit_code == 0, r.stderr
    assert _vector_size(cwd) == 8 and _embedders(cwd) == {"fake-hash-8"}
