"""A stand-in for an OpenAI-compatible embeddings server: as an `httpx.MockTransport`
handler for unit tests, or on 127.0.0.1 (`serve`) for the command line in a subprocess.

Vectors are `HashEmbedder`'s (equal texts, equal vectors); `usage.prompt_tokens` counts one
token per whitespace-separated word. `script` answers chosen requests otherwise (a 429 with
Retry-After, a 500, a 400), by the order they come in or by what they hold.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import httpx

from embedders import HashEmbedder

KEY = "sk-test-0123456789abcdefSECRET"


def words(text: str) -> int:
    return len(text.split())


class FakeOpenAI:
    """Answers GET /v1/models and POST /v1/embeddings as OpenAI does; records every request.

    `script(n, inputs)` may return an `httpx.Response` to answer the n-th (1-based) embeddings
    request otherwise (None: answer normally)."""

    def __init__(
        self,
        dimension: int = 8,
        key: str | None = KEY,
        models: tuple[str, ...] = ("m",),
        script: Callable[[int, list[str]], httpx.Response | None] | None = None,
        usage: bool = True,
        list_models: bool = True,
    ):
        self.dimension, self.key, self.models, self.script, self.usage = dimension, key, models, script, usage
        self.list_models = list_models  # False: no GET /models (404), as some servers have none
        self.embedder = HashEmbedder(dimension)
        self.requests: list[tuple[str, str, dict | None]] = []  # (method, path, json body)
        self.batches: list[list[str]] = []  # the inputs of each embeddings request answered 200
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.hold: Callable[[], None] | None = None  # called inside each embeddings request (a barrier)

    @property
    def embedding_requests(self) -> list[dict]:
        return [body for method, path, body in self.requests if path.endswith("/embeddings")]

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        with self.lock:
            self.requests.append((request.method, request.url.path, body))
            n = len(self.embedding_requests)
        if request.url.path.endswith("/models") and not self.list_models:
            return httpx.Response(404, json={"detail": "Not Found"})
        if self.key is not None and request.headers.get("authorization") != f"Bearer {self.key}":
            given = request.headers.get("authorization", "")[-6:]
            return httpx.Response(
                401,
                json={
                    "error": {
                        "message": f"Incorrect API key provided: sk-***{given}",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            )
        if request.url.path.endswith("/models"):
            return httpx.Response(
                200, json={"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
            )
        if not request.url.path.endswith("/embeddings"):
            return httpx.Response(404, json={"error": {"message": "not found"}})
        inputs = body["input"]
        if body["model"] not in self.models:
            return httpx.Response(404, json={"error": {"message": f"The model `{body['model']}` does not exist"}})
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.hold is not None:
                self.hold()
            scripted = self.script(n, inputs) if self.script else None
            if scripted is not None:
                return scripted
            dim = body.get("dimensions") or self.dimension
            vecs = HashEmbedder(dim).embed(inputs)
            with self.lock:
                self.batches.append(list(inputs))
            out = {
                "object": "list",
                "model": body["model"],
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)],
            }
            if self.usage:
                tokens = sum(words(t) for t in inputs)
                out["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
            return httpx.Response(200, json=out)
        finally:
            with self.lock:
                self.in_flight -= 1

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


def serve(fake: FakeOpenAI) -> tuple[ThreadingHTTPServer, str]:
    """`fake` on 127.0.0.1 (a daemon thread); returns the server and its base URL (…/v1)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            req = httpx.Request(self.command, f"http://fake{self.path}", headers=dict(self.headers), content=raw)
            resp = fake.handler(req)
            data = resp.read()
            self.send_response(resp.status_code)
            for k, v in resp.headers.items():
                if k.lower() not in ("content-length", "transfer-encoding"):
                    self.send_header(k, v)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
