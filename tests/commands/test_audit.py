"""`pagesync audit` on a collection someone damaged by hand, and `audit --fix`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chunking import Splitter
from sync.commands.audit import audit_collection
from sync.edges.state import StateDB
from sync.edges.edge_store import EdgeStore
from sync.edges.store import StoredPoint
from tests.helpers import Harness, damage, page_html, para
from tests.property_helpers import comparable

ROOT = Path(__file__).resolve().parents[2]


def build_site(site, n=4):
    for i in range(n):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}", 80) for j in range(4)]))


def test_audit_finds_every_kind_of_damage(site, harness):
    build_site(site)
    harness.run()
    store = EdgeStore(harness.store_path, "pages")
    with StateDB(harness.state_path) as st:
        assert audit_collection(store, st).ok
        urls = damage(store, site)
        rep = audit_collection(store, st)
    store.close()
    assert not rep.ok
    assert rep.counts == {
        "orphans": 2,
        "stale": 1,
        "broken": 1,
        "missing": 0,
        "foreign": 1,
        "metadata": 0,
        "keywords": 0,
        "too_long": 0,
    }
    assert {e["url"] for e in rep.examples["orphans"]} == {urls["stray"]}
    assert rep.examples["stale"][0]["url"] == urls["old"]
    assert rep.reindex_urls == [urls["gap"]]


def test_missing_pages_are_found(site, harness):
    build_site(site, n=2)
    harness.run()
    store = EdgeStore(harness.store_path, "pages")
    with StateDB(harness.state_path) as st:
        gone = site.server.url("/p0.html")
        store.delete_pages([gone])
        rep = audit_collection(store, st)
    store.close()
    assert rep.counts["missing"] == 1 and rep.reindex_urls == [gone]


def test_a_point_with_another_title_than_the_state_is_stale_and_fix_rewrites_its_page(site, harness):
    """The audit compared hashes, not titles: points left with an old `title` (a title-only
    rewrite interrupted, a hand edit) passed as clean. They are stale now, and
    --fix re-indexes the page (its points are its current chunks: they are rewritten, never
    deleted first, so a failed re-fetch cannot leave the page without points)."""
    from sync.commands.audit import run_audit

    harness.splitter = Splitter()  # the CLI's settings, since the fix does the repair
    build_site(site, n=2)
    harness.run()
    url = site.server.url("/p0.html")
    clean = harness.points()
    vectors = harness.vectors()
    hit = sorted(pid for pid, p in clean.items() if p["url"] == url)[:2]
    store = EdgeStore(harness.store_path, "pages")
    try:
        store.upsert([StoredPoint(pid, {**clean[pid], "title": "Page 0 (old)"}, vectors[pid]) for pid in hit])
        with StateDB(harness.state_path) as st:
            rep = audit_collection(store, st)
            assert not rep.ok and rep.counts == {
                "orphans": 0,
                "stale": 2,
                "broken": 0,
                "missing": 0,
                "foreign": 0,
                "metadata": 0,
                "keywords": 0,
                "too_long": 0,
            }
            assert rep.examples["stale"] == [
                {"url": url, "points": 2, "title": "Page 0", "stored_title": "Page 0 (old)"}
            ]
            assert "2 points with an old title" in rep.render()
            assert rep.reindex_urls == [url] and rep.delete_ids == []
            out, ok, text = run_audit(store, st, fix=True, embedder_name="fake")
    finally:
        store.close()
    assert ok and out["fix"] == {**out["fix"], "deleted_points": 0, "reindexed_pages": 1}, text
    assert comparable(harness.points()) == comparable(clean)


@pytest.mark.slow  # the command line as subprocesses
def test_audit_cli_then_fix_leaves_a_clean_collection_equal_to_a_fresh_index(site, harness, tmp_path):
    harness.splitter = Splitter()  # the CLI's settings, since the CLI does the repair
    build_site(site)
    harness.run()
    store = EdgeStore(harness.store_path, "pages")
    damage(store, site)
    store.close()
    common = ["--qdrant-path", str(harness.store_path), "--state", str(harness.state_path)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("QDRANT_URL", None)

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "sync", *args, *common],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    found = cli("audit", "--json")
    assert found.returncode == 1, found.stderr
    counts = json.loads(found.stdout)["audit"]["counts"]
    assert counts["orphans"] == 2 and counts["stale"] == 1 and counts["broken"] == 1 and counts["foreign"] == 1

    fixed = cli("audit", "--fix", "--include-foreign", "--embedder", "fake", "--json")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    out = json.loads(fixed.stdout)
    assert out["after_fix"]["ok"] and out["fix"]["reindexed_pages"] == 1

    fresh = Harness(site, tmp_path / "fresh", splitter=Splitter(), stamp_site=False)
    fresh.run()
    assert comparable(harness.points()) == comparable(fresh.points())
    assert cli("audit").returncode == 0


def test_foreign_points_are_never_touched_without_the_flag(site, harness):
    build_site(site, n=1)
    harness.run()
    store = EdgeStore(harness.store_path, "pages")
    store.upsert([StoredPoint("00000000-0000-4000-8000-000000000002", {"mine": False}, [1.0] + [0.0] * 15)])
    store.close()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("QDRANT_URL", None)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sync",
            "audit",
            "--fix",
            "--embedder",
            "fake",
            "--qdrant-path",
            str(harness.store_path),
            "--state",
            str(harness.state_path),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "foreign" in r.stdout
    assert len(harness.points()) == len([p for p in harness.points().values()])
    assert "00000000-0000-4000-8000-000000000002" in harness.points()


def test_audit_finds_points_longer_than_their_model_reads(site, harness):
    # A collection chunked before chunks were sized in tokens: its points are counted with
    # their model's tokenizer (here a word count standing in for it) and `too_long` is found.
    from embedders.tokens import FunctionCounter

    build_site(site)
    harness.run()
    store = EdgeStore(harness.store_path, "pages")
    with StateDB(harness.state_path) as st:
        fits = audit_collection(
            store, st, counter_of=lambda e: FunctionCounter("words", 10_000, lambda t: len(t.split()))
        )
        short = audit_collection(store, st, counter_of=lambda e: FunctionCounter("words", 20, lambda t: len(t.split())))
    store.close()
    assert fits.ok and fits.counts["too_long"] == 0
    assert not short.ok and short.counts["too_long"] > 0
    assert short.examples["too_long"][0]["limit"] == 20
    assert set(short.reindex_urls) == {site.server.url(f"/p{i}.html") for i in range(4)}
