"""Ctrl-C during a real pass of the bundled model, on ONNX Runtime and on torch: exit 130 with
the one interrupted line at every moment tried (the model loading, mid-batch, just after a page
was written), never an abort from the model's threads, and the state and collection stay sound."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from tests.cli_helpers import ROOT, sitemap
from tests.helpers import page_html, para

pytest.importorskip("onnxruntime", reason="the ONNX backend needs onnxruntime: pip install -e '.[model]'")
pytest.importorskip("torch", reason="the torch backend needs torch: pip install -e '.[model]'")

pytestmark = [pytest.mark.model, pytest.mark.slow]

# Loaded by the pass's interpreter (sitecustomize on PYTHONPATH): each call of the real model
# says on stderr that it started, then runs as it would.
ANNOUNCE = """
import sys
import embedders.onnx_backend as onnx_backend
import embedders.sentence as sentence

def announce(real):
    def embed(self, texts):
        print("test-model: batch started", file=sys.stderr, flush=True)
        return real(self, texts)
    return embed

for cls in (onnx_backend.OnnxMiniLMEmbedder, sentence.MiniLMEmbedder):
    cls.embed = announce(cls.embed)
"""
BATCH, ADDED = "test-model: batch started", "added "
# (backend, the line to wait for, how many of them): the first model call (the model is still
# loading), a later one (mid-inference), and just after the second page was written.
MOMENTS = [("minilm-onnx", BATCH, 1), ("minilm-onnx", BATCH, 3), ("minilm-onnx", ADDED, 2), ("minilm-torch", BATCH, 2)]


class Lines:
    """Every stderr line of a process, read by a thread (no polling): wait for the n-th holding a marker."""

    def __init__(self, stream) -> None:
        self.seen: list[str] = []
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            with self.changed:
                self.seen.append(line)
                self.changed.notify_all()
        with self.changed:
            self.seen.append("")  # end of stream
            self.changed.notify_all()

    def wait_for(self, marker: str, n: int, timeout: float) -> None:
        def reached() -> bool:
            return sum(marker in ln for ln in self.seen) >= n or (bool(self.seen) and self.seen[-1] == "")

        with self.changed:
            assert self.changed.wait_for(reached, timeout), "".join(self.seen)
            assert sum(marker in ln for ln in self.seen) >= n, "the pass ended first:\n" + "".join(self.seen)

    def text(self) -> str:
        self.thread.join(timeout=30)
        return "".join(self.seen)


def _env(hook: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QDRANT_", "PAGESYNC_"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [hook, str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def test_ctrl_c_while_the_bundled_model_embeds_is_exit_130_at_every_moment(site, tmp_path):
    for i in range(24):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}", words=120) for j in range(6)]))
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(ANNOUNCE)
    work = tmp_path / "work"
    work.mkdir()
    for backend, marker, n in MOMENTS:  # one working directory: each pass resumes the last
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
                backend,
                "--embed-batch",
                "8",
                "--workers",
                "2",
                "-v",
            ],
            cwd=work,
            env=_env(str(hook)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # As from a terminal: a test run started in the background ignores SIGINT.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        lines = Lines(p.stderr)
        try:
            lines.wait_for(marker, n, 60)
            p.send_signal(signal.SIGINT)
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        err = lines.text()
        moment = f"{backend}, at {marker.strip()!r} #{n}"
        assert p.returncode == 130, (moment, p.returncode, err)  # -6: SIGABRT from the model's threads
        assert "terminate called" not in err and "Traceback" not in err, (moment, err)
        assert err.strip().splitlines()[-1].startswith("pagesync: the pass was interrupted"), (moment, err)

    # What the interrupted passes wrote is consistent: the audit finds nothing to repair.
    a = subprocess.run(
        [sys.executable, "-m", "sync", "audit", "--qdrant-path", "q", "--state", "s.db"],
        cwd=work,
        env=_env(""),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert a.returncode == 0, a.stdout + a.stderr
