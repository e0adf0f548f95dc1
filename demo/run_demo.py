"""`make demo`: serve the bundled docs site on 127.0.0.1, sync it, edit it, sync again.

`make demo-docs` (`--docs`): build this project's own documentation site with MkDocs, serve
it, sync it, deploy an unchanged rebuild (every sitemap `lastmod` moves, no text does) and
sync again, then search it.

Every step runs the real `pagesync` command, as a user would, against the embedded
store (Qdrant Edge under demo/.work/qdrant) and the bundled offline model.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from site_server import Site, SiteServer  # noqa: E402

WORK = HERE / ".work"
KEYS = (
    "pages_in_sitemaps",
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
)


def pagesync(*args: str) -> int:
    cmd = [sys.executable, "-m", "sync", *args]
    print("$ " + shlex.join(["pagesync", *args]), flush=True)
    return subprocess.call(cmd, cwd=HERE.parent)


def exported(*args: str) -> dict[str, dict]:
    """`pagesync export --with-vectors` as {id: point}, fetched_at (the time of the fetch, also in
    the `metadata` object) left out."""
    out = subprocess.run(
        [sys.executable, "-m", "sync", "export", "--with-vectors", *args],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    points = {}
    for line in out.splitlines():
        p = json.loads(line)
        p["payload"].pop("fetched_at", None)
        if isinstance(p["payload"].get("metadata"), dict):
            p["payload"]["metadata"].pop("fetched_at", None)
        points[p["id"]] = p
    return points


def same_as_fresh(incremental: dict[str, dict], fresh: dict[str, dict]) -> str | None:
    """Why the incrementally synced collection differs from a fresh full index, or None."""
    if incremental.keys() != fresh.keys():
        return f"point ids differ: {len(incremental.keys() - fresh.keys())} extra, {len(fresh.keys() - incremental.keys())} missing"
    for pid, p in incremental.items():
        q = fresh[pid]
        if p["payload"] != q["payload"]:
            return f"payload of {p['payload'].get('chunk_id')} differs"
        # Reused vectors were computed in another batch than the fresh ones: equal to float noise.
        if max(abs(a - b) for a, b in zip(p["vector"], q["vector"])) > 1e-4:
            return f"vector of {p['payload'].get('chunk_id')} differs"
    return None


def show(report_path: Path, title: str) -> None:
    rep = json.loads(report_path.read_text())
    print(f"\n== {title} ==")
    for k in KEYS:
        print(f"  {k:<20} {rep[k]}")
    for c in rep["changes"]:
        print(f"  {c['action']:>8}  {c['url']}  {c.get('chunks', '')}")
    print(flush=True)


def apply_edits(site: Site) -> None:
    """The bundled edits: one page edited, one shrunk, one deleted, one added, one nav-only."""
    later = time.time() + 60
    for f in sorted((HERE / "edits").glob("*.html")):
        site.set("/" + f.name, f.read_bytes(), mtime=later)
    for name in (HERE / "edits" / "DELETE").read_text().split():
        site.remove("/" + name)


def build_docs(out: Path) -> None:
    """This project's documentation site, built with MkDocs (--strict) into `out`."""
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "-f",
            str(HERE.parent / "mkdocs.yml"),
            "-d",
            str(out),
        ],
        cwd=HERE.parent,
        env=env,
        check=True,
    )


def docs_site(root: Path) -> Site:
    """The built docs as a site to serve; MkDocs' 404 page is served but not listed as a page."""
    site = Site.from_dir(root)
    if "/404.html" in site.resources:
        site.resources["/404.html"].in_sitemap = False
    return site


def redeploy(site: Site) -> None:
    """A fresh deploy of the same build: every file new on the host, so every page's sitemap
    lastmod moves to one and the same stamp (the deploy's), while no byte changes."""
    later = time.time() + 60
    for path in site.pages():
        site.touch(path, later)


def edit_page(site: Site, path: str) -> None:
    """One page edited: a paragraph added at the end of its article, with its own later stamp."""
    html = site.resources[path].body.decode()
    added = "<p>An added paragraph: pagesync embeds this one and reuses every other chunk's vector.</p>"
    site.set(path, html.replace("</article>", added + "</article>", 1).encode(), mtime=time.time() + 120)


