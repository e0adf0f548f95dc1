"""Secrets a user gives pagesync never come back out, through the command line as a
subprocess: a password in OPENAI_BASE_URL or --qdrant-url (as is, URL-encoded, or as the
base64 Basic header httpx derives from it, echoed by a server), a Qdrant API key holding
quotes and backslashes; not in stderr, stdout, the report, the state or the cache file."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.cli_helpers import DEAD, cli, cli_build, one_error_line, sitemap
from tests.embedders.fake_openai import FakeOpenAI, serve

pytestmark = pytest.mark.slow

PASSWORD = "hunter2pw"
USERINFO = f"me:{PASSWORD}"
API_KEY = 'K"ey\\secret-42'  # a quote and a backslash: JSON-escaped, then repr'd, when echoed


def forms(secret: str) -> list[str]:
    """The encodings a leak would show it in (the masking's own tests cover more)."""
    once = json.dumps(secret)[1:-1]
    return [secret, base64.b64encode(secret.encode()).decode(), once, repr(once.encode())[2:-1], repr(secret)[1:-1]]


def assert_nowhere(secret: str, *texts: str) -> None:
    for form in forms(secret):
        for text in texts:
            assert form not in text, (form, text[:2000])


class EchoingOpenAI(FakeOpenAI):
    """Serves the size probe, then refuses every request quoting its Authorization header."""

    def __init__(self) -> None:
        super().__init__(dimension=8, key=None, script=self.refuse)
        self.auth: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.auth.append(request.headers.get("authorization", ""))
        return super().handler(request)

    def refuse(self, n: int, inputs: list[str]) -> httpx.Response | None:
        if n == 1:
            return None  # the probe: the vector size is learned and kept in the cache file
        return httpx.Response(400, json={"error": {"message": f"bad request with Authorization: {self.auth[-1]}"}})


def test_a_password_in_openai_base_url_is_in_no_output_file_or_cache(site, tmp_path):
    fake = EchoingOpenAI()
    server, url = serve(fake)
    try:
        cli_build(site)
        base = url.replace("http://", f"http://{USERINFO}@")
        env = {"OPENAI_BASE_URL": base, "PAGESYNC_CACHE_DIR": str(tmp_path / "cache")}
        r = cli(
            tmp_path,
            "run",
            "--sitemap",
            sitemap(site),
            "--qdrant-path",
            "q",
            "--state",
            "s.db",
            "--embedder",
            "openai:m",
            "--report",
            "r.json",
            env=env,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 1, r.stderr  # every page refused, its error kept
    assert any(a.startswith("Basic ") for a in fake.auth)  # httpx did derive the header
    report = (tmp_path / "r.json").read_text()
    assert "bad request with Authorization" in report
    cache = (tmp_path / "cache" / "remote-dimensions.json").read_text()
    assert json.loads(cache)  # the probe's answer is kept, by the URL without its password
    state = (tmp_path / "s.db").read_bytes().decode("latin-1")
    for secret in (PASSWORD, USERINFO):
        assert_nowhere(secret, r.stderr, r.stdout, report, cache, state)


@pytest.fixture
def echoing_qdrant():
    """A "Qdrant server" refusing every request with a 403 whose body quotes its headers."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            said = dict(self.headers.items())
            body = json.dumps({"status": {"error": f"forbidden: {said}"}, "headers": said}).encode()
            self.send_response(403)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("how", ["flag", "env", "toml"])
def test_a_qdrant_password_and_a_key_with_quotes_are_never_printed(tmp_path: Path, echoing_qdrant, how):
    url = f"http://{USERINFO}@{echoing_qdrant}"
    args, env = ["export"], {}
    if how == "flag":
        args += ["--qdrant-url", url, "--api-key", API_KEY]
    elif how == "env":
        env = {"QDRANT_URL": url, "QDRANT_API_KEY": API_KEY}
    else:
        (tmp_path / "pagesync.toml").write_text(f"qdrant_url = {json.dumps(url)}\n")
        env = {"QDRANT_API_KEY": API_KEY}
    r = cli(tmp_path, *args, env=env)
    assert r.returncode == 2, r.stderr
    line = one_error_line(r)
    assert "403" in line and "Raw response content" not in line  # the status, not the raw body
    assert_nowhere(API_KEY, r.stderr, r.stdout)
    assert_nowhere(PASSWORD, r.stderr, r.stdout)


def test_a_qdrant_password_is_in_no_connection_error(tmp_path):
    r = cli(tmp_path, "export", "--qdrant-url", DEAD.replace("http://", f"http://{USERINFO}@"))
    assert r.returncode == 2, r.stderr
    assert "127.0.0.1:9" in one_error_line(r)
    assert_nowhere(PASSWORD, r.stderr, r.stdout)
