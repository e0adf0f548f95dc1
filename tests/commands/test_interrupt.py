"""Ctrl-C ends a pass within seconds, whatever it is waiting for (a slow page, a model batch
in a worker thread), and leaves a state the next pass completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from tests.cli_helpers import ROOT, cli_build, cli_run, sitemap, stored

# Loaded by the pass's interpreter (sitecustomize on PYTHONPATH): the fake embedder becomes a
# slow model that says on stderr when a batch starts, then works for a minute.
SLOW_MODEL = """
import sys, time
import embedders.fake as fake

_embed = fake.HashEmbedder.embed

def embed(self, texts):
    print("test-model: batch started", file=sys.stderr, flush=True)
    time.sleep(60)
    return _embed(self, texts)

fake.HashEmbedder.embed = embed
"""
BOUND_S = 10  # generous: the pass itself ends in well under a second once interrupted


def _env(extra_path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [extra_path, str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def _wait_for_line(stream, marker: str, timeout: float) -> list[str]:
    """Read `stream` until a line holds `marker` (a reader thread: no polling sleeps)."""
    seen: list[str] = []
    found = threading.Event()

    def read():
        for line in stream:
            seen.append(line)
            if marker in line:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(timeout), "".join(seen)
    return seen


def test_ctrl_c_during_a_model_batch_and_a_slow_fetch_ends_the_pass_within_seconds(site, tmp_path):
    urls = cli_build(site, n=4)
    site.slow("/p3.html", 60)  # a fetch in flight too
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_MODEL)
    work = tmp_path / "work"
    work.mkdir()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sync",
            "run",
            "--sitemap",
            sitemap(site),
            "--qdrant-path",
            "q",
            "--state",
            "s.db",
            "--embedder",
            "fake",
            "--workers",
            "2",
            "--embed-batch",
            "1",
        ],
        cwd=work,
        env=_env(str(hook)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a test run started in the background ignores SIGINT.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _wait_for_line(p.stderr, "test-model: batch started", 60)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    print(f"pass ended {took:.2f}s after SIGINT")  # shown with -s
    assert p.returncode == 130 and took < BOUND_S, (p.returncode, took)

    site.slow("/p3.html", 0)
    r = cli_run(site, work)  # the plain fake embedder now
    assert r.returncode == 0, r.stderr
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert cli_run(site, fresh).returncode == 0
    strip = lambda pts: {
        i: {k: v for k, v in pl.items() if k not in ("fetched_at", "metadata")}  # noqa: E731
        for i, pl in pts.items()
    }
    assert strip(stored(work)) == strip(stored(fresh))
    assert {pl["url"] for pl in stored(work).values()} == set(urls)
