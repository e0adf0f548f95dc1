#!/usr/bin/env python3
"""Replay a real docs site's edit history through nginx and pagesync; check incremental == fresh.

Not run in CI (it needs a clone of a docs repo, nginx, `markdown` + `pymdown-extensions`,
and minutes of CPU). What it does:

1. Takes a public docs repo's git history (default: FastAPI, docs/en/docs/**/*.md, with the
   code samples its pages include from docs_src/) and a window of N days.
2. For every day, renders the docs at that day's last first-parent commit into a static
   mkdocs-like site: header tabs, a sidebar listing ALL pages (a new or renamed page changes
   every page's HTML), the article, a table of contents, prev/next links and a footer.
   Markdown is rendered with Python-Markdown + pymdown-extensions, the extension set the
   real site uses (admonitions, tabs, superfences, both the old `!!!`/`===` and the newer
   `///` block syntax). Only files whose HTML changed are written (mtime = the commit time),
   so nginx's "<mtime>-<size>" ETags of untouched files stay put; deleted pages are removed;
   sitemap.xml gets lastmod = the markdown file's last commit date.
3. Serves the site with nginx on 127.0.0.1 (every nginx file under the work dir).
4. Runs `pagesync run --sitemap ... --now <day>` on one long-lived collection (the
   incremental chain), then builds a fresh index of the same site into a separate
   --qdrant-path/--state, and compares both with `pagesync export`: same point ids, same
   payloads except fetched_at (and `embedder` when the two use different embedders), same
   texts, and (when both use the same embedder) the same vectors, reused ones included. A difference is classified: a page whose indexed text is what the site served the
   last time pagesync visited it, and whose sitemap lastmod has not moved since, is "lag" (by
   design: trusted lastmod + revisit interval); anything else is a bug.
5. At the end: a --full pass with nothing changed (all 304, nothing embedded), then a
   nav/footer-only redesign of every page (all 200, all unchanged, nothing embedded), and a
   last incremental == fresh check.

Results: a markdown table (--out) plus the raw per-day JSON next to it.

    .venv/bin/python bench/replay_docs_history.py --git-dir /path/to/fastapi/.git
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_GIT_DIR = "/work/.mirror/fastapi+fastapi/repo"
NGINX = os.environ.get("PAGESYNC_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"


# ==========================================================================================
# git
# ==========================================================================================
class Git:
    def __init__(self, git_dir: str):
        self.git_dir = git_dir
        self._cat = subprocess.Popen(
            ["git", "--git-dir", git_dir, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", self.git_dir, *args], capture_output=True, text=True, check=True
        ).stdout

    def blob(self, commit: str, path: str) -> bytes | None:
        assert self._cat.stdin and self._cat.stdout
        self._cat.stdin.write(f"{commit}:{path}\n".encode())
        self._cat.stdin.flush()
        header = self._cat.stdout.readline()
        parts = header.split()
        if len(parts) != 3:
            return None  # "<spec> missing" / "ambiguous"
        data = self._cat.stdout.read(int(parts[2]))
        self._cat.stdout.read(1)
        return data if parts[1] == b"blob" else None

    def day_commit(self, rev: str, day: date) -> str:
        """The last first-parent commit of `rev` committed on or before `day` (UTC)."""
        return self("rev-list", "-1", "--first-parent", f"--before={day.isoformat()}T23:59:59Z", rev).strip()

    def commit_time(self, commit: str) -> int:
        return int(self("show", "-s", "--format=%ct", commit).strip())

    def close(self) -> None:
        if self._cat.stdin:
            self._cat.stdin.close()
        self._cat.wait(timeout=10)


def _iso_utc(ts: str) -> str:
    return datetime.fromisoformat(ts).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")


class Lastmods:
    """path -> ISO date of the last first-parent commit touching it (what a sitemap plugin does)."""

    def __init__(self, git: Git, docs_dir: str):
        self.git, self.docs_dir = git, docs_dir
        self.at: dict[str, str] = {}

    def _log(self, *rev: str):
        proc = subprocess.Popen(
            [
                "git",
                "--git-dir",
                self.git.git_dir,
                "log",
                "--first-parent",
                "--format=%x00%cI",
                "--name-only",
                *rev,
                "--",
                self.docs_dir,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        return proc

    def init(self, commit: str, paths: set[str]) -> None:
        todo = set(paths)
        proc = self._log(commit)
        when = None
        assert proc.stdout
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith("\x00"):
                when = _iso_utc(line[1:])
            elif line and line in todo and when:
                self.at[line] = when
                todo.discard(line)
                if not todo:
                    break
        proc.kill()
        proc.wait()

    def advance(self, old: str, new: str) -> set[str]:
        """Apply the commits old..new; returns the paths whose lastmod moved."""
        if old == new:
            return set()
        proc = self._log(f"{old}..{new}")
        out, _ = proc.communicate()
        seen: set[str] = set()
        when = None
        for line in out.splitlines():  # newest first: the first stamp of a path wins
            if line.startswith("\x00"):
                when = _iso_utc(line[1:])
            elif line and when and line not in seen:
                seen.add(line)
                self.at[line] = when
        return seen


# ==========================================================================================
# rendering: markdown at a commit -> an mkdocs-like static site
# ==========================================================================================
_INCLUDE = re.compile(r"^(?P<indent>[ \t]*)\{!>?\s*(?P<path>[^!\[\s]+)\s*(?:\[ln:(?P<a>\d+)-(?P<b>\d+)\])?\s*!\}\s*$")
_INLINE_INCLUDE = re.compile(r"\{!>?\s*(?P<path>[^!\s]+)\s*!\}")
_JINJA = re.compile(r"\{%-?.*?-?%\}|\{\{.*?\}\}", re.S)
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.M)

MD_EXTENSIONS = [
    "abbr",
    "attr_list",
    "footnotes",
    "md_in_html",
    "tables",
    "toc",
    "admonition",
    "pymdownx.superfences",
    "pymdownx.tabbed",
    "pymdownx.details",
    "pymdownx.tilde",
    "pymdownx.caret",
    "pymdownx.mark",
    "pymdownx.keys",
    "pymdownx.betterem",
    "pymdownx.highlight",
    "pymdownx.inlinehilite",
    "pymdownx.blocks.admonition",
    "pymdownx.blocks.details",
    "pymdownx.blocks.tab",
]
MD_CONFIG = {
    "toc": {"permalink": True},
    "pymdownx.tabbed": {"alternate_style": True},
    "pymdownx.blocks.tab": {"alternate_style": True},
    "pymdownx.blocks.admonition": {
        "types": ["note", "attention", "caution", "danger", "error", "tip", "hint", "warning", "info", "check"]
    },
}


@dataclass
class Page:
    src: str  # path in the repo, e.g. docs/en/docs/tutorial/body.md
    url: str  # site path, e.g. /tutorial/body/
    title: str
    markdown: str


def page_url(rel: str) -> str:
    if rel == "index.md":
        return "/"
    if rel.endswith("/index.md"):
        return "/" + rel[: -len("index.md")]
    return "/" + rel[:-3] + "/"


def url_file(root: Path, url: str) -> Path:
    return root / url.lstrip("/") / "index.html"


class Renderer:
    def __init__(self, git: Git, docs_dir: str, nav_variant: int = 0):
        import markdown  # noqa: F401  (fail early with a clear message)

        self.git, self.docs_dir = git, docs_dir
        self.nav_variant = nav_variant
        self._cache: dict[str, tuple[str, str]] = {}

    def expand(self, commit: str, text: str, depth: int = 0) -> str:
        """mdx_include, as the real site configures it (base path: the docs dir's parent chain)."""
        out = []
        for line in text.splitlines():
            m = _INCLUDE.match(line)
            if not m or depth > 3:
                out.append(line)
                continue
            path = os.path.normpath(os.path.join(self.docs_dir, m["path"]))
            data = self.git.blob(commit, path)
            if data is None:
                out.append(line)
                continue
            inc = data.decode("utf-8", "replace")
            if path.endswith(".md"):
                inc = self.expand(commit, inc, depth + 1)
            lines = inc.splitlines()
            if m["a"]:
                lines = lines[int(m["a"]) - 1 : int(m["b"])]
            out.extend((m["indent"] + ln) if ln.strip() else "" for ln in lines)
        return "\n".join(out) + "\n"

    def pages(self, commit: str, only: list[str], max_pages: int | None) -> list[Page]:
        names = self.git("ls-tree", "-r", "--name-only", commit, "--", self.docs_dir).splitlines()
        rels = sorted(n[len(self.docs_dir) + 1 :] for n in names if n.endswith(".md"))
        if only:
            rels = [r for r in rels if any(r == o or r.startswith(o.rstrip("/") + "/") for o in only)]
        if max_pages:
            rels = rels[:max_pages]
        pages = []
        for rel in rels:
            src = f"{self.docs_dir}/{rel}"
            raw = (self.git.blob(commit, src) or b"").decode("utf-8", "replace")
            text = _JINJA.sub("", self.expand(commit, raw))  # mkdocs-macros blocks: dropped
            m = _H1.search(text)
            title = m.group(1).strip() if m else Path(rel).stem.replace("-", " ").title()
            title = re.sub(r"[*`]", "", title)
            pages.append(Page(src, page_url(rel), title, text))
        return pages

    def render_site(self, pages: list[Page], base_url: str) -> dict[str, str]:
        """url -> full HTML of every page."""
        import markdown

        sections: dict[str, list[Page]] = {}
        for p in pages:
            sec = p.url.strip("/").split("/")[0] if p.url.count("/") > 2 else ""
            sections.setdefault(sec, []).append(p)
        tabs = ["Home", "Features", "Learn", "Reference", "FastAPI People", "Resources", "About", "Release Notes"]
        if self.nav_variant:
            tabs = tabs + ["Sponsors", "Newsletter"]
        tabs_html = "".join(
            f'<li class="md-tabs__item"><a href="/{t.lower().replace(" ", "-")}/">{t}</a></li>' for t in tabs
        )
        side = []
        for sec in sorted(sections):
            items = "".join(
                f'<li class="md-nav__item"><a class="md-nav__link" href="{p.url}">{_esc(p.title)}</a></li>'
                for p in sections[sec]
            )
            label = sec.replace("-", " ").title() if sec else "FastAPI"
            side.append(f'<li class="md-nav__item md-nav__item--nested"><label>{label}</label><ul>{items}</ul></li>')
        sidebar = "".join(side)
        footer_text = (
            "FastAPI framework, high performance, easy to learn, fast to code, ready for production"
            if not self.nav_variant
            else "FastAPI: high performance, easy to learn, fast to code, ready for production. "
            "Made with Material for MkDocs · Privacy · Terms"
        )
        out = {}
        for i, p in enumerate(pages):
            if p.markdown not in self._cache:
                md = markdown.Markdown(extensions=MD_EXTENSIONS, extension_configs=MD_CONFIG)
                self._cache[p.markdown] = (md.convert(p.markdown), getattr(md, "toc", ""))
            body, toc = self._cache[p.markdown]
            prev_link = (
                f'<a class="md-footer__link--prev" href="{pages[i - 1].url}">Previous: {_esc(pages[i - 1].title)}</a>'
                if i
                else ""
            )
            next_link = (
                f'<a class="md-footer__link--next" href="{pages[i + 1].url}">Next: {_esc(pages[i + 1].title)}</a>'
                if i + 1 < len(pages)
                else ""
            )
            out[p.url] = (
                '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
                f"<title>{_esc(p.title)} - FastAPI</title>"
                f'<link rel="canonical" href="{base_url}{p.url}">'
                '<meta name="description" content="FastAPI framework, high performance, easy to learn, fast to code, ready for production">'
                "</head><body>\n"
                '<header class="md-header"><a class="md-header__button md-logo" href="/">FastAPI</a>'
                '<form class="md-search" role="search"><input type="text" placeholder="Search" aria-label="Search"></form>'
                '<a class="md-source" href="https://github.com/fastapi/fastapi">fastapi/fastapi</a></header>\n'
                f'<nav class="md-tabs" aria-label="Tabs"><ul class="md-tabs__list">{tabs_html}</ul></nav>\n'
                '<div class="md-container"><div class="md-sidebar md-sidebar--primary">'
                f'<nav class="md-nav md-nav--primary" aria-label="Navigation"><ul class="md-nav__list">{sidebar}</ul></nav></div>\n'
                '<div class="md-sidebar md-sidebar--secondary"><nav class="md-nav md-nav--secondary" aria-label="Table of contents">'
                f"<label>Table of contents</label>{toc}</nav></div>\n"
                f'<main class="md-main"><div class="md-content"><article class="md-content__inner md-typeset">\n{body}\n</article></div></main></div>\n'
                f'<footer class="md-footer"><nav class="md-footer__inner" aria-label="Footer">{prev_link}{next_link}</nav>'
                f'<div class="md-footer-meta"><div class="md-copyright">{footer_text}</div>'
                '<div class="md-social"><a href="https://github.com/fastapi/fastapi">GitHub</a> <a href="https://discord.gg/VQjSZaeJmf">Discord</a> '
                '<a href="https://x.com/fastapi">X</a> <a href="https://www.linkedin.com/company/fastapi">LinkedIn</a></div></div></footer>\n'
                "</body></html>\n"
            )
        return out


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_site(root: Path, html: dict[str, str], mtime: float) -> tuple[list[str], list[str], list[str]]:
    """Write what changed (mtime set), delete what is gone. Returns (added, rewritten, deleted) urls."""
    added, rewritten, deleted = [], [], []
    existing = {}
    for f in root.rglob("index.html"):
        rel = f.parent.relative_to(root).as_posix()
        existing["/" if rel == "." else f"/{rel}/"] = f
    for url, text in html.items():
        f = url_file(root, url)
        data = text.encode("utf-8")
        if f.exists():
            if f.read_bytes() == data:
                continue
            rewritten.append(url)
        else:
            added.append(url)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
        os.utime(f, (mtime, mtime))
    for url, f in existing.items():
        if url not in html:
            f.unlink()
            deleted.append(url)
            d = f.parent
            while d != root and not any(d.iterdir()):
                d.rmdir()
                d = d.parent
    return added, rewritten, deleted


def write_sitemap(root: Path, base_url: str, pages: list[Page], lastmods: Lastmods) -> None:
    items = "".join(
        f"<url><loc>{base_url}{p.url}</loc><lastmod>{lastmods.at.get(p.src, '')}</lastmod></url>\n" for p in pages
    )
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{items}</urlset>\n",
        encoding="utf-8",
    )


