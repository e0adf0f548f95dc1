"""A small docs-site server on 127.0.0.1 for the demo and the integration tests.

It behaves like a static host: strong ETags (hash of the body), Last-Modified, 304 for
matching If-None-Match / If-Modified-Since, gzip-encoded responses when asked, plus
what tests need to provoke: 404, 410, redirects, 5xx, slow and trickled answers, a private
site answering 401 without the headers it requires (`required_headers`), a generated
sitemap (or sitemap index, or .xml.gz). Sitemap files behave like static files too: their
ETag and Last-Modified move only when their bytes change, so they answer 304 to a
conditional GET. Every request is logged for assertions.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
import time
from dataclasses import dataclass, field
from email.utils import format_datetime, parsedate_to_datetime
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

__all__ = ["Site", "Resource", "SiteServer", "render_page"]


@dataclass
class Resource:
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    location: str | None = None
    mtime: float = field(default_factory=time.time)  # `Site.set` stamps with the site's clock instead
    delay: float = 0.0
    in_sitemap: bool = True
    etag: str | None = None  # None: derived from the body
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers (e.g. Retry-After)


def render_page(title: str, body_html: str, *, nav: list[str] | None = None, footer: str = "© Acme") -> str:
    """A docs page with the boilerplate real sites have: header, nav, sidebar, footer."""
    nav = nav or ["Guide", "API", "Blog"]
    links = "".join(f'<li><a href="/{n.lower()}">{n}</a></li>' for n in nav)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>"
        f"{title} | Acme Docs</title></head><body>"
        f"<header><a href='/'>Acme Docs</a><nav><ul>{links}</ul></nav></header>"
        f"<aside class='sidebar'><ul>{links}</ul></aside>"
        f"<main><article><h1>{title}</h1>{body_html}</article></main>"
        f"<footer><p>{footer}</p></footer></body></html>"
    )


class Site:
    """The site's content, mutable while served (thread-safe).

    `clock` (seconds since the epoch) stamps each new version's mtime (the sitemap's
    `lastmod`, `Last-Modified`) and the sitemap files' own stamps: the wall clock by
    default; a test harness sets its simulated pass clock, so the stamps the passes see
    follow the passes' time, not the test machine's speed.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self.clock = clock
        self.resources: dict[str, Resource] = {}
        self.requests: list[tuple[str, str, int, dict[str, str]]] = []
        self.times: list[float] = []  # time.monotonic() of each logged request, parallel to `requests`
        self.trickling: dict[str, float] = {}  # path -> seconds between the body's bytes (see `trickle`)
        self.sitemap_mode = "plain"  # plain | index | gzip | broken | missing | same-lastmod
        self.same_lastmod_at: float | None = None  # same-lastmod's one stamp (None: a fixed one)
        self.base_url = ""
        self._sitemap_stamps: dict[str, tuple[bytes, float]] = {}  # path -> (sha256 of body, mtime)
        # Pages no resource holds, made per request from the path with its query (a calendar
        # or an endless pager for the crawl tests): None for a 404.
        self.dynamic: Callable[[str], Resource | None] | None = None
        # A private site: request headers every answer needs (name -> value, names in any case);
        # a request without them gets 401 (robots.txt and sitemaps too). Empty: a public site.
        self.required_headers: dict[str, str] = {}

    # -- content ----------------------------------------------------------------------
    def set(self, path: str, body: str | bytes, content_type: str = "text/html; charset=utf-8", **kw) -> None:
        data = body.encode() if isinstance(body, str) else body
        with self._lock:
            old = self.resources.get(path)
            if old is not None and old.status == 200 and old.body == data and old.content_type == content_type:
                return  # unchanged: keep mtime and ETag, like a static host
            kw.setdefault("mtime", self.clock())
            self.resources[path] = Resource(data, content_type, **kw)

    def touch(self, path: str, mtime: float) -> None:
        with self._lock:
            self.resources[path].mtime = mtime

    def remove(self, path: str) -> None:
        """404 from now on, and out of the sitemap."""
        with self._lock:
            self.resources.pop(path, None)

    def gone(self, path: str) -> None:
        with self._lock:
            self.resources[path] = Resource(b"gone", "text/plain", status=410, mtime=self.clock(), in_sitemap=False)

    def redirect(self, path: str, target: str, status: int = 301) -> None:
        with self._lock:
            self.resources[path] = Resource(
                b"", "text/plain", status=status, location=target, mtime=self.clock(), in_sitemap=False
            )

    def error(self, path: str, status: int = 500, headers: dict[str, str] | None = None) -> None:
        with self._lock:
            r = self.resources.get(path)
            self.resources[path] = Resource(
                r.body if r else b"",
                "text/plain",
                status=status,
                mtime=r.mtime if r else self.clock(),  # its lastmod stays
                in_sitemap=r.in_sitemap if r else True,
                headers=headers or {},
            )

    def slow(self, path: str, seconds: float) -> None:
        with self._lock:
            self.resources[path].delay = seconds

    def trickle(self, path: str, seconds: float) -> None:
        """Send `path`'s body (any path, sitemaps too) one byte every `seconds`: each read is
        quick, the whole answer is not."""
        with self._lock:
            self.trickling[path] = seconds

    def pages(self) -> list[str]:
        with self._lock:
            return sorted(p for p, r in self.resources.items() if r.in_sitemap and p.endswith((".html", "/")))

    @classmethod
    def from_dir(cls, root: Path) -> "Site":
        site = cls()
        for f in sorted(root.rglob("*")):
            if f.is_file():
                ctype = "text/html; charset=utf-8" if f.suffix == ".html" else "text/plain"
                site.resources["/" + f.relative_to(root).as_posix()] = Resource(
                    f.read_bytes(), ctype, mtime=f.stat().st_mtime
                )
        return site

    # -- sitemap ----------------------------------------------------------------------
    def _urlset(self, paths: list[str], same_lastmod: bool) -> bytes:
        with self._lock:
            stamps = {p: self.resources[p].mtime for p in paths if p in self.resources}
        items = []
        for p in paths:
            ts = (self.same_lastmod_at or 1_700_000_000) if same_lastmod else stamps.get(p, 0)
            lm = datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
            items.append(f"<url><loc>{self.base_url}{p}</loc><lastmod>{lm}</lastmod></url>")
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">' + "".join(items) + "</urlset>"
        ).encode()

    def sitemap_response(self, path: str) -> Resource | None:
        """The generated sitemap file at `path` (None: not a sitemap path), stamped like a static file."""
        res = self._sitemap_file(path)
        if res is not None and res.status == 200:
            res.mtime = self._stamp(path, res.body)
        return res

    def _stamp(self, path: str, body: bytes) -> float:
        """The file's mtime: unchanged while its bytes are, else now (at least a second later,
        so that Last-Modified alone also tells the versions apart)."""
        digest = hashlib.sha256(body).digest()
        with self._lock:
            old = self._sitemap_stamps.get(path)
            if old is None or old[0] != digest:
                now = self.clock()
                mtime = now if old is None else max(now, old[1] + 1)
                old = self._sitemap_stamps[path] = (digest, mtime)
        return old[1]

    def _sitemap_file(self, path: str) -> Resource | None:
        pages = self.pages()
        mode = self.sitemap_mode
        if mode == "missing" and path.startswith("/sitemap"):
            return Resource(b"not found", "text/plain", status=404)
        if mode == "broken" and path.startswith("/sitemap"):
            return Resource(b"<html>oops</html", "text/html", status=200)
        if path == "/sitemap.xml":
            if mode == "index":
                body = (
                    '<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                    f"<sitemap><loc>{self.base_url}/sitemap-1.xml</loc></sitemap>"
                    f"<sitemap><loc>{self.base_url}/sitemap-2.xml.gz</loc></sitemap></sitemapindex>"
                ).encode()
                return Resource(body, "application/xml")
            if mode == "gzip":
                return Resource(b"", "text/plain", status=301, location=f"{self.base_url}/sitemap.xml.gz")
            return Resource(self._urlset(pages, mode == "same-lastmod"), "application/xml")
        if path == "/sitemap.xml.gz":
            return Resource(gzip.compress(self._urlset(pages, False), mtime=0), "application/gzip")
        if path in ("/sitemap-1.xml", "/sitemap-2.xml.gz") and mode == "index":
            half = len(pages) // 2
            part = pages[:half] if path == "/sitemap-1.xml" else pages[half:]
            body = self._urlset(part, False)
            return Resource(
                gzip.compress(body, mtime=0) if path.endswith(".gz") else body,
                "application/gzip" if path.endswith(".gz") else "application/xml",
            )
        return None

    def count(self, status: int | None = None, path: str | None = None) -> int:
        with self._lock:
            return sum(
                1 for _, p, s, _h in self.requests if (status is None or s == status) and (path is None or p == path)
            )

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()
            self.times.clear()


