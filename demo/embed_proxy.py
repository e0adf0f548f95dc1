"""A recording, fault-injecting HTTP proxy in front of an embeddings server, on 127.0.0.1.

Tests and the bench put it between pagesync and a real OpenAI-compatible server to see
what was sent (each `/embeddings` request's inputs, its status, when it started and
ended, the tokens the server counted) and to make the server answer with errors
(`fail_next(2, 429, {"Retry-After": "1"})`) without touching the server itself.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

__all__ = ["EmbedProxy", "Exchange"]

# hop-by-hop headers (RFC 9110 7.6.1) and the ones httpx sets itself
_SKIP = {
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
    "proxy-connection",
    "accept-encoding",
}


@dataclass
class Exchange:
    """One `/embeddings` request seen by the proxy."""

    inputs: list[str]
    status: int
    started: float  # time.monotonic()
    ended: float
    tokens: int = 0  # the server's usage.total_tokens (0 for an error answer)
    injected: bool = False  # the proxy answered it with a fault; the server never saw it


@dataclass
class _Fault:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    match: Callable[[list[str]], bool] | None = None  # None: any embeddings request


class EmbedProxy:
    """`with EmbedProxy("http://127.0.0.1:P") as proxy:` — `proxy.base_url` mirrors the upstream's paths."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self.other_requests: list[str] = []  # paths of requests other than embeddings
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=300.0, limits=httpx.Limits(max_connections=64))
        handler = type("Handler", (_Handler,), {"proxy": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.root_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def url(self, path: str = "") -> str:
        return self.root_url + path

    # -- what tests ask ----------------------------------------------------------------------
    def fail_next(
        self,
        n: int,
        status: int = 429,
        headers: dict[str, str] | None = None,
        match: Callable[[list[str]], bool] | None = None,
    ) -> None:
        """Answer the next `n` embeddings requests (those whose inputs `match`, when given) with
        `status` and `headers` instead of forwarding them."""
        with self._lock:
            self._faults.extend(_Fault(status, dict(headers or {}), match) for _ in range(n))

    def clear(self) -> None:
        with self._lock:
            self.exchanges.clear()
            self.other_requests.clear()

    def served(self) -> list[Exchange]:
        """The exchanges the server answered with 200."""
        with self._lock:
            return [e for e in self.exchanges if e.status == 200 and not e.injected]

    def texts_sent(self) -> list[str]:
        """Every input of every successful embeddings request, in arrival order."""
        return [t for e in self.served() for t in e.inputs]

    def tokens(self) -> int:
        return sum(e.tokens for e in self.served())

    # -- serving -----------------------------------------------------------------------------
    def _take_fault(self, inputs: list[str]) -> _Fault | None:
        with self._lock:
            for i, fault in enumerate(self._faults):
                if fault.match is None or fault.match(inputs):
                    return self._faults.pop(i)
            return None

    def _record(self, ex: Exchange) -> None:
        with self._lock:
            self.exchanges.append(ex)

    def __enter__(self) -> "EmbedProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._client.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real server
    proxy: EmbedProxy

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._forward(b"")

    def do_POST(self) -> None:  # noqa: N802
        self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _forward(self, body: bytes) -> None:
        started = time.monotonic()
        is_embed = self.command == "POST" and self.path.rstrip("/").endswith("/embeddings")
        if not is_embed:
            with self.proxy._lock:
                self.proxy.other_requests.append(self.path)
        inputs = _inputs(body) if is_embed else []
        fault = self.proxy._take_fault(inputs) if is_embed else None
        if fault is not None:
            payload = json.dumps({"error": {"message": f"injected {fault.status}", "type": "injected"}}).encode()
            # `ended` is taken before the answer goes out: the client cannot have it earlier
            self.proxy._record(Exchange(inputs, fault.status, started, time.monotonic(), injected=True))
            self._reply(fault.status, {"content-type": "application/json", **fault.headers}, payload)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _SKIP}
        try:
            r = self.proxy._client.request(self.command, self.proxy.upstream + self.path, headers=headers, content=body)
        except httpx.HTTPError as e:
            self._reply(502, {"content-type": "text/plain"}, f"upstream: {e}".encode())
            return
        out = {k: v for k, v in r.headers.items() if k.lower() not in _SKIP | {"content-encoding"}}
        if is_embed:
            self.proxy._record(
                Exchange(
                    inputs, r.status_code, started, time.monotonic(), tokens=_tokens(r) if r.status_code == 200 else 0
                )
            )
        self._reply(r.status_code, out, r.content)

    def _reply(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _inputs(body: bytes) -> list[str]:
    try:
        got = json.loads(body or b"{}").get("input", [])
    except (ValueError, AttributeError):
        return []
    return [got] if isinstance(got, str) else list(got)


def _tokens(r: httpx.Response) -> int:
    try:
        return int(r.json().get("usage", {}).get("total_tokens") or 0)
    except (ValueError, AttributeError):
        return 0
