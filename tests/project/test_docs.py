"""The documentation: the README stays short, the MkDocs site builds with --strict (every link and
anchor resolves, every generated option table renders), and what a user reads speaks of the
product, not of the project's history."""

from __future__ import annotations

import html
import json
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
# Words that belong to the project's history, not to what a user reads.
HISTORY = re.compile(r"\bissues? #?\d+|\btrials?\b|\bsessions?\b|\bthe seed\b|\btargets? \d+|\brow \d+", re.I)


def doc_sources() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def history_words(text: str) -> list[str]:
    return [m.group() for m in HISTORY.finditer(text)]


@pytest.mark.parametrize(
    "text, found",
    [
        ("as issue 5 said", ["issue 5"]),
        ("the user trial's shape", ["trial"]),
        ("the seed's rule", ["the seed"]),
        ("target 1 met", ["target 1"]),
        ("in this session", ["session"]),
        ("halve-double: halve the interval on a change", []),
        ("a random seed for the test", []),
    ],
)
def test_history_words_are_recognised(text, found):
    assert history_words(text) == found


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


@pytest.mark.parametrize("path", doc_sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_history_words_in_what_users_read(path):
    assert history_words(path.read_text()) == [], path


def test_every_docs_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    assert pages and [p for p in pages if p not in nav] == []


def test_docs_build_strict(tmp_path):
    if any(importlib.util.find_spec(m) is None for m in ("mkdocs", "material", "mkdocstrings_handlers")):
        pytest.skip("mkdocs-material or mkdocstrings is not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    run_page = (site / "commands" / "run" / "index.html").read_text()
    assert "--max-delete-share" in run_page and "<!-- options:" not in run_page  # the generated table
    api = html.unescape(re.sub(r"<[^>]+>", "", (site / "reference" / "api" / "index.html").read_text()))
    assert "run_pass(" in api and "max_fetches" in api and "StateLockedError" in api  # read from the code
    for page in site.rglob("*.html"):
        article = re.search(r"<article.*?</article>", page.read_text(), re.S)
        if article:  # the generated option tables too: what the command line's help says
            text = html.unescape(re.sub(r"<[^>]+>", " ", article.group()))
            assert history_words(text) == [], page.relative_to(site)


@pytest.mark.slow  # the demo drives the command line as subprocesses
def test_the_demo_ends_with_a_collection_equal_to_a_fresh_index(tmp_path):
    """`make demo`, on the fake embedder: edits synced, then the same as a fresh full index."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run(
        [sys.executable, str(ROOT / "demo" / "run_demo.py"), "--embedder", "fake", "--work", str(tmp_path / "work")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "  yes: " in r.stdout and "clean" in r.stdout


@pytest.mark.slow  # the demo drives the command line as subprocesses
def test_the_demo_syncs_the_docs_site(tmp_path):
    """`make demo-docs`, on the fake embedder: the built docs are indexed; a redeploy that gives
    every page one new lastmod fetches nothing; one edited page embeds only its new text."""
    if any(importlib.util.find_spec(m) is None for m in ("mkdocs", "material", "mkdocstrings_handlers")):
        pytest.skip("mkdocs-material or mkdocstrings is not installed (pip install -e '.[docs]')")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "demo" / "run_demo.py"),
            "--docs",
            "--embedder",
            "fake",
            "--work",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    first, redeploy, edit = (json.loads((tmp_path / "work" / f"report-{i}.json").read_text()) for i in (1, 2, 3))
    pages = len(list((ROOT / "docs").rglob("*.md")))
    assert first["pages_added"] == pages and first["chunks_written"] > pages
    assert redeploy["pages_fetched"] == 0 and redeploy["chunks_written"] == 0
    # /commands/search/ is read whole (only a page's markup tells a docs tool's search page): unchanged, not a 304
    assert edit["pages_changed"] == 1 and edit["pages_not_modified"] == pages - 2 and edit["pages_unchanged"] == 1
    assert 1 <= edit["chunks_embedded"] < edit["chunks_written"] and edit["chunks_reused"] > 0
    assert "clean" in r.stdout
