"""`pagesync watch` as a subprocess against a local site, on the fake embedder: an edit is
searchable after the poll that sees it, readers are never refused between passes, a failing
pass does not end the watcher, and SIGTERM mid-pass exits 0 leaving nothing to redo."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.cli_helpers import ROOT, cli, cli_build, cli_run, sitemap
from tests.helpers import page_html, para

pytestmark = [pytest.mark.slow, pytest.mark.integration]
WAIT_S = 60  # the bound of a wait on a condition (they normally hold within a second or two)
STOP_S = 10  # SIGTERM ends the watcher within this, as the docs promise


class Watch:
    """A running `pagesync watch`; its stderr lines are collected by a thread, and tests wait
    for a line to appear (a condition), never for a time."""

    def __init__(self, site, work: Path, *extra: str):
        env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
        env["HF_HUB_OFFLINE"] = "1"
        env["PYTHONFAULTHANDLER"] = "1"  # a watcher that does not stop dumps its threads' stacks (SIGABRT)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        args = [
            "watch",
            "--sitemap",
            sitemap(site),
            "--qdrant-path",
            "q",
            "--state",
            "s.db",
            "--embedder",
            "fake",
            "--poll",
            "1",
            "--metrics",
            "watch.prom",
            *extra,
        ]
        self.p = subprocess.Popen(
            [sys.executable, "-m", "sync", *args],
            cwd=work,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def count(self, marker: str) -> int:
        with self.changed:
            return sum(marker in ln for ln in self.lines)

    def wait_for(self, marker: str, times: int = 1) -> None:
        with self.changed:
            ok = self.changed.wait_for(
                lambda: sum(marker in ln for ln in self.lines) >= times or self.p.poll() is not None, WAIT_S
            )
            assert ok and sum(marker in ln for ln in self.lines) >= times, "".join(self.lines)

    def stop(self) -> int:
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired as exc:
            self.p.send_signal(signal.SIGABRT)  # faulthandler writes every thread's stack to stderr
            self.p.wait()
            self.reader.join(5)
            raise AssertionError(f"the watcher did not stop within {STOP_S} s:\n{''.join(self.lines)}") from exc
        finally:
            self.kill()

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def test_an_edit_is_searchable_after_the_poll_that_sees_it(site, work):
    cli_build(site, n=3)
    w = Watch(site, work)
    try:
        w.wait_for("watch: pass done")
        site.set("/p1.html", page_html("Page 1", [para("zebrafish migrate upstream in spring")]))
        w.wait_for("watch: pass started (deploy)")
        w.wait_for("watch: pass done", 2)
        # Read while the watcher runs: export finds the new text, a keyword search (the fake
        # embedder's vectors carry no meaning) ranks its chunk first.
        out = cli(work, "export", "--qdrant-path", "q", "--state", "s.db")
        assert out.returncode == 0, out.stderr
        texts = {json.loads(ln)["payload"]["text"]: json.loads(ln)["payload"]["url"] for ln in out.stdout.splitlines()}
        text = next(t for t in texts if "zebrafish" in t)
        hit = cli(
            work,
            "search",
            text,
            "--qdrant-path",
            "q",
            "--embedder",
            "fake",
            "--mode",
            "keyword",
            "--json",
            "--limit",
            "1",
        )
        assert hit.returncode == 0, hit.stderr
        assert json.loads(hit.stdout)[0]["payload"]["url"] == site.server.url("/p1.html")
        assert w.stop() == 0
    finally:
        w.kill()
    metrics = (work / "watch.prom").read_text()
    assert 'pagesync_watch_passes_total{collection="pages"} 2.0' in metrics
    assert 'pagesync_watch_deploys_seen_total{collection="pages"} 1.0' in metrics
    assert 'pagesync_pages_changed{collection="pages"} 1.0' in metrics


def test_readers_are_never_refused_between_passes(site, work):
    cli_build(site, n=3)
    w = Watch(site, work)
    try:
        w.wait_for("watch: pass done")
        for _ in range(2):  # the watcher polls the sitemap meanwhile (every second), and runs no pass
            for args in (["status"], ["export"], ["search", "p1-s1", "--embedder", "fake"]):
                r = cli(work, *args, "--qdrant-path", "q", *(["--state", "s.db"] if args[0] != "search" else []))
                assert r.returncode == 0, (args, r.stderr)
        assert w.count("watch: pass started") == 1
        assert w.stop() == 0
    finally:
        w.kill()


def test_a_failing_pass_is_retried_and_the_watcher_goes_on(site, work):
    cli_build(site, n=2)
    (work / "blocker").write_text("a file where the state's directory should be")
    w = Watch(site, work, "--state", "blocker/s.db")
    try:
        w.wait_for("watch: pass failed", 2)
        assert w.p.poll() is None
        assert 'pagesync_watch_pass_failures_total{collection="pages"} 2.0' in (work / "watch.prom").read_text()
        (work / "blocker").unlink()  # the cause goes away: the next retry runs
        w.wait_for("watch: pass done")
        assert w.stop() == 0
    finally:
        w.kill()
    assert "Traceback" not in "".join(w.lines)


class Delay(float):
    """A page's delay (`Resource.delay`) that says when the server starts waiting on it: the
    server reads it as a truth value first, then sleeps it."""

    def __new__(cls, seconds: float, started: threading.Event):
        self = super().__new__(cls, seconds)
        self.started = started  # type: ignore[attr-defined]
        return self

    def __bool__(self) -> bool:
        self.started.set()  # type: ignore[attr-defined]
        return True


def test_sigterm_mid_pass_exits_0_and_the_next_full_run_embeds_nothing(site, work):
    cli_build(site, n=3)
    w = Watch(site, work)
    try:
        w.wait_for("watch: pass done")
        in_flight = threading.Event()
        site.slow("/p2.html", Delay(60, in_flight))  # the next pass hangs on this page...
        site.touch("/p2.html", site.resources["/p2.html"].mtime + 3600)  # ...which a deploy moved
        assert in_flight.wait(WAIT_S), "".join(w.lines)
        assert w.stop() == 0
    finally:
        w.kill()
    assert "watch: stopped" in "".join(w.lines) and "Traceback" not in "".join(w.lines)
    site.slow("/p2.html", 0)
    r = cli_run(site, work, "--full", report="r.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "r.json").read_text())
    assert rep["chunks_embedded"] == 0 and rep["pages_failed"] == 0


def test_bad_options_are_exit_2_before_anything_runs(site, work):
    for extra, word in (
        (["--dry-run"], "--dry-run"),
        (["--now", "2026-01-01T00:00:00Z"], "--now"),
        (["--poll", "0"], "--poll"),
    ):
        r = cli(work, "watch", "--sitemap", sitemap(site), "--embedder", "fake", *extra)
        assert r.returncode == 2 and word in r.stderr, r.stderr
    assert not (work / ".pagesync").exists()
