#!/usr/bin/env python3
"""One-line edit to a long page: a pass with vector reuse against one without.

FastAPI's release notes (one page, ~1,000 chunks at the default chunk settings) gain a
line most days. This renders that page from the FastAPI git history the way
`bench/replay_docs_history.py` renders the docs, serves it on 127.0.0.1, indexes it, then
twice adds one bullet under "Latest Changes" and syncs: once with vector reuse (the
default), once with `reuse_vectors=False` (what every version before it did: every chunk
of a changed page through the model). Each pass gets a fresh embedder instance, as a CLI
run would (model weights loaded inside the pass; the torch import is not counted).

    .venv/bin/python bench/reuse_edit.py                      # the bundled all-MiniLM-L6-v2
    .venv/bin/python bench/reuse_edit.py --embedder fake      # plumbing only, seconds
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from replay_docs_history import DEFAULT_GIT_DIR, Git, Renderer  # noqa: E402

from chunking import Splitter  # noqa: E402
from demo.site_server import Site, SiteServer  # noqa: E402
from embedders import make_embedder  # noqa: E402
from sync.engine import PassConfig, arun_pass  # noqa: E402
from sync.edges.fetcher import Fetcher, make_client  # noqa: E402
from sync.edges.state import StateDB  # noqa: E402
from sync.edges.edge_store import EdgeStore  # noqa: E402

PAGE = "release-notes.md"


def one_line_edit(markdown: str, n: int) -> str:
    """A new first bullet under the first heading below "## Latest Changes"."""
    m = re.search(r"^## Latest Changes\s*\n(?:.*\n)*?(### .*\n\s*\n)", markdown, re.M)
    if not m:
        raise SystemExit("no '## Latest Changes' subsection in the page")
    line = (
        f"* 📝 Fix typo number {n} in the docs. PR [#9{n:04d}](https://github.com/fastapi/fastapi/pull/9{n:04d}) "
        f"by [@someone](https://github.com/someone).\n"
    )
    return markdown[: m.end()] + line + markdown[m.end() :]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", default=os.environ.get("REPLAY_GIT_DIR") or DEFAULT_GIT_DIR)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--docs-dir", default="docs/en/docs")
    ap.add_argument("--embedder", default=None, help="default: the bundled all-MiniLM-L6-v2; 'fake' for a dry check")
    ap.add_argument("--out", default=None, help="also write the result table (markdown) here")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    git = Git(args.git_dir)
    commit = git("rev-parse", args.rev).strip()
    renderer = Renderer(git, args.docs_dir)
    (page,) = renderer.pages(commit, [PAGE], None)
    work = Path(tempfile.mkdtemp(prefix="pagesync-reuse-edit-"))
    site = Site()
    rows = []
    try:
        with SiteServer(site) as server:
            site.server = server  # type: ignore[attr-defined]

            def publish(markdown: str, mtime: float) -> None:
                page.markdown = markdown
                html = renderer.render_site([page], server.base_url)[page.url]
                site.set(page.url, html, mtime=mtime)

            async def one_pass(now: datetime, **cfg):
                emb = make_embedder(args.embedder)  # fresh, as in a CLI run: loads its weights if it embeds
                store = EdgeStore(work / "qdrant", "pages")
                with StateDB(work / "state.db") as st:
                    async with make_client(timeout=30) as client:
                        try:
                            t0, c0 = time.monotonic(), time.process_time()
                            rep = await arun_pass(
                                PassConfig(sitemaps=[server.url("/sitemap.xml")], now=now, full=True, **cfg),
                                fetcher=Fetcher(client, respect_robots=False),
                                store=store,
                                state=st,
                                embedder=emb,
                                splitter=Splitter(),
                            )
                            return rep, time.monotonic() - t0, time.process_time() - c0
                        finally:
                            store.close()

            original = page.markdown
            t = datetime(2026, 1, 1, tzinfo=timezone.utc)
            publish(original, 1.7e9)
            for label, markdown, cfg in (
                ("initial index", original, {}),
                ("one-line edit, vector reuse (new default)", one_line_edit(original, 1), {}),
                (
                    "another one-line edit, no reuse (before)",
                    one_line_edit(one_line_edit(original, 1), 2),
                    {"reuse_vectors": False},
                ),
            ):
                if markdown is not original:
                    publish(markdown, 1.7e9 + len(rows) * 100)
                t += timedelta(hours=1)
                rep, secs, cpu = asyncio.run(one_pass(t, **cfg))
                assert rep.pages_failed == 0, rep.errors
                rows.append((label, rep.chunks_written, rep.chunks_embedded, rep.chunks_reused, secs, cpu))
                print(
                    f"{label}: {rep.chunks_written} chunks written, {rep.chunks_embedded} embedded, "
                    f"{rep.chunks_reused} reused, {secs:.1f} s, {cpu:.1f} s CPU",
                    flush=True,
                )
    finally:
        git.close()
        shutil.rmtree(work, ignore_errors=True)

    load = os.getloadavg()[0]
    lines = [
        "# One-line edit to FastAPI's release notes (`bench/reuse_edit.py`)\n",
        f"Page `{args.docs_dir}/{PAGE}` at {commit[:10]}, rendered like the replay; embedder "
        f"`{args.embedder or 'default (bundled all-MiniLM-L6-v2)'}`; default chunk settings; {os.cpu_count()} CPUs, "
        f"1-minute load {load:.1f} at the end. Seconds: the whole pass (fetch, extract, chunk, read vectors, "
        f"embed incl. loading the weights, write), wall clock and CPU time of the process (all threads).\n",
        "| pass | chunks written | embedded | reused | seconds | CPU seconds |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {label} | {w} | {e} | {r} | {s:.1f} | {c:.1f} |" for label, w, e, r, s, c in rows),
        "",
    ]
    text = "\n".join(lines)
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
