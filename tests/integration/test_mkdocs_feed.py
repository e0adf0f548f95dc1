"""A real MkDocs build (this project's own docs) served locally: after a one-page edit and a
rebuild, one `--policy deploys` pass fetches the search index and that page only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from demo.site_server import Site, SiteServer
from tests.helpers import Harness

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
FEED = "/search/search_index.json"


def build(src: Path, out: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--quiet",
            "--site-dir",
            str(out),
            "--config-file",
            str(src / "mkdocs.yml"),
        ],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]


def serve(site: Site, out: Path) -> None:
    """The built files as the site serves them (unchanged bytes keep their ETag)."""
    for f in sorted(out.rglob("*")):
        if f.is_file() and f.name != "sitemap.xml" and not f.name.endswith(".gz"):
            path = "/" + f.relative_to(out).as_posix()
            ctype = "text/html; charset=utf-8" if f.suffix == ".html" else "application/octet-stream"
            site.set(path, f.read_bytes(), content_type=ctype)


def test_one_page_edit_and_rebuild_fetches_the_feed_and_that_page(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", src / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", src / "docs")
    build(src, tmp_path / "site1")
    site = Site()
    with SiteServer(site) as server:
        site.server = server  # type: ignore[attr-defined]
        h = Harness(site, tmp_path)
        serve(site, tmp_path / "site1")
        first = h.run(policy="deploys")
        assert first.feed == "mkdocs" and first.pages_added > 20
        page = src / "docs" / "limits.md"
        page.write_text(page.read_text() + "\n\nOne more sentence about the limits.\n")
        h.now += timedelta(hours=6)
        build(src, tmp_path / "site2")
        serve(site, tmp_path / "site2")
        site.clear_log()
        rep = h.run(policy="deploys")
        fetched = [p for _, p, _, _ in site.requests if not p.startswith("/sitemap") and p != "/robots.txt"]
        assert fetched == [FEED, "/limits/index.html"] or fetched == [FEED, "/limits/"]
        assert rep.pages_due_by_feed == 1 and rep.pages_changed == 1 and rep.feed_trusted


MKDOCS_YML = "site_name: T\ntheme:\n  name: material\nnav:\n  - index.md\n  - a.md\n"


def test_a_crawl_with_no_sitemap_visits_the_pages_only_the_feed_names(tmp_path):
    """`run --crawl` alone on a real MkDocs build: the generator tag of a crawled page names
    the feed, and the page no link reaches (not in the nav) is visited from it, in the same
    pass; no other kind of feed is probed."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    src = tmp_path / "src"
    (src / "docs").mkdir(parents=True)
    (src / "mkdocs.yml").write_text(MKDOCS_YML)
    (src / "docs" / "index.md").write_text("# Home\n\nWelcome, see [page a](a.md).\n")
    (src / "docs" / "a.md").write_text("# A\n\nThe text of page a.\n")
    (src / "docs" / "orphan.md").write_text("# Orphan\n\nNo link reaches this page; the search index names it.\n")
    build(src, tmp_path / "site")
    site = Site()
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    with SiteServer(site) as server:
        serve(site, tmp_path / "site")
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "sync",
                "run",
                "--crawl",
                server.url("/"),
                "--policy",
                "deploys",
                "--embedder",
                "fake",
                "--qdrant-path",
                "q",
                "--state",
                "s.db",
                "--report",
                "r.json",
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        fetched = [p for _, p, _, _ in site.requests]
    report = json.loads((work / "r.json").read_text())
    assert report["feed"] == "mkdocs" and report["feed_trusted"] is True
    assert FEED in fetched and "/orphan/" in fetched
    assert not {"/searchindex.js", "/search-index.json", "/search-doc.json"} & set(fetched)  # named, not probed
    out = subprocess.run(
        [sys.executable, "-m", "sync", "export", "--qdrant-path", "q", "--state", "s.db"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    urls = {json.loads(line)["payload"]["url"] for line in out.stdout.splitlines()}
    assert server.url("/orphan/") in urls and server.url("/a/") in urls