class _Handler(BaseHTTPRequestHandler):
    server_version = "pagesync-testsite/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        site: Site = self.server.site  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        res = site.sitemap_response(path) if "sitemap" in path else None
        if res is None:
            with site._lock:
                res = site.resources.get(path)
                if res is None and path.endswith("/"):
                    res = site.resources.get(path + "index.html")
            if res is None and site.dynamic is not None:  # generated pages (a link trap), by path and query
                res = site.dynamic(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        if any(headers.get(k.lower()) != v for k, v in site.required_headers.items()):
            self._send(401, b"unauthorized", "text/plain", {"WWW-Authenticate": "Bearer"}, path, headers)
            return
        if res is None:
            self._send(404, b"not found", "text/plain", {}, path, headers)
            return
        if res.delay:
            time.sleep(res.delay)
        if res.status in (301, 302, 307, 308):
            self._send(res.status, b"", "text/plain", {"Location": res.location or "/"}, path, headers)
            return
        if res.status != 200:
            self._send(res.status, res.body, res.content_type, dict(res.headers), path, headers)
            return
        etag = res.etag or '"' + hashlib.sha256(res.body).hexdigest()[:20] + '"'
        last_mod = format_datetime(datetime.fromtimestamp(int(res.mtime), tz=timezone.utc), usegmt=True)
        extra = {"ETag": etag, "Last-Modified": last_mod, "Cache-Control": "no-cache"}
        inm = headers.get("if-none-match")
        ims = headers.get("if-modified-since")
        if inm is not None:
            tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
            if etag in tags or "*" in tags:
                self._send(304, b"", None, extra, path, headers)
                return
        elif ims is not None:
            try:
                if int(res.mtime) <= parsedate_to_datetime(ims).timestamp():
                    self._send(304, b"", None, extra, path, headers)
                    return
            except (TypeError, ValueError):
                pass
        body = res.body
        if "gzip" in headers.get("accept-encoding", "") and res.content_type.startswith("text/"):
            body = gzip.compress(body)
            extra["Content-Encoding"] = "gzip"
        self._send(200, body, res.content_type, extra, path, headers)

    def _send(self, status: int, body: bytes, ctype: str | None, extra: dict, path: str, req_headers: dict) -> None:
        site: Site = self.server.site  # type: ignore[attr-defined]
        with site._lock:
            site.requests.append(("GET", path, status, req_headers))
            site.times.append(time.monotonic())
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in extra.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with site._lock:
            gap = site.trickling.get(path)
        if gap is None:
            if body:
                self.wfile.write(body)
            return
        try:
            for i in range(len(body)):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                time.sleep(gap)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up


class SiteServer:
    """Serve a `Site` on 127.0.0.1 (an ephemeral port) in a background thread."""

    def __init__(self, site: Site, port: int = 0):
        self.site = site
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.site = site  # type: ignore[attr-defined]
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        site.base_url = self.base_url
        # serve_forever checks for shutdown every poll_interval (0.5 s by default): every
        # server a test starts would then take up to half a second to stop.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def url(self, path: str) -> str:
        return self.base_url + path

    def serve(self, site: Site) -> None:
        """Serve `site` from now on, on the same port (tests that share one server)."""
        self.site = site
        self._httpd.site = site  # type: ignore[attr-defined]
        site.base_url = self.base_url

    def __enter__(self) -> "SiteServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
