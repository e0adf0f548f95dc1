"""`pagesync run --crawl URL --max-pages N` from the command line, no sitemap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import DOCS, build_docs

ROOT = Path(__file__).resolve().parents[2]


def cli(work: Path, *args: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "sync", *args], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )


def test_run_crawl_from_the_command_line(site, tmp_path):
    build_docs(site)
    start = site.server.url("/index.html")
    r = cli(tmp_path, "run", "--crawl", start, "--embedder", "fake", "--report", "r.json", "-q")
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["pages_added"] == len(DOCS) and rep["crawl_complete"] is True
    assert "crawl reached 8 pages" in r.stdout + r.stderr
    r = cli(tmp_path, "run", "--crawl", start, "--max-pages", "4", "--embedder", "fake", "--report", "r.json", "-q")
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["pages_crawled"] == 4 and rep["crawl_complete"] is False
    bad = cli(tmp_path, "run", "--crawl", "ftp://x/", "--embedder", "fake")
    assert bad.returncode == 2 and "--crawl" in bad.stderr
