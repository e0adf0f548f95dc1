"""The command-line harness: `pagesync` run as a subprocess (`python -m sync ...`) in a working
directory (the `work` fixture of tests/conftest.py) against the `site` fixture, and what its
tests read back (the stored points, the state file, the one error line)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sync.edges.edge_store import EdgeStore
from tests.helpers import build_pages

ROOT = Path(__file__).resolve().parents[1]  # the repository
T0_ISO = "2026-01-01T00:00:00Z"  # a pass clock for `--now` (tests.helpers.T0 as the CLI writes it)
DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port
API_KEY = "sekret-key-123"  # an `--api-key` that must never be shown


def cli(work: Path, *args: str, input: str | None = None, env: dict[str, str] | None = None):
    """`pagesync *args` in `work` (no QDRANT_* from the environment, the hub offline); the
    CompletedProcess, text mode."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    full_env["HF_HUB_OFFLINE"] = "1"
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "sync", *args],
        cwd=work,
        env=full_env,
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
    )


def parallel(*calls):
    """Run independent CLI calls side by side (each is a `lambda: cli(...)`); results in order."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda f: f(), calls))


def one_error_line(r) -> str:
    """The contract's failure shape: one clear line on stderr, no traceback."""
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("pagesync: error:"), lines[0]
    return lines[0]


def cli_build(site, n: int = 3, sections: int = 3) -> list[str]:
    """The command-line tests' site: `build_pages` with three pages unless told; their URLs."""
    return build_pages(site, n, sections)


def sitemap(site) -> str:
    """The site's sitemap URL."""
    return site.server.url("/sitemap.xml")


def cli_run(site, work: Path, *extra: str, report: str | None = None):
    """`pagesync run` over the site's sitemap into ./q (embedded store) and ./s.db, with the
    fake embedder; `report` names a --report file."""
    args = ["run", "--sitemap", sitemap(site), "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake", *extra]
    if report:
        args += ["--report", report]
    return cli(work, *args)


def stored(work: Path, path: str = "q", collection: str = "pages") -> dict[str, dict]:
    """The embedded collection's points, read in-process ({id: payload}; cheaper than `export`)."""
    store = EdgeStore(work / path, collection)
    try:
        return {p.id: p.payload for p in store.scroll()}
    finally:
        store.close()


def state_db_rows(path: Path) -> tuple[list[tuple], int]:
    """The SQLite state file's page rows (by URL) and how many passes it recorded."""
    db = sqlite3.connect(str(path))
    try:
        pages = [tuple(r) for r in db.execute("SELECT * FROM pages ORDER BY url")]
        runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        db.close()
    return pages, runs