# ==========================================================================================
# nginx
# ==========================================================================================
class Nginx:
    def __init__(self, work: Path, root: Path):
        self.work, self.root = work, root
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        w = self.work
        out = subprocess.run([NGINX, "-V"], capture_output=True, text=True)
        missing = set(re.findall(r"--without-http_(\w+?)_module", out.stdout + out.stderr))
        temps = []
        for mod, directive in {
            "client_body": "client_body_temp_path",
            "proxy": "proxy_temp_path",
            "fastcgi": "fastcgi_temp_path",
            "uwsgi": "uwsgi_temp_path",
            "scgi": "scgi_temp_path",
        }.items():
            if mod == "client_body" or mod not in missing:
                (w / f"temp_{mod}").mkdir(parents=True, exist_ok=True)
                temps.append(f"  {directive} {w / f'temp_{mod}'};")
        user = "user root;\n" if os.geteuid() == 0 else ""
        conf = w / "nginx.conf"
        conf.write_text(
            f"{user}daemon off;\nworker_processes 1;\npid {w / 'nginx.pid'};\nerror_log {w / 'error.log'} notice;\n"
            "events { worker_connections 256; }\nhttp {\n"
            "  types { text/html html; application/xml xml; }\n  default_type application/octet-stream;\n"
            "  log_format replay '$status $request_uri inm=\"$http_if_none_match\" sent=$body_bytes_sent';\n"
            f"  access_log {w / 'access.log'} replay;\n" + "\n".join(temps) + "\n"
            "  gzip on; gzip_min_length 256; gzip_types application/xml;\n"
            f"  server {{\n    listen 127.0.0.1:{self.port};\n    root {self.root};\n    index index.html;\n  }}\n}}\n"
        )
        args = [NGINX, "-c", str(conf), "-p", str(w), "-e", str(w / "error.log")]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if self.proc.poll() is not None:
                raise SystemExit(f"nginx exited: {(w / 'error.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("nginx did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# ==========================================================================================
# pagesync
# ==========================================================================================
@dataclass
class Index:
    name: str
    dir: Path
    embedder: str | None  # None: the default (bundled all-MiniLM-L6-v2)

    @property
    def qdrant(self) -> Path:
        return self.dir / "qdrant"

    @property
    def state(self) -> Path:
        return self.dir / "state.db"

    def opts(self) -> list[str]:
        return ["--qdrant-path", str(self.qdrant), "--state", str(self.state)]


class Pagesync:
    def __init__(self, code: Path, reports: Path):
        self.code, self.reports = code, reports
        self.env = dict(os.environ, PYTHONPATH=str(code), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        self.log: list[str] = []

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "sync", *args]

    def run(self, idx: Index, sitemap: str, now: datetime, tag: str, *extra: str) -> dict:
        report = self.reports / f"{tag}-{idx.name}.json"
        args = [
            "run",
            "--sitemap",
            sitemap,
            *idx.opts(),
            "--now",
            now.isoformat().replace("+00:00", "Z"),
            "--report",
            str(report),
            "--quiet",
            *extra,
        ]
        if idx.embedder:
            args += ["--embedder", idx.embedder]
        self.log.append("pagesync " + " ".join(shlex.quote(a) for a in args))
        p = subprocess.run(self.cmd(*args), cwd=self.code, env=self.env, capture_output=True, text=True)
        if p.returncode not in (0, 1) or not report.exists():
            raise SystemExit(f"pagesync run failed ({p.returncode}):\n{p.stderr[-3000:]}")
        rep = json.loads(report.read_text())
        rep["exit_code"] = p.returncode
        return rep

    def export(self, idx: Index, vectors: bool = False) -> dict[str, dict]:
        """{id: payload}; with `vectors`, each payload also carries the point's vector as `_vector`."""
        extra = ["--with-vectors"] if vectors else []
        p = subprocess.run(
            self.cmd("export", *idx.opts(), *extra), cwd=self.code, env=self.env, capture_output=True, text=True
        )
        if p.returncode != 0:
            raise SystemExit(f"pagesync export failed:\n{p.stderr[-3000:]}")
        recs = map(json.loads, p.stdout.splitlines())
        if vectors:
            return {r["id"]: {**r["payload"], "_vector": r["vector"]} for r in recs}
        return {r["id"]: r["payload"] for r in recs}


def state_rows(idx: Index) -> dict[str, dict]:
    con = sqlite3.connect(f"file:{idx.state}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return {r["url"]: dict(r) for r in con.execute("SELECT * FROM pages")}
    finally:
        con.close()


# ==========================================================================================
# comparison
# ==========================================================================================
def by_url(points: dict[str, dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in points.values():
        out.setdefault(p["url"], []).append(p)
    return {u: sorted(ps, key=lambda p: p["chunk_index"]) for u, ps in out.items()}


def page_hashes(points: dict[str, dict]) -> dict[str, str]:
    return {u: ps[0]["content_hash"] for u, ps in by_url(points).items()}


def compare(inc: dict[str, dict], fresh: dict[str, dict], ignore: set[str]) -> dict[str, list[str]]:
    """url -> list of differences (empty dict: identical modulo `ignore`)."""
    diffs: dict[str, list[str]] = {}

    def note(url: str, what: str) -> None:
        diffs.setdefault(url, []).append(what)

    for pid in inc.keys() - fresh.keys():
        note(inc[pid]["url"], f"extra point {pid} (chunk {inc[pid]['chunk_index']}) only in incremental")
    for pid in fresh.keys() - inc.keys():
        note(fresh[pid]["url"], f"missing point {pid} (chunk {fresh[pid]['chunk_index']}) in incremental")
    for pid in inc.keys() & fresh.keys():
        a = {k: v for k, v in inc[pid].items() if k not in ignore}
        b = {k: v for k, v in fresh[pid].items() if k not in ignore}
        if a != b:
            keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            note(inc[pid]["url"], f"chunk {inc[pid]['chunk_index']}: payload differs in {keys}")
    return diffs


# ==========================================================================================
# the replay
# ==========================================================================================
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--git-dir",
        default=os.environ.get("REPLAY_GIT_DIR") or DEFAULT_GIT_DIR,
        help="a clone (bare is fine) of the docs repo (default: %(default)s)",
    )
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--docs-dir", default="docs/en/docs")
    ap.add_argument("--start", default="2024-07-27", help="first day (UTC): the initial index")
    ap.add_argument("--days", type=int, default=21, help="days in the window, the first included")
    ap.add_argument("--only", action="append", default=[], help="restrict to this docs sub-folder (repeatable)")
    ap.add_argument("--max-pages", type=int, default=None, help="restrict to the first N pages (sorted paths)")
    ap.add_argument("--embedder", default=None, help="embedder of the incremental chain (default: the bundled model)")
    ap.add_argument("--fresh-embedder", default="fake", help="embedder of the daily fresh indexes")
    ap.add_argument("--work", default="/tmp/pagesync-replay", help="scratch dir (site, nginx, indexes, reports)")
    ap.add_argument("--code", default=str(REPO), help="the pagesync source tree to run (PYTHONPATH)")
    ap.add_argument("--out", default=str(REPO / "bench/results/replay_docs_history.md"))
    ap.add_argument("--render-only", metavar="JSON", help="only re-render --out from a results JSON")
    args = ap.parse_args()
    if args.render_only:
        raw = json.loads(Path(args.render_only).read_text())
        Path(args.out).write_text(render_markdown(raw))
        return 0

    if not Path(args.git_dir).exists():
        raise SystemExit(f"no git repo at {args.git_dir}: clone https://github.com/fastapi/fastapi and pass --git-dir")
    if not (os.path.isfile(NGINX) and os.access(NGINX, os.X_OK)):
        raise SystemExit(f"nginx not found ({NGINX}): apt-get install nginx-light")
    try:
        import markdown  # noqa: F401
        import pymdownx  # noqa: F401
    except ImportError:
        raise SystemExit("needs `markdown` and `pymdown-extensions`: pip install markdown pymdown-extensions") from None

    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO), *sys.argv[1:]])
    work = Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    root, reports = work / "site", work / "reports"
    for d in (root, reports, work / "nginx", work / "evidence"):
        d.mkdir(parents=True)
    git = Git(args.git_dir)
    renderer = Renderer(git, args.docs_dir)
    lastmods = Lastmods(git, args.docs_dir)
    ps = Pagesync(Path(args.code), reports)
    nginx = Nginx(work / "nginx", root)
    nginx.start()
    sitemap = nginx.base + "/sitemap.xml"
    inc = Index("incremental", work / "incremental", args.embedder)
    same_embedder = args.embedder == args.fresh_embedder  # then vectors are compared too
    ignore = {"fetched_at"} | ({"embedder"} if not same_embedder else set())
    code_rev = (
        subprocess.run(
            ["git", "-C", args.code, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or f"source tree at {args.code} (not a git checkout)"
    )
    code_dirty = subprocess.run(
        ["git", "-C", args.code, "status", "--porcelain", "--", "sync", "chunking", "embedders"],
        capture_output=True,
        text=True,
    ).stdout.strip()

    days = [date.fromisoformat(args.start) + timedelta(days=i) for i in range(args.days)]
    records: list[dict] = []
    fresh_hashes_by_day: dict[str, dict[str, str]] = {}
    prev_fresh: dict[str, dict] = {}
    prev_commit = None
    html_changed_day: dict[str, str] = {}  # url -> last day its HTML was (re)written
    lastmod_changed_day: dict[str, str] = {}
    bugs: list[dict] = []
    lags: list[dict] = []
    t_start = time.monotonic()

    def check(tag: str, day_label: str, rec: dict) -> None:
        """Fresh index of the site as served now; compare with the incremental chain."""
        fresh = Index(f"fresh-{tag}", work / f"fresh-{tag}", args.fresh_embedder)
        frep = ps.run(fresh, sitemap, now_of[tag], tag)
        rec["fresh"] = {k: frep[k] for k in ("pages_added", "chunks_embedded", "seconds", "pages_failed")}
        inc_pts, fresh_pts = ps.export(inc, same_embedder), ps.export(fresh, same_embedder)
        fresh_hashes_by_day[day_label] = page_hashes(fresh_pts)
        diffs = compare(inc_pts, fresh_pts, ignore)
        rows = state_rows(inc)
        inc_h, fresh_h = page_hashes(inc_pts), page_hashes(fresh_pts)
        rec["points_incremental"], rec["points_fresh"] = len(inc_pts), len(fresh_pts)
        rec["equal"] = not diffs
        rec["diff_pages"] = len(diffs)
        classified = []
        for url, what in sorted(diffs.items()):
            row = rows.get(url, {})
            fetched = row.get("last_fetched_at")
            fday = datetime.fromtimestamp(fetched, tz=timezone.utc).date().isoformat() if fetched else None
            served_then = fresh_hashes_by_day.get(fday, {}).get(url) if fday else None
            lm_moved_since = lastmod_changed_day.get(url, "") > (fday or "")
            is_lag = (
                inc_h.get(url) is not None
                and fresh_h.get(url) is not None
                and served_then == inc_h.get(url)
                and fday != day_label
                and not lm_moved_since
            )
            item = {
                "day": day_label,
                "url": url,
                "differences": what[:6],
                "n_differences": len(what),
                "incremental_hash": inc_h.get(url),
                "fresh_hash": fresh_h.get(url),
                "state": {
                    k: row.get(k)
                    for k in ("status", "content_hash", "chunk_count", "etag", "sitemap_lastmod", "pending_hash")
                },
                "last_fetched_day": fday,
                "due_at": (
                    datetime.fromtimestamp(row["due_at"], tz=timezone.utc).isoformat() if row.get("due_at") else None
                ),
                "html_last_written": html_changed_day.get(url),
                "lastmod_last_moved": lastmod_changed_day.get(url),
            }
            (lags if is_lag else bugs).append(item)
            classified.append("lag" if is_lag else "BUG")
        rec["diff_lag"], rec["diff_bug"] = classified.count("lag"), classified.count("BUG")
        if diffs:
            ev = work / "evidence" / tag
            ev.mkdir(parents=True, exist_ok=True)
            for name, pts in (("incremental", inc_pts), ("fresh", fresh_pts)):
                with open(ev / f"{name}.jsonl", "w") as fh:
                    for pid, p in sorted(pts.items()):
                        if p["url"] in diffs:
                            fh.write(json.dumps({"id": pid, "payload": p}, sort_keys=True) + "\n")
        shutil.rmtree(fresh.dir)
        return fresh_pts

    now_of: dict[str, datetime] = {}
    pages: list = []
    try:
        for n, day in enumerate(days):
            tag = f"d{n:02d}-{day.isoformat()}"
            commit = git.day_commit(args.rev, day)
            t_render = time.monotonic()
            pages = renderer.pages(commit, args.only, args.max_pages)
            if prev_commit is None:
                lastmods.init(commit, {p.src for p in pages})
                moved = {p.src for p in pages}
            else:
                moved = lastmods.advance(prev_commit, commit)
            html = renderer.render_site(pages, nginx.base)
            mtime = git.commit_time(commit)
            added, rewritten, deleted = write_site(root, html, mtime)
            write_sitemap(root, nginx.base, pages, lastmods)
            render_s = time.monotonic() - t_render
            for u in added + rewritten:
                html_changed_day[nginx.base + u] = day.isoformat()
            src_to_url = {p.src: nginx.base + p.url for p in pages}
            for src in moved:
                if src in src_to_url:
                    lastmod_changed_day[src_to_url[src]] = day.isoformat()
            md_changed = (
                []
                if prev_commit is None
                else [
                    ln
                    for ln in git("diff", "--name-only", prev_commit, commit, "--", args.docs_dir).splitlines()
                    if ln.endswith(".md")
                ]
            )
            now = datetime(day.year, day.month, day.day, 23, 59, 59, tzinfo=timezone.utc)
            now_of[tag] = now
            rep = ps.run(inc, sitemap, now, tag)
            rec = {
                "tag": tag,
                "day": day.isoformat(),
                "commit": commit[:10],
                "pages": len(pages),
                "md_files_changed": len(md_changed),
                "html_added": len(added),
                "html_rewritten": len(rewritten),
                "html_deleted": len(deleted),
                "render_seconds": round(render_s, 1),
                "inc": {
                    k: rep.get(k, 0)
                    for k in (
                        "pages_in_sitemaps",
                        "pages_due",
                        "pages_fetched",
                        "pages_not_modified",
                        "pages_unchanged",
                        "pages_changed",
                        "pages_added",
                        "pages_removed",
                        "pages_failed",
                        "chunks_embedded",
                        "chunks_reused",
                        "chunks_deleted",
                        "chunks_written",
                        "bytes_downloaded",
                        "seconds",
                        "lastmod_trusted",
                        "exit_code",
                    )
                },
                "inc_errors": rep["errors"][:5],
                "loadavg_1m": round(os.getloadavg()[0], 1),
            }
            fresh_pts = check(tag, day.isoformat(), rec)
            # What other strategies would have embedded today (ground truth from the fresh index):
            f_by, p_by = by_url(fresh_pts), by_url(prev_fresh)
            rec["full_reembed_chunks"] = len(fresh_pts)
            text_changed = [
                u for u, ps_ in f_by.items() if u not in p_by or p_by[u][0]["content_hash"] != ps_[0]["content_hash"]
            ]
            rec["pages_text_changed"] = len(text_changed)
            rec["page_level_chunks"] = sum(len(f_by[u]) for u in text_changed)
            prev_texts = {(p["url"], p["text"]) for p in prev_fresh.values()}
            rec["chunk_level_chunks"] = sum(1 for p in fresh_pts.values() if (p["url"], p["text"]) not in prev_texts)
            prev_fresh = fresh_pts
            prev_commit = commit
            records.append(rec)
            i = rec["inc"]
            print(
                f"{tag} {commit[:8]} pages={len(pages)} md+-={len(md_changed)} html +{len(added)} ~{len(rewritten)} "
                f"-{len(deleted)} | fetched={i['pages_fetched']} 304={i['pages_not_modified']} "
                f"same={i['pages_unchanged']} chg={i['pages_changed']} add={i['pages_added']} "
                f"rm={i['pages_removed']} fail={i['pages_failed']} emb={i['chunks_embedded']} "
                f"reused={i['chunks_reused']} "
                f"({i['seconds']}s) | full={rec['full_reembed_chunks']} page-level={rec['page_level_chunks']} "
                f"chunk-level={rec['chunk_level_chunks']} | equal={rec['equal']} lag={rec['diff_lag']} "
                f"bug={rec['diff_bug']} [{time.monotonic() - t_start:.0f}s]",
                flush=True,
            )

        # -- end checks ----------------------------------------------------------------------
        # 1. --full catch-up: re-reads every page once, so pages lagging behind a lastmod that
        #    did not move are brought up to date (whatever it embeds is that lag, listed).
        # 2. --full again with nothing changed on the site: every page 304, nothing embedded.
        # 3. every page's nav/footer changed (no text change), --full: all 200, nothing embedded.
        last = days[-1]
        finals: dict[str, dict] = {}
        t = datetime(last.year, last.month, last.day, 23, 59, 59, tzinfo=timezone.utc)
        for k, tag in enumerate(("end-full-catchup", "end-full-nochange")):
            now_of[tag] = t + timedelta(hours=1 + k)
            finals[tag] = ps.run(inc, sitemap, now_of[tag], tag, "--full")
        renderer.nav_variant = 1
        html = renderer.render_site(pages, nginx.base)
        added, rewritten, deleted = write_site(root, html, time.time())
        tag = "end-nav-only"
        now_of[tag] = t + timedelta(hours=3)
        rep = ps.run(inc, sitemap, now_of[tag], tag, "--full")
        rep["html_rewritten"] = len(rewritten)
        finals[tag] = rep
        rec = {"tag": tag}
        check(tag, last.isoformat() + "+nav", rec)
        finals[tag]["equal"] = rec["equal"]
        finals[tag]["diff_bug"] = rec["diff_bug"]
        finals[tag]["diff_lag"] = rec["diff_lag"]
    finally:
        nginx.stop()
        git.close()

    total_s = time.monotonic() - t_start
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = {
        "command": command,
        "args": vars(args),
        "code_rev": code_rev,
        "code_dirty": bool(code_dirty),
        "records": records,
        "finals": finals,
        "bugs": bugs,
        "lags": lags,
        "pagesync_commands": ps.log[:3],
        "total_seconds": round(total_s),
    }
    out.with_suffix(".json").write_text(json.dumps(raw, indent=1, default=str) + "\n")
    out.write_text(render_markdown(raw))
    print(
        f"\nwrote {out} and {out.with_suffix('.json')}; bugs={len(bugs)} lags={len(lags)}; "
        f"evidence under {work / 'evidence'}"
    )
    return 1 if bugs else 0


def render_markdown(raw: dict) -> str:
    a, recs, finals = raw["args"], raw["records"], raw["finals"]
    first = recs[0]
    i0 = first["inc"]
    L = []
    L.append("# Replay of a real docs site's edit history through nginx + pagesync\n")
    L.append(
        f"Generated by `bench/replay_docs_history.py` in {raw['total_seconds']} s "
        f"(pagesync code: {raw['code_rev']}{' + uncommitted changes' if raw['code_dirty'] else ''}).\n"
    )
    loads = [r.get("loadavg_1m") for r in recs if r.get("loadavg_1m") is not None]
    if loads:
        L.append(
            f"Machine: {os.cpu_count()} CPUs; 1-minute load average after each day's pass "
            f"{min(loads)}..{max(loads)} (timings are wall clock, under that load).\n"
        )
    L.append("```\n" + raw["command"] + "\n```\n")
    scope = ", ".join(a["only"]) if a["only"] else "all of " + a["docs_dir"]
    if a["max_pages"]:
        scope += f", first {a['max_pages']} pages"
    L.append(
        f"- Source: `{a['git_dir']}` ({a['rev']}), `{a['docs_dir']}` ({scope}), code samples included from "
        "docs_src/; one snapshot per UTC day = that day's last first-parent commit."
    )
    L.append(f"- Window: {recs[0]['day']} .. {recs[-1]['day']} ({len(recs)} days); day 1 is the initial index.")
    L.append(
        "- Served by nginx (static files, ETag = mtime-size, gzip on); sitemap lastmod = the markdown file's "
        "last commit date; only files whose HTML changed are rewritten."
    )
    L.append(
        f"- Incremental chain embedder: `{a['embedder'] or 'default (bundled all-MiniLM-L6-v2)'}`; daily fresh "
        f"indexes: `{a['fresh_embedder']}`. Compared with `pagesync export`: ids, payloads except "
        f"{'`fetched_at` and `embedder`' if a['embedder'] != a['fresh_embedder'] else '`fetched_at`'}, texts"
        f"{', vectors' if a['embedder'] == a['fresh_embedder'] else ''}.\n"
    )
    L.append("## Initial index\n")
    rate = i0["chunks_embedded"] / i0["seconds"] if i0["seconds"] else 0
    fr = first["fresh"]
    written = i0.get("chunks_written") or i0["chunks_embedded"]
    L.append(
        "| pages | chunks | embedded (distinct texts) | seconds (end to end) | embedded/s | same site, fake embedder: seconds |"
    )
    L.append("|---:|---:|---:|---:|---:|---:|")
    L.append(
        f"| {i0['pages_added']} | {written} | {i0['chunks_embedded']} | {i0['seconds']:.1f} | {rate:.1f} | "
        f"{fr['seconds']:.1f} |"
    )
    emb_only = i0["seconds"] - fr["seconds"]
    if emb_only > 0:
        L.append(
            f"\nModel time alone (difference of the two runs): ~{emb_only:.0f} s, "
            f"~{i0['chunks_embedded'] / emb_only:.0f} chunks/s.\n"
        )
    L.append("## Per day (incremental pass)\n")
    L.append(
        "`md` = markdown files changed in git that day; `html +/~/-` = files added/rewritten/deleted on disk; "
        "`fetched` = pages requested (due, new or lastmod moved); `emb` = chunks pagesync embedded; "
        "`reused` = chunks written with a vector reused (stored for the same text, or embedded earlier in the pass); "
        "`page-level` = chunks of the pages whose extracted text really changed (ground truth from the fresh "
        "index: the least a page-granular re-embed can do); `chunk-level` = chunks whose text is new; "
        "`full` = chunks of a full re-embed; `inc==fresh` = export comparison.\n"
    )
    L.append(
        "| day | commit | pages | md | html +/~/- | fetched | 304 | unchanged | changed | added | removed | failed "
        "| emb | reused | page-level | chunk-level | full | s | inc==fresh |"
    )
    L.append("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    tot = {"emb": 0, "reused": 0, "page": 0, "chunk": 0, "full": 0}
    for r in recs:
        i = r["inc"]
        eq = "yes" if r["equal"] else f"no: {r['diff_lag']} lag, {r['diff_bug']} bug"
        L.append(
            f"| {r['day']} | {r['commit'][:8]} | {r['pages']} | {r['md_files_changed']} | "
            f"{r['html_added']}/{r['html_rewritten']}/{r['html_deleted']} | {i['pages_fetched']} | "
            f"{i['pages_not_modified']} | {i['pages_unchanged']} | {i['pages_changed']} | {i['pages_added']} | "
            f"{i['pages_removed']} | {i['pages_failed']} | {i['chunks_embedded']} | {i.get('chunks_reused', 0)} | "
            f"{r['page_level_chunks']} | "
            f"{r['chunk_level_chunks']} | {r['full_reembed_chunks']} | {i['seconds']:.1f} | {eq} |"
        )
        if r is not first:
            tot["emb"] += i["chunks_embedded"]
            tot["reused"] += i.get("chunks_reused", 0)
            tot["page"] += r["page_level_chunks"]
            tot["chunk"] += r["chunk_level_chunks"]
            tot["full"] += r["full_reembed_chunks"]
    L.append(
        f"\nDays 2..{len(recs)}: pagesync embedded **{tot['emb']}** chunks (and reused {tot['reused']}); "
        f"page-level ground truth "
        f"{tot['page']}; chunk-level {tot['chunk']}; daily full re-embeds would have been {tot['full']} "
        f"({tot['full'] / max(tot['emb'], 1):.0f}x).\n"
    )
    L.append("## End checks\n")
    L.append("| check | fetched | 304 | unchanged | changed | emb | written | bytes | expectation | ok |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    live = recs[-1]["pages"]

    def row(f: dict, label: str, expect: str, ok: bool | None) -> None:
        L.append(
            f"| {label} | {f['pages_fetched']} | {f['pages_not_modified']} | {f['pages_unchanged']} | "
            f"{f['pages_changed']} | {f['chunks_embedded']} | {f['chunks_written']} | {f['bytes_downloaded']} | "
            f"{expect} | {'-' if ok is None else 'yes' if ok else '**NO**'} |"
        )

    if "end-full-catchup" in finals:
        f = finals["end-full-catchup"]
        caught = ", ".join(f"{c['url'].split('/', 3)[-1]} ({c.get('chunks', '?')})" for c in f.get("changes", []))
        row(f, "`--full` catch-up", f"re-reads all; changes = pages that lagged: {caught or 'none'}", None)
    f = finals["end-full-nochange"]
    row(
        f,
        "`--full`, nothing changed",
        f"all {live} pages 304, 0 embedded",
        f["pages_not_modified"] == live and f["chunks_embedded"] == 0 and f["chunks_written"] == 0,
    )
    f = finals["end-nav-only"]
    row(
        f,
        "nav/footer of every page changed, `--full`",
        f"{f['html_rewritten']} files rewritten: all 200 + unchanged, 0 embedded",
        f["pages_unchanged"] == live and f["chunks_embedded"] == 0 and f["chunks_written"] == 0,
    )
    bad = [c for c in f.get("changes", []) if c["action"] != "unchanged"]
    if bad:
        L.append(
            "\nPages the nav-only change re-embedded: "
            + ", ".join(f"`{c['url'].split('/', 3)[-1]}` ({c['action']}, {c.get('chunks', '?')} chunks)" for c in bad)
            + "."
        )
    L.append(
        f"\nAfter the nav-only pass, incremental == fresh: {'yes' if f['equal'] else 'no'}"
        f" ({f['diff_bug']} bug, {f['diff_lag']} lag).\n"
    )
    L.append("## Differences between incremental and fresh\n")
    if not raw["bugs"] and not raw["lags"]:
        L.append("None: every day, the incremental collection equalled a fresh index of the same site.\n")
    if raw["lags"]:
        L.append(
            f"{len(raw['lags'])} page-days of **lag** (not bugs): the page's text changed without its sitemap "
            "lastmod moving (its markdown was untouched; the change came from an included code sample or "
            "from extraction picking up changed boilerplate), so pagesync, trusting lastmod, kept the text it "
            "read on its last visit until the page fell due.\n"
        )
        L.append("| day | url | last visited | due | html last written | lastmod last moved |")
        L.append("|---|---|---|---|---|---|")
        for x in raw["lags"][:40]:
            L.append(
                f"| {x['day']} | {x['url'].split('/', 3)[-1]} | {x['last_fetched_day']} | {x['due_at']} | "
                f"{x['html_last_written']} | {x['lastmod_last_moved']} |"
            )
        if len(raw["lags"]) > 40:
            L.append(f"| ... | {len(raw['lags']) - 40} more in the JSON | | | | |")
        L.append("")
    if raw["bugs"]:
        L.append(f"**{len(raw['bugs'])} page-days where incremental != fresh with no lag to explain it (bugs):**\n")
        for x in raw["bugs"][:30]:
            L.append(
                f"- {x['day']} `{x['url']}`: {'; '.join(x['differences'])}"
                f"{' ...' if x['n_differences'] > len(x['differences']) else ''} "
                f"(state: {x['state']}, last visited {x['last_fetched_day']})"
            )
        L.append("")
    L.append("Raw figures: `" + Path(raw["args"]["out"]).with_suffix(".json").name + "` beside this file.\n")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
