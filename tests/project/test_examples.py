"""The CI example runs end to end against the embedded store, and fails on drift."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sync.edges.edge_store import EdgeStore
from sync.edges.store import StoredPoint
from tests.helpers import build_pages

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "run_ci_example.sh"


def run_example(site, work: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("QDRANT_URL", None)
    return subprocess.run(
        [
            "bash",
            str(SCRIPT),
            site.server.url("/sitemap.xml"),
            str(work),
            "--embedder",
            "fake",
            "--qdrant-path",
            str(work / "qdrant"),
            "--state",
            str(work / "state.db"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_workflow_file_runs_the_same_commands():
    wf = (ROOT / "examples" / "nightly-sync.yml").read_text()
    assert "pagesync run" in wf and "pagesync audit" in wf and "--report report.json" in wf
    assert "upload-artifact" in wf and "QDRANT_API_KEY: ${{ secrets.QDRANT_API_KEY }}" in wf
    # A stateless runner: run and audit read the state on the server, as pagesync.toml says.
    assert 'state = "qdrant"' in (ROOT / "examples" / "pagesync.toml").read_text()


@pytest.mark.slow  # the command line as subprocesses
def test_ci_example_end_to_end_then_fails_on_drift(site, tmp_path):
    build_pages(site, n=3)
    first = run_example(site, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["pages_added"] == 3 and report["errors"] == []
    assert json.loads((tmp_path / "audit.json").read_text())["audit"]["ok"]

    store = EdgeStore(tmp_path / "qdrant", "docs")
    # An orphaned chunk of this site (a page the state does not track); a point of another
    # site would be "foreign" (another writer's), which fails the audit as well.
    store.upsert(
        [
            StoredPoint(
                "00000000-0000-4000-8000-0000000000aa",
                {"url": site.server.url("/stray.html"), "content_hash": "0" * 64},
                [1.0] + [0.0] * 15,
            )
        ]
    )
    store.close()
    second = run_example(site, tmp_path)
    assert second.returncode == 1 and "audit exit 1" in second.stderr
    audit = json.loads((tmp_path / "audit.json").read_text())["audit"]
    assert audit["counts"]["orphans"] == 1


@pytest.mark.slow  # the command line as subprocesses
@pytest.mark.parametrize("doc, heading", [("docs/tasks/library.md", "# Use it from your app")])
def test_the_library_snippet_runs(site, tmp_path, doc, heading):
    """The library snippet of the README and of the docs, as written, against the local site (its
    sitemap URL and, to load no model, the fake embedder substituted): a user's first copy-paste
    must work."""
    import re

    text = (ROOT / doc).read_text()
    section = text[text.index(heading) :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "https://docs.example.com/sitemap.xml" in code and "make_embedder(None)" in code
    build_pages(site, n=2)
    code = code.replace("https://docs.example.com/sitemap.xml", site.server.url("/sitemap.xml"))
    code = code.replace("make_embedder(None)", 'make_embedder("fake")')
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 fetched" in r.stdout and "add 2" in r.stdout, r.stdout


@pytest.mark.slow  # the command line as subprocesses
def test_the_readme_app_snippet_reads_what_a_pass_wrote(site, tmp_path):
    """The README's app snippet, as written, on the embedded default a `pagesync run` filled
    (the fake embedder, so no model loads: the snippet finds it from the points)."""
    import re

    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Use it from my app") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "open_collection(" in code and "PagesyncRetriever" in code
    build_pages(site, n=2)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    sync = subprocess.run(
        [sys.executable, "-m", "sync", "run", "--sitemap", site.server.url("/sitemap.xml"), "--embedder", "fake", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sync.returncode == 0, sync.stderr
    code += "\nprint('retrieved', len(retriever.invoke('retries')))\n"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert site.server.url("/") in r.stdout and "retrieved 4" in r.stdout, r.stdout
