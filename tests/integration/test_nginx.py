"""pagesync against a real static server: nginx on 127.0.0.1, driven through the real CLI.

nginx is what many docs sites sit behind, and it does conditional GETs its own way: a
strong ETag of the form "<mtime hex>-<size hex>", a weak one (W/...) once gzip is on,
If-Modified-Since matched exactly, error_page for 404, `return 410;` from a location.
The fixture runs nginx entirely inside tmp_path (config, pid, logs, temp dirs), so it
works as root without touching /var or /etc; the test writes the site's files itself.

Skipped when there is no nginx binary (CI installs it with apt; see .ci/run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from demo.site_server import render_page
from sync.core.ids import chunk_id, point_id
from tests.helpers import by_url, para

pytestmark = pytest.mark.nginx

REPO = Path(__file__).resolve().parents[2]
NGINX = os.environ.get("PAGESYNC_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NAV = ["Guide", "API", "Blog"]
FOOTER = "© 2026 Acme Inc."

# path -> (title, section seeds). Every page gets a few sections of distinct prose.
PAGES = {
    "/index.html": ("Acme Docs", ["home-intro", "home-why", "home-next"]),
    "/guides/install.html": ("Install", ["install-pip", "install-docker", "install-verify"]),
    "/guides/configure.html": ("Configure", ["cfg-file", "cfg-env", "cfg-secrets", "cfg-reload"]),
    "/guides/legacy.html": ("Legacy API", ["legacy-v1", "legacy-migrate"]),
    "/guides/deploy.html": ("Deploy", ["deploy-k8s", "deploy-vm", "deploy-rollback"]),
    "/api/cli.html": ("CLI reference", ["cli-run", "cli-audit", "cli-status"]),
}
GONE_410 = "/guides/legacy.html"  # later answered by `location = ... { return 410; }`
DELETED_404 = "/guides/deploy.html"  # later removed from disk (error_page 404)
LEFT_SITEMAP = "/api/cli.html"  # later dropped from sitemap.xml, still served 200
EDITED = "/guides/configure.html"


# -- nginx ---------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _compiled_out(nginx: str) -> set[str]:
    """Modules a build left out (`--without-http_X_module`), so we never name their directives."""
    out = subprocess.run([nginx, "-V"], capture_output=True, text=True, timeout=10)
    return set(re.findall(r"--without-http_(\w+?)_module", out.stdout + out.stderr))


class Nginx:
    """One nginx master (daemon off) whose every file lives under `tmp`."""

    def __init__(self, binary: str, tmp: Path):
        self.binary = binary
        self.tmp = tmp
        self.site = tmp / "site"
        self.site.mkdir(parents=True)
        self.conf = tmp / "nginx.conf"
        self.error_log = tmp / "error.log"
        self.access_log = tmp / "access.log"
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self._missing = _compiled_out(binary)

    def url(self, path: str) -> str:
        return self.base + path

    def write_conf(self, extra_locations: str = "") -> None:
        t = self.tmp
        temp_dirs = {
            "client_body": "client_body_temp_path",
            "proxy": "proxy_temp_path",
            "fastcgi": "fastcgi_temp_path",
            "uwsgi": "uwsgi_temp_path",
            "scgi": "scgi_temp_path",
        }
        temps = []
        for module, directive in temp_dirs.items():
            if module != "client_body" and module in self._missing:
                continue
            (t / f"temp_{module}").mkdir(exist_ok=True)
            temps.append(f"    {directive} {t / f'temp_{module}'};")
        # As root the workers would drop to `nobody`, who cannot read pytest's 0700 tmp dirs.
        user = "user root;\n" if os.geteuid() == 0 else ""
        gzip = (
            ""
            if "gzip" in self._missing
            else ("    gzip on;\n    gzip_min_length 256;\n    gzip_types application/xml text/plain;\n")
        )
        self.conf.write_text(
            f"{user}daemon off;\nworker_processes 1;\npid {t / 'nginx.pid'};\n"
            f"error_log {self.error_log} notice;\n"
            "events { worker_connections 64; }\n"
            "http {\n"
            "    types { text/html html; application/xml xml; text/plain txt; }\n"
            "    default_type application/octet-stream;\n"
            '    log_format pagesync \'$status $request_uri inm="$http_if_none_match" '
            'ims="$http_if_modified_since" sent=$body_bytes_sent\';\n'
            f"    access_log {self.access_log} pagesync;\n" + "\n".join(temps) + "\n" + gzip + "    server {\n"
            f"        listen 127.0.0.1:{self.port};\n"
            "        server_name localhost;\n"
            f"        root {self.site};\n"
            "        index index.html;\n"
            "        error_page 404 /404.html;\n"
            "        location = /404.html { internal; }\n"
            f"{extra_locations}"
            "    }\n"
            "}\n"
        )

    def start(self) -> None:
        self.write_conf()
        check = subprocess.run(
            [self.binary, "-t", "-c", str(self.conf), "-p", str(self.tmp), "-e", str(self.error_log)],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if check.returncode != 0:
            raise RuntimeError(f"nginx -t rejected the test config:\n{check.stderr}\n{self.conf.read_text()}")
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(self.conf), "-p", str(self.tmp), "-e", str(self.error_log)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.proc.returncode}: {self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nginx did not listen on {self.port} within 15 s: {self._log_tail()}")

    def reload(self, extra_locations: str, *, probe: str, expect: int) -> None:
        """Rewrite the config, SIGHUP the master, wait until `probe` answers `expect`."""
        self.write_conf(extra_locations)
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if get(self.url(probe))[0] == expect:
                return
            time.sleep(0.1)
        raise RuntimeError(f"after reload {probe} never answered {expect}: {self._log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGQUIT)  # graceful: master waits for its workers
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def _log_tail(self) -> str:
        txt = self.error_log.read_text(errors="replace") if self.error_log.exists() else ""
        return txt[-2000:]

    def access_lines(self) -> list[str]:
        return self.access_log.read_text().splitlines() if self.access_log.exists() else []


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


@pytest.fixture
def nginx(tmp_path):
    if not (os.path.isfile(NGINX) and os.access(NGINX, os.X_OK)):
        pytest.skip(f"nginx binary not found ({NGINX}); install it with `apt-get install nginx-light`")
    server = Nginx(NGINX, tmp_path / "nginx")
    server.start()
    try:
        yield server
    finally:
        server.stop()


# -- the site, written to nginx's root -------------------------------------------------------
class DocsSite:
    """Static files under nginx's root plus a hand-written sitemap.xml with lastmod."""

    def __init__(self, server: Nginx):
        self.server = server
        self.root = server.site
        self.mtimes: dict[str, datetime] = {}
        self.in_sitemap: set[str] = set()

    def write(self, path: str, html: str, mtime: datetime) -> None:
        f = self.root / path.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(html, encoding="utf-8")
        ts = mtime.timestamp()
        os.utime(f, (ts, ts))  # nginx's ETag is "<mtime>-<size>": a rewrite must move mtime
        self.mtimes[path] = mtime

    def page(self, path: str, mtime: datetime, *, extra: str = "", nav=NAV, footer=FOOTER) -> None:
        title, seeds = PAGES[path]
        body = "".join(f"<h2>{s.replace('-', ' ').title()}</h2><p>{para(s)}</p>" for s in seeds) + extra
        self.write(path, render_page(title, body, nav=nav, footer=footer), mtime)

    def delete(self, path: str) -> None:
        (self.root / path.lstrip("/")).unlink()

    def write_sitemap(self) -> None:
        items = "".join(
            f"<url><loc>{self.server.url(p)}</loc><lastmod>{self.mtimes[p].strftime('%Y-%m-%dT%H:%M:%S+00:00')}</lastmod></url>"
            for p in sorted(self.in_sitemap)
        )
        (self.root / "sitemap.xml").write_text(
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>\n',
            encoding="utf-8",
        )


