"""`--header` secrets of an https site never go over plain http, through the command line as
a subprocess: a sitemap listing http:// URLs of the site, a crawl whose page redirects to
http://, the http origin's robots.txt. One server on 127.0.0.1 answers both TLS and plain
HTTP on its port (as a host does on 443 and 80), so both are the same site to the scope."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.cli_helpers import cli
from tests.helpers import page_html, para

pytestmark = pytest.mark.slow

TOKEN = "tok-0123456789-secret"


class DualServer(ThreadingHTTPServer):
    """TLS when a connection starts with a TLS handshake, plain HTTP otherwise."""

    daemon_threads = True

    def __init__(self, ctx: ssl.SSLContext, pages: dict[str, tuple[int, dict[str, str], str]]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.ctx, self.pages = ctx, pages
        self.seen: list[tuple[str, str, str | None]] = []  # (scheme, path, Authorization)

    def get_request(self):
        conn, addr = self.socket.accept()
        try:
            first = conn.recv(1, socket.MSG_PEEK)
            if first == b"\x16":
                conn = self.ctx.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError):
            conn.close()
            raise
        return conn, addr


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        server: DualServer = self.server  # type: ignore[assignment]
        scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
        server.seen.append((scheme, self.path, self.headers.get("authorization")))
        status, headers, body = server.pages.get(self.path, (404, {}, "not found"))
        data = body.replace("{origin}", f"127.0.0.1:{server.server_address[1]}").encode()
        self.send_response(status)
        for k, v in {"content-type": "text/html; charset=utf-8", **headers}.items():
            self.send_header(k, v.replace("{origin}", f"127.0.0.1:{server.server_address[1]}"))
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def tls(tmp_path) -> tuple[ssl.SSLContext, Path]:
    """A self-signed certificate for 127.0.0.1: the server's context and the CA file to trust."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx, cert


def serving(ctx: ssl.SSLContext, pages) -> DualServer:
    server = DualServer(ctx, pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def page(name: str, links: str = "") -> tuple[int, dict[str, str], str]:
    return 200, {}, page_html(name, [para(name)]).replace("</main>", links + "</main>")


def run_with_header(work: Path, cert: Path, *source: str):
    env = {"TOKEN": TOKEN, "SSL_CERT_FILE": str(cert)}
    return cli(
        work,
        "run",
        *source,
        "--header",
        "Authorization: env:TOKEN",
        "--embedder",
        "fake",
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        env=env,
    )


def test_a_sitemap_listing_http_urls_of_an_https_site_gets_no_header_over_http(tmp_path, tls):
    ctx, cert = tls
    sitemap = (
        "<?xml version='1.0'?><urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
        "<url><loc>https://{origin}/a.html</loc></url><url><loc>http://{origin}/b.html</loc></url></urlset>"
    )
    server = serving(
        ctx,
        {
            "/sitemap.xml": (200, {"content-type": "application/xml"}, sitemap),
            "/a.html": page("A"),
            "/b.html": page("B"),
        },
    )
    try:
        r = run_with_header(tmp_path, cert, "--sitemap", f"https://127.0.0.1:{server.server_address[1]}/sitemap.xml")
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    plain = [(path, auth) for scheme, path, auth in server.seen if scheme == "http"]
    assert {p for p, _ in plain} >= {"/b.html", "/robots.txt"}  # the http URL and its origin's robots.txt
    assert all(auth is None for _, auth in plain), plain
    secure = {path: auth for scheme, path, auth in server.seen if scheme == "https"}
    assert secure["/sitemap.xml"] == secure["/a.html"] == f"{TOKEN}"
    assert TOKEN not in r.stderr + r.stdout


def test_a_crawl_whose_page_redirects_to_http_sends_no_header_over_http(tmp_path, tls):
    ctx, cert = tls
    server = serving(
        ctx,
        {
            "/start.html": page("Start", '<p><a href="/old.html">old</a> <a href="/a.html">a</a></p>'),
            "/old.html": (301, {"location": "http://{origin}/moved.html"}, ""),
            "/moved.html": page("Moved"),
            "/a.html": page("A"),
        },
    )
    try:
        r = run_with_header(tmp_path, cert, "--crawl", f"https://127.0.0.1:{server.server_address[1]}/start.html")
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode in (0, 1), r.stderr
    plain = [(path, auth) for scheme, path, auth in server.seen if scheme == "http"]
    assert "/moved.html" in {p for p, _ in plain}, server.seen
    assert all(auth is None for _, auth in plain), plain
    assert all(auth == TOKEN for scheme, _, auth in server.seen if scheme == "https"), server.seen