def docs_demo(embedder: list[str], work: Path = WORK) -> int:
    """Sync the docs site, a redeploy of it (nothing fetched), one edited page (only it is
    embedded), then audit and search it; everything under `work`."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    common = ["--qdrant-path", str(work / "qdrant"), "--state", str(work / "state.db"), *embedder]
    print("building the documentation site (mkdocs build --strict)", flush=True)
    build_docs(work / "site")
    site = docs_site(work / "site")
    steps = [
        ("pass 1: initial index of the docs site", None),
        ("pass 2: after a redeploy that moved every lastmod to one stamp (ignored as a deploy date)", redeploy),
        (
            "pass 3: after one page was edited (the others' moved lastmods cost a 304 each; only new text is embedded)",
            lambda s: edit_page(s, "/getting-started/index.html"),
        ),
    ]
    with SiteServer(site) as server:
        sitemap = server.url("/sitemap.xml")
        print(f"serving the docs at {server.base_url} (sitemap {sitemap}, {len(site.pages())} pages)\n")
        for i, (title, change) in enumerate(steps, 1):
            if change is not None:
                change(site)
            report = work / f"report-{i}.json"
            if pagesync("run", "--sitemap", sitemap, *common, "--quiet", "--report", str(report)) != 0:
                return 1
            show(report, title)
    if pagesync("audit", *common[:4]) != 0:
        return 1
    print()
    return pagesync(
        "search",
        "what stops a broken deploy from emptying the collection?",
        "--limit",
        "1",
        "--qdrant-path",
        str(work / "qdrant"),
        *embedder,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--docs", action="store_true", help="sync this project's own documentation site instead")
    ap.add_argument("--embedder", help="pagesync's --embedder (default: the bundled model)")
    ap.add_argument("--work", type=Path, default=WORK, help="the working directory (default demo/.work)")
    args = ap.parse_args(argv)
    emb = ["--embedder", args.embedder] if args.embedder else []
    if args.docs:
        return docs_demo(emb, args.work)
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    common = ["--qdrant-path", str(work / "qdrant"), "--state", str(work / "state.db")]
    site = Site.from_dir(HERE / "site")
    with SiteServer(site) as server:
        sitemap = server.url("/sitemap.xml")
        print(f"serving demo/site/ at {server.base_url} (sitemap {sitemap})\n")
        if pagesync("run", "--sitemap", sitemap, *emb, *common, "--report", str(work / "report-1.json")) != 0:
            return 1
        show(work / "report-1.json", "pass 1: initial index")

        apply_edits(site)
        print(
            "applied demo/edits/: config.html edited, faq.html shrunk, deploy.html deleted, "
            "plugins.html added, cli.html nav/footer only\n"
        )
        if pagesync("run", "--sitemap", sitemap, *emb, *common, "--report", str(work / "report-2.json")) != 0:
            return 1
        show(work / "report-2.json", "pass 2: after the edits (only changed text is embedded)")

        if pagesync("run", "--sitemap", sitemap, *emb, *common, "--full", "--report", str(work / "report-3.json")) != 0:
            return 1
        show(work / "report-3.json", "pass 3: --full over an unchanged site (conditional GETs, nothing embedded)")

        # The property the tests check after every sequence of edits: the incrementally
        # synced collection equals a fresh full index of the site as it is now.
        fresh = ["--qdrant-path", str(work / "fresh-qdrant"), "--state", str(work / "fresh-state.db")]
        print("== is the synced collection what a fresh full index of the site gives now? ==")
        if pagesync("run", "--sitemap", sitemap, *emb, *fresh, "--quiet") != 0:
            return 1
    incremental, full = exported(*common), exported(*fresh)
    why = same_as_fresh(incremental, full)
    print(
        f"  {'yes' if why is None else 'NO: ' + why}: {len(incremental)} points against {len(full)} "
        "(ids, payloads but fetched_at, vectors)\n",
        flush=True,
    )
    if why is not None:
        return 1
    if pagesync("audit", *common) != 0:
        return 1
    print()
    pagesync("status", *common)
    print()
    return pagesync(
        "search", "how do I write a plugin for a new store?", "--limit", "1", "--qdrant-path", str(work / "qdrant")
    )


if __name__ == "__main__":
    sys.exit(main())
