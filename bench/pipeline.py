#!/usr/bin/env python3
"""Embedding-bound passes on real docs (`make bench`: pass throughput and reuse).

The site: FastAPI's English docs rendered at one commit of its history (the renderer of
`replay_docs_history.py`: ~140 pages, including the ~600 KB release notes), served by
Debian's nginx on 127.0.0.1 with a sitemap whose lastmod comes from git.

Pass throughput, initial index: `pagesync run` with the default embedder, as a user runs it.
Baseline, in a fresh process of the same script: the same embedder (same class, batch
size) embedding exactly the chunk texts the pass stored, model load timed apart. Figures:
chunks/s of the pass, raw embedder chunks/s, their ratio (the goal is >= 0.9), peak RSS.

Reuse, a day of typical edits on that site: a new changelog entry at the top of the
release notes, one paragraph reworded on each of three pages, one page added, one page
removed (sitemap lastmod moved for the edited pages, as git would). Then one pass a
day later. Compared on the same edits and the same chunk texts:
- pagesync: `chunks_embedded` (model inputs) and `chunks_reused`;
- page-level replacement: every chunk of every changed or added page re-embedded;
- LangChain's `index()` with `cleanup="incremental"` (langchain_core's record manager
  and in-memory vector store, documents = the same chunks with `source` = URL, a
  counting embedding), run on version 1 then version 2 of the site.

    .venv/bin/python bench/pipeline.py [--git-dir DIR --commit REV --embedder NAME]

Writes bench/results/pipeline.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# the checkout this script lives in first; bench/ after it (its scripts are modules too)
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "bench"))

from replay_docs_history import (  # noqa: E402
    DEFAULT_GIT_DIR,
    NGINX,
    Git,
    Lastmods,
    Nginx,
    Page,
    Renderer,
    page_url,
    write_site,
    write_sitemap,
)

T0 = datetime(2024, 8, 1, tzinfo=timezone.utc)

# Embeds the given texts with a fresh embedder in this process: load, then timed batches.
RAW = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from embedders import make_embedder
texts = json.load(open(sys.argv[2]))
name = sys.argv[3] or None
batch = int(sys.argv[4])
e = make_embedder(name)
t = time.perf_counter(); e.embed(texts[:2]); load = time.perf_counter() - t
t = time.perf_counter()
for i in range(0, len(texts), batch):
    e.embed(texts[i:i + batch])
secs = time.perf_counter() - t
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"load_s": load, "embed_s": secs, "n": len(texts), "hwm_mb": hwm / 1024,
                  "embedder": type(e).__name__}))
"""


# ------------------------------------------------------------------------------ the site
def render(renderer: Renderer, pages: list[Page], root: Path, base: str, lastmods: Lastmods, mtime: float) -> None:
    write_site(root, renderer.render_site(pages, base), mtime)
    write_sitemap(root, base, pages, lastmods)


