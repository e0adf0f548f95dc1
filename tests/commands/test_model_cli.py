"""The command line with `--embedder st:...` and with another model than the collection's:
exit 2 in one line, nothing fetched or written; `reindex --embedder NEW` is the way over."""

from __future__ import annotations

import json

import numpy as np
import pytest

from chunking.split import embedded_text
from tests.cli_helpers import cli, cli_build, one_error_line, sitemap, stored
from tests.embedders.st_cache import cached_model


def _run(site, work, *extra, env=None):
    return cli(work, "run", "--sitemap", sitemap(site), "--qdrant-path", "q", "--state", "s.db", *extra, env=env)


def test_a_model_not_on_this_machine_is_exit_2_and_nothing_is_asked_of_the_network(site, work, tmp_path):
    cli_build(site)
    # Even with offline mode off and the hub's address pointed at a server that logs
    # every request, nothing is asked of it.
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_ENDPOINT": site.server.url(""),
    }
    r = _run(site, work, "--embedder", "st:acme/not-here", env=env)
    assert r.returncode == 2, r.stderr
    line = one_error_line(r)
    assert "st:acme/not-here is not on this machine" in line and "give the model's folder" in line
    assert site.requests == []
    assert not (work / "q").exists() and not (work / "s.db").exists()
    r = cli(work, "reindex", "--qdrant-path", "q", "--state", "s.db", "--embedder", "st:./models/nope")
    assert r.returncode == 2 and "no such folder" in one_error_line(r)


def test_another_model_on_an_existing_collection_is_exit_2_pointing_at_reindex(site, work):
    cli_build(site)
    assert _run(site, work, "--embedder", "fake").returncode == 0
    before = stored(work)
    site.clear_log()
    for extra in ((), ("--dry-run",), ("--full",)):
        r = _run(site, work, "--embedder", "fake-32", *extra)
        assert r.returncode == 2, r.stderr
        line = one_error_line(r)
        assert "16-dimensional vectors (of 'fake-hash-16')" in line, line
        assert "`pagesync reindex --embedder fake-32`" in line and "--embedder fake-16" in line, line
    assert site.requests == [] and stored(work) == before
    # readers too: a query embedded with another model than the points' is refused
    r = cli(work, "search", "p0", "--qdrant-path", "q", "--embedder", "fake-32")
    assert r.returncode == 2 and "fake-hash-16" in one_error_line(r)


@pytest.mark.model
@pytest.mark.slow  # the command line as subprocesses, each loading the model
def test_reindex_to_a_cached_model_by_name_then_run_by_its_folder_embeds_nothing(site, work, tmp_path, minilm):
    cli_build(site)
    snapshot = cached_model(tmp_path / "hf", "acme/docs-minilm")
    env = {"HF_HOME": str(tmp_path / "hf")}
    assert _run(site, work, "--embedder", "fake-384").returncode == 0  # the same size, another model
    before = stored(work)
    site.clear_log()

    r = _run(site, work, "--embedder", "st:acme/docs-minilm", env=env)
    assert r.returncode == 2, r.stderr
    line = one_error_line(r)
    assert "holds vectors of 'fake-hash-384'" in line and "`pagesync reindex --embedder st:acme/docs-minilm`" in line
    assert site.requests == [] and stored(work) == before

    r = cli(
        work, "reindex", "--qdrant-path", "q", "--state", "s.db", "--embedder", "st:acme/docs-minilm", "--json", env=env
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["switched"] and rep["embedder"] == "st:acme/docs-minilm" and rep["dimension"] == 384
    assert rep["text_sources"] == {"state": 3, "points": 0, "fetch": 0} and site.requests == []
    after = stored(work)
    assert {p["embedder"] for p in after.values()} == {"st:acme/docs-minilm"}
    assert rep["chunks_embedded"] == len({p["text"] for p in after.values()})

    # the same model by its folder is the same model id: nothing to embed
    r = _run(site, work, "--embedder", f"st:{snapshot}", "--full", "--report", "R.json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads((work / "R.json").read_text())["chunks_embedded"] == 0

    # search finds the model from the points' payload, and the vectors are the bundled model's
    r = cli(work, "search", "p1-s1", "--qdrant-path", "q", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert {h["payload"]["embedder"] for h in json.loads(r.stdout)} == {"st:acme/docs-minilm"}
    from sync.edges.edge_store import EdgeStore

    store = EdgeStore(work / "q", "pages")
    try:
        got = list(store.scroll(with_vectors=True))
    finally:
        store.close()
    want = minilm.embed([embedded_text(p.payload["text"], p.payload.get("headings") or []) for p in got])
    assert np.allclose([p.vector for p in got], want, atol=1e-5)