@pytest.fixture
def docs(nginx):
    site = DocsSite(nginx)
    for i, path in enumerate(PAGES):
        site.page(path, T0 + timedelta(minutes=i))  # distinct stamps: lastmod is trusted
        site.in_sitemap.add(path)
    site.write(
        "/404.html",
        render_page("Not found", "<p>This page does not exist. Try the search.</p>", nav=NAV, footer=FOOTER),
        T0,
    )
    site.write_sitemap()
    return site


# -- driving the CLI -----------------------------------------------------------------------
class Cli:
    def __init__(self, tmp: Path, sitemap: str):
        self.tmp = tmp
        self.sitemap = sitemap
        self.qdrant = tmp / "qdrant"
        self.state = tmp / "state.db"
        self.n = 0

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        return env

    def run(self, *extra: str, now: datetime) -> dict:
        self.n += 1
        report = self.tmp / f"report-{self.n}.json"
        cmd = [
            sys.executable,
            "-m",
            "sync",
            "run",
            "--sitemap",
            self.sitemap,
            "--embedder",
            "fake",
            "--qdrant-path",
            str(self.qdrant),
            "--state",
            str(self.state),
            "--report",
            str(report),
            "--now",
            now.isoformat(),
            "--quiet",
            *extra,
        ]
        proc = subprocess.run(cmd, cwd=REPO, env=self._env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"pagesync run exited {proc.returncode}:\n{proc.stderr}"
        rep = json.loads(report.read_text())
        assert rep["errors"] == [] and rep["pages_failed"] == 0, rep["errors"]
        return rep

    def export(self) -> dict[str, dict]:
        cmd = [sys.executable, "-m", "sync", "export", "--qdrant-path", str(self.qdrant), "--state", str(self.state)]
        proc = subprocess.run(cmd, cwd=REPO, env=self._env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"pagesync export exited {proc.returncode}:\n{proc.stderr}"
        return {rec["id"]: rec["payload"] for rec in map(json.loads, proc.stdout.splitlines())}


def check_contract(points: dict[str, dict]) -> None:
    for pid, p in points.items():
        assert p["chunk_id"] == chunk_id(p["url"], p["chunk_index"]) and pid == point_id(p["chunk_id"])
    for url, ps in by_url(points).items():
        assert [p["chunk_index"] for p in ps] == list(range(len(ps))), url
        assert len({p["content_hash"] for p in ps}) == 1, url


def changes(rep: dict) -> dict[str, tuple[str, str]]:
    """url -> (action, reason) of every page the pass wrote (or failed)."""
    return {c["url"]: (c["action"], c["reason"]) for c in rep["changes"]}


def actions(rep: dict) -> dict[str, str]:
    return {u: a for u, (a, _r) in changes(rep).items()}


# -- tests ---------------------------------------------------------------------------------
def test_nginx_fixture_serves_validators_404_and_410(nginx, docs):
    """The server side on its own: what the sync test below relies on nginx doing."""
    url = nginx.url("/guides/install.html")
    status, h, body = get(url)
    mtime = int(docs.mtimes["/guides/install.html"].timestamp())
    size = (nginx.site / "guides/install.html").stat().st_size
    assert status == 200 and b"Install Pip" in body
    assert h["etag"] == f'"{mtime:x}-{size:x}"', 'nginx\'s ETag is "<mtime hex>-<size hex>"'
    assert get(url, {"If-None-Match": h["etag"]})[0] == 304
    assert get(url, {"If-Modified-Since": h["last-modified"]})[0] == 304
    status, _, body = get(nginx.url("/nope.html"))
    assert status == 404 and b"does not exist" in body  # error_page, not nginx's built-in page
    nginx.reload(f"        location = {GONE_410} {{ return 410; }}\n", probe=GONE_410, expect=410)
    assert get(nginx.url("/guides/install.html"))[0] == 200


def test_sync_lifecycle_against_nginx(nginx, docs, tmp_path):
    cli = Cli(tmp_path / "work", nginx.url("/sitemap.xml"))
    n = len(PAGES)
    urls = {p: nginx.url(p) for p in PAGES}
    now = T0 + timedelta(hours=1)

    # 1. First pass: every page is new, added, embedded.
    rep = cli.run(now=now)
    assert rep["pages_in_sitemaps"] == n and rep["pages_added"] == n and rep["pages_fetched"] == n
    pts = cli.export()
    check_contract(pts)
    assert set(by_url(pts)) == set(urls.values())
    assert rep["chunks_embedded"] == rep["chunks_written"] == len(pts) >= n
    first_bytes = rep["bytes_downloaded"]

    # 2. --full right after: every page answered 304, nothing embedded or written.
    sitemap_size = (nginx.site / "sitemap.xml").stat().st_size
    log_mark = len(nginx.access_lines())
    now += timedelta(hours=1)
    rep = cli.run("--full", now=now)
    assert rep["pages_fetched"] == n and rep["pages_not_modified"] == n, rep
    assert rep["chunks_embedded"] == rep["chunks_written"] == rep["chunks_deleted"] == 0
    assert rep["bytes_downloaded"] <= sitemap_size + 64 < first_bytes, "304s carry no body"
    assert cli.export() == pts, "a 304 pass must not touch a single point (fetched_at included)"
    lines = nginx.access_lines()[log_mark:]
    page_lines = [ln for ln in lines if ln.split()[1] in PAGES]
    assert len(page_lines) == n and all(ln.startswith("304 ") and 'inm="-"' not in ln for ln in page_lines), page_lines
    # The sitemap is revalidated with the ETag nginx gave it (weak once gzipped) and its kept
    # copy parsed; robots.txt (nginx's 404 page) is remembered for 24 h, so not asked again.
    sitemap_lines = [ln for ln in lines if ln.split()[1] == "/sitemap.xml"]
    assert len(sitemap_lines) == 1 and sitemap_lines[0].startswith("304 ") and 'inm="-"' not in sitemap_lines[0], lines
    assert rep["sitemaps_not_modified"] == 1 and rep["pages_in_sitemaps"] == n
    assert not [ln for ln in lines if ln.split()[1] == "/robots.txt"], lines

    # 3. One file's text edited (and its lastmod advanced): only that page is re-read and replaced.
    now += timedelta(hours=1)
    docs.page(
        EDITED, now - timedelta(minutes=30), extra="<h2>Reload</h2><p>Send SIGHUP to reload the zebra config.</p>"
    )
    docs.write_sitemap()
    rep = cli.run(now=now)
    assert rep["pages_fetched"] == 1 and rep["pages_changed"] == 1 and rep["pages_added"] == 0, rep
    assert rep["sitemaps_not_modified"] == 0, "a rewritten sitemap.xml is downloaded again"
    assert actions(rep) == {urls[EDITED]: "changed"}
    after = cli.export()
    check_contract(after)
    edited_chunks = by_url(after)[urls[EDITED]]
    # Only the chunk texts that are new went through the model; the rest kept their vectors.
    old_texts = {p["text"] for p in by_url(pts)[urls[EDITED]]}
    new_texts = [p["text"] for p in edited_chunks if p["text"] not in old_texts]
    assert rep["chunks_embedded"] == len(new_texts) >= 1 and any("zebra config" in t for t in new_texts)
    assert rep["chunks_embedded"] + rep["chunks_reused"] == rep["chunks_written"] == len(edited_chunks)
    assert any("zebra config" in p["text"] for p in edited_chunks)
    assert {pid: p for pid, p in after.items() if p["url"] != urls[EDITED]} == {
        pid: p for pid, p in pts.items() if p["url"] != urls[EDITED]
    }, "other pages untouched"
    pts = after

    # 4. Every file rewritten with only nav and footer changed: 200s, same content hash, 0 embedded.
    now += timedelta(hours=1)
    for path in PAGES:
        extra = "<h2>Reload</h2><p>Send SIGHUP to reload the zebra config.</p>" if path == EDITED else ""
        docs.page(
            path,
            now - timedelta(minutes=30),
            extra=extra,
            nav=NAV + ["Changelog", "Status"],
            footer="© 2026 Acme Inc. · Privacy · Built with love",
        )
    rep = cli.run("--full", now=now)
    assert rep["pages_fetched"] == n and rep["pages_unchanged"] == n and rep["pages_not_modified"] == 0, rep
    assert rep["chunks_embedded"] == rep["chunks_written"] == rep["chunks_deleted"] == 0
    assert cli.export() == pts

    # 5. A file deleted from disk (still listed in the sitemap): nginx's 404 page -> purged.
    now += timedelta(hours=1)
    docs.delete(DELETED_404)
    assert get(nginx.url(DELETED_404))[0] == 404
    rep = cli.run("--full", now=now)
    assert rep["pages_removed"] == 1 and rep["pages_not_modified"] == n - 1, rep
    assert actions(rep) == {urls[DELETED_404]: "removed"} and "404" in changes(rep)[urls[DELETED_404]][1]
    pts = cli.export()
    assert urls[DELETED_404] not in by_url(pts)
    assert rep["chunks_deleted"] > 0

    # 6. A location answering `return 410;` (config reloaded): purged.
    now += timedelta(hours=1)
    nginx.reload(f"        location = {GONE_410} {{ return 410; }}\n", probe=GONE_410, expect=410)
    rep = cli.run("--full", now=now)
    assert actions(rep) == {urls[GONE_410]: "removed"} and "410" in changes(rep)[urls[GONE_410]][1], rep["changes"]
    assert rep["pages_removed"] == 1 and rep["pages_not_modified"] == n - 2
    pts = cli.export()
    assert urls[GONE_410] not in by_url(pts)

    # 7. A URL dropped from sitemap.xml (the file still serves 200): purged on a plain pass.
    now += timedelta(hours=1)
    docs.in_sitemap.discard(LEFT_SITEMAP)
    docs.write_sitemap()
    assert get(nginx.url(LEFT_SITEMAP))[0] == 200
    rep = cli.run(now=now)
    assert actions(rep) == {urls[LEFT_SITEMAP]: "removed"} and "sitemap" in changes(rep)[urls[LEFT_SITEMAP]][1], rep[
        "changes"
    ]
    assert rep["pages_removed"] == 1 and rep["chunks_embedded"] == 0
    pts = cli.export()
    check_contract(pts)
    live = {urls[p] for p in PAGES} - {urls[DELETED_404], urls[GONE_410], urls[LEFT_SITEMAP]}
    assert set(by_url(pts)) == live

    # 8. And the survivors still answer 304 on a --full pass.
    now += timedelta(hours=1)
    rep = cli.run("--full", now=now)
    assert rep["pages_not_modified"] == len(live) and rep["chunks_embedded"] == 0 and rep["pages_removed"] == 0, rep