def day_of_edits(pages: list[Page], docs_dir: str) -> tuple[list[Page], dict[str, str]]:
    """Version 2 of the site and what changed: src -> 'changelog' | 'paragraph' | 'added' | 'removed'."""
    by_src = {p.src: p for p in pages}
    what: dict[str, str] = {}
    notes = next(p for p in pages if p.url == "/release-notes/")
    entry = (
        "## Latest Changes\n\n### Fixes\n\n* 🐛 Fix `OpenAPI` schema generation for `Annotated` dependencies "
        "with default values in path operations that declare a `response_model`. PR "
        "[#12345](https://github.com/fastapi/fastapi/pull/12345) by [@someone](https://github.com/someone).\n\n"
        "### Docs\n\n* 📝 Clarify how background tasks run after the response is sent. PR #12346.\n\n"
    )
    by_src[notes.src] = replace(notes, markdown=notes.markdown.replace("## Latest Changes\n", entry, 1))
    what[notes.src] = "changelog"
    prose = re.compile(r"^[A-Z][^\n`|<>{}]{120,}\.$", re.M)
    edited = 0
    for p in sorted(pages, key=lambda p: -len(p.markdown)):
        if p is notes or edited == 3:
            continue
        paras = prose.findall(p.markdown)
        if len(paras) < 6:
            continue
        old = paras[len(paras) // 2]
        new = old.replace(" the ", " this ", 1).rstrip(".") + ", as the example below shows."
        by_src[p.src] = replace(p, markdown=p.markdown.replace(old, new, 1))
        what[p.src] = "paragraph"
        edited += 1
    removed = next(
        p for p in sorted(pages, key=lambda p: p.src) if p.url.startswith("/advanced/") and p.src not in what
    )
    del by_src[removed.src]
    what[removed.src] = "removed"
    src = removed.src.rsplit("/", 1)[0] + "/rate-limiting.md"
    body = (
        "# Rate Limiting\n\nLimit how often a client can call your API with a dependency that counts requests "
        "per client and rejects the ones over the limit.\n\n## A dependency that counts\n\n"
        "Store a counter per client key and a window start. When the window has passed, reset it.\n\n"
        "```python\nfrom fastapi import Depends, FastAPI, HTTPException, Request\n\napp = FastAPI()\n```\n\n"
        "## Answer 429\n\nWhen the counter is over the limit, raise `HTTPException(status_code=429)` and set a "
        "`Retry-After` header so well-behaved clients wait.\n"
    )
    by_src[src] = Page(src, page_url(src[len(docs_dir) + 1 :]), "Rate Limiting", body)
    what[src] = "added"
    return sorted(by_src.values(), key=lambda p: p.src), what


# ------------------------------------------------------------------------------ pagesync
def pagesync(work: Path, sitemap: str, now: datetime, embedder: str | None, env: dict) -> dict:
    args = [
        "run",
        "--sitemap",
        sitemap,
        "--state",
        str(work / "state.db"),
        "--qdrant-path",
        str(work / "qdrant"),
        "--now",
        now.isoformat(),
        "--report",
        str(work / "report.json"),
        "--quiet",
        "--ignore-robots",
    ]
    if embedder:
        args += ["--embedder", embedder]
    probe = (
        "import runpy, sys, json; sys.argv = ['pagesync', *sys.argv[1:]]\ntry:\n    runpy.run_module('sync', run_name='__main__')\n"
        "except SystemExit as e:\n    code = e.code\nhwm = next(int(l.split()[1]) for l in open('/proc/self/status') "
        "if l.startswith('VmHWM'))\nprint('HWM', hwm / 1024, file=sys.stderr)\n"
    )
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, cwd=work)
    wall = time.perf_counter() - t
    if not (work / "report.json").exists():
        raise SystemExit(f"pagesync failed: {proc.stderr[-3000:]}")
    rep = json.loads((work / "report.json").read_text())
    hwm = next((float(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("HWM ")), None)
    return {**rep, "process_wall_s": wall, "hwm_mb": hwm}


def chunks_by_url(work: Path) -> dict[str, list[str]]:
    from sync.edges.edge_store import EdgeStore

    store = EdgeStore(work / "qdrant", "pages")
    try:
        rows: dict[str, list[tuple[int, str]]] = {}
        for p in store.scroll(payload_fields=["url", "chunk_index", "text"]):
            rows.setdefault(p.payload["url"], []).append((p.payload["chunk_index"], p.payload["text"]))
    finally:
        store.close()
    return {u: [t for _, t in sorted(v)] for u, v in rows.items()}


# ------------------------------------------------------------------------------ LangChain
def langchain_counts(v1: dict[str, list[str]], v2: dict[str, list[str]]) -> dict:
    """index(cleanup="incremental") on version 1, then version 2; what each call embedded."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.indexing import InMemoryRecordManager, index
    from langchain_core.vectorstores import InMemoryVectorStore

    class Counting(Embeddings):
        def __init__(self) -> None:
            self.n = 0

        def embed_documents(self, texts):
            self.n += len(texts)
            return [[float(len(t) % 7), 1.0] for t in texts]

        def embed_query(self, text):
            return [0.0, 1.0]

    emb = Counting()
    store = InMemoryVectorStore(emb)
    rm = InMemoryRecordManager("bench")
    rm.create_schema()

    def docs(v: dict[str, list[str]]):
        return [Document(page_content=t, metadata={"source": u}) for u in sorted(v) for t in v[u]]

    out = {}
    for tag, v in (("v1", v1), ("v2", v2)):
        before = emb.n
        res = index(docs(v), rm, store, cleanup="incremental", source_id_key="source")
        out[tag] = {**dict(res), "embedded": emb.n - before}
    # Incremental cleanup never sees a removed source: its chunks stay in the store.
    out["store_docs_after_v2"] = len(store.store)
    out["expected_docs_v2"] = len({(u, t) for u in v2 for t in v2[u]})
    return out


# ------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", default=os.environ.get("REPLAY_GIT_DIR") or DEFAULT_GIT_DIR)
    ap.add_argument("--commit", default=None, help="the site's commit (default: the last one before 2024-08-01)")
    ap.add_argument("--docs-dir", default="docs/en/docs")
    ap.add_argument("--embedder", default=None, help="default: pagesync's default embedder")
    ap.add_argument("--embed-batch", type=int, default=64, help="pagesync's --embed-batch default, for the baseline")
    ap.add_argument("--max-pages", type=int, default=None)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/pipeline.md")
    args = ap.parse_args(argv)
    if not Path(args.git_dir).exists():
        raise SystemExit(f"no git repo at {args.git_dir}: clone https://github.com/fastapi/fastapi and pass --git-dir")
    if not (os.path.isfile(NGINX) and os.access(NGINX, os.X_OK)):
        raise SystemExit(f"nginx not found ({NGINX}): apt-get install nginx-light")
    command = shlex.join([".venv/bin/python", "bench/pipeline.py", *(sys.argv[1:] if argv is None else argv)])
    work = args.work or Path(tempfile.mkdtemp(prefix="pagesync-pipeline-"))
    shutil.rmtree(work, ignore_errors=True)
    root = work / "site"
    root.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    git = Git(args.git_dir)
    commit = args.commit or git("rev-list", "-1", "--first-parent", f"--before={T0.isoformat()}", "HEAD").strip()
    renderer = Renderer(git, args.docs_dir)
    pages = renderer.pages(commit, [], args.max_pages)
    lastmods = Lastmods(git, args.docs_dir)
    lastmods.init(commit, {p.src for p in pages})
    nginx = Nginx(work / "nginx", root)
    nginx.start()
    out: dict = {"commit": commit, "command": command, "pages": len(pages), "cpus": os.cpu_count()}
    try:
        render(renderer, pages, root, nginx.base, lastmods, T0.timestamp() - 86400)
        sitemap = nginx.base + "/sitemap.xml"
        print(f"pass throughput: initial index of {len(pages)} pages ...", file=sys.stderr)
        first = pagesync(work, sitemap, T0, args.embedder, env)
        v1 = chunks_by_url(work)
        # The distinct texts: what the pass sent to the model (it embeds each text once).
        texts = list(dict.fromkeys(t for u in sorted(v1) for t in v1[u]))
        (work / "texts.json").write_text(json.dumps(texts))
        raw = subprocess.run(
            [
                sys.executable,
                "-c",
                RAW,
                str(REPO),
                str(work / "texts.json"),
                args.embedder or "",
                str(args.embed_batch),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        if raw.returncode:
            raise SystemExit(f"raw embedder run failed: {raw.stderr[-3000:]}")
        out["row1"] = {
            "pass": {
                k: first[k]
                for k in ("seconds", "chunks_embedded", "pages_added", "embedder", "process_wall_s", "hwm_mb")
                if k in first
            },
            "raw": json.loads(raw.stdout.strip().splitlines()[-1]),
        }
        r1 = out["row1"]
        print(
            f"  pass {r1['pass']['chunks_embedded']} chunks in {r1['pass']['seconds']:.0f} s; raw embedder "
            f"{r1['raw']['embed_s']:.0f} s + load {r1['raw']['load_s']:.1f} s",
            file=sys.stderr,
        )

        print("reuse: a day of edits ...", file=sys.stderr)
        when = (T0 + timedelta(hours=12)).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        pages2, what = day_of_edits(pages, args.docs_dir)
        for src, w in what.items():
            if w in ("changelog", "paragraph", "added"):
                lastmods.at[src] = when
        render(renderer, pages2, root, nginx.base, lastmods, (T0 + timedelta(hours=12)).timestamp())
        second = pagesync(work, sitemap, T0 + timedelta(days=1), args.embedder, env)
        v2 = chunks_by_url(work)
        changed_urls = {nginx.base + p.url for p in pages2 if what.get(p.src) in ("changelog", "paragraph", "added")}
        page_level = sum(len(v2.get(u, [])) for u in changed_urls)
        out["row2"] = {
            "edits": {
                w: sum(1 for x in what.values() if x == w) for w in ("changelog", "paragraph", "added", "removed")
            },
            "pagesync": {
                k: second.get(k)
                for k in (
                    "chunks_embedded",
                    "chunks_reused",
                    "chunks_deleted",
                    "chunks_written",
                    "pages_changed",
                    "pages_added",
                    "pages_removed",
                    "pages_fetched",
                    "seconds",
                )
            },
            "page_level": page_level,
            "langchain": langchain_counts(v1, v2),
            "release_notes_chunks": len(v2.get(nginx.base + "/release-notes/", [])),
        }
        r2 = out["row2"]
        print(
            f"  pagesync embedded {r2['pagesync']['chunks_embedded']} (reused {r2['pagesync']['chunks_reused']}); "
            f"page-level {page_level}; LangChain {r2['langchain']['v2']['embedded']}",
            file=sys.stderr,
        )
    finally:
        nginx.stop()
        git.close()
    write(out, args.out)
    print(args.out.read_text())
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def write(out: dict, path: Path) -> None:
    r1, r2 = out["row1"], out["row2"]
    p, raw = r1["pass"], r1["raw"]
    pass_rate = p["chunks_embedded"] / p["seconds"]
    raw_rate = raw["n"] / raw["embed_s"]
    raw_rate_load = raw["n"] / (raw["embed_s"] + raw["load_s"])
    ps, lc = r2["pagesync"], r2["langchain"]
    lines = [
        "# Embedding-bound passes on real docs",
        "",
        f"Command: `{out['command']}` ({out['cpus']} CPUs, shared with other jobs while it ran). FastAPI docs at "
        f"commit {out['commit'][:10]}: {out['pages']} pages, served by nginx on 127.0.0.1.",
        "",
        "## Pass throughput: initial index vs the raw embedder on the same chunks",
        "",
        "| pass: chunks | pass: s | pass: chunks/s | raw embedder: chunks/s (load excluded / included) | ratio pass / raw (excl. / incl. load) | pass peak RSS MB | embedder |",
        "|---|---|---|---|---|---|---|",
        f"| {p['chunks_embedded']:,} | {p['seconds']:.0f} | {pass_rate:.1f} | {raw_rate:.1f} / {raw_rate_load:.1f} | "
        f"{pass_rate / raw_rate:.2f} / {pass_rate / raw_rate_load:.2f} | {p.get('hwm_mb') or 0:.0f} | {raw['embedder']} |",
        "",
        "Goal: the pass at >= 0.9 of the raw embedder's throughput.",
        "",
        "## Reuse: a day of typical edits",
        "",
        f"Edits: {r2['edits']['changelog']} changelog entry (release notes: {r2['release_notes_chunks']} chunks), "
        f"{r2['edits']['paragraph']} paragraph edits, {r2['edits']['added']} page added, {r2['edits']['removed']} removed.",
        "",
        "| approach | chunks embedded | notes |",
        "|---|---|---|",
        f"| pagesync | {ps['chunks_embedded']:,} | {ps.get('chunks_reused') if ps.get('chunks_reused') is not None else 'n/a'} reused; "
        f"{ps['pages_changed']} changed, {ps['pages_added']} added, {ps['pages_removed']} removed; {ps['chunks_deleted']:,} deleted, "
        f"{ps['chunks_written']:,} written |",
        f"| page-level re-embed | {r2['page_level']:,} | every chunk of every changed or added page |",
        f"| LangChain `index()`, cleanup=incremental | {lc['v2']['embedded']:,} | added {lc['v2']['num_added']}, "
        f"skipped {lc['v2']['num_skipped']}, deleted {lc['v2']['num_deleted']}; store holds {lc['store_docs_after_v2']:,} "
        f"docs vs {lc['expected_docs_v2']:,} in the site (the removed page's chunks stay) |",
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    path.with_suffix(".json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
