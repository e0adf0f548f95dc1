#!/usr/bin/env python3
"""Where the time of `make bench`'s pass-throughput row (the initial index) goes: one
initial pass in-process, then the same embedder instance on the same distinct chunk texts
(batches of 64), in the same process.

Prints pass and raw chunks/s, their ratio, and per stage the calls, wall seconds and CPU
seconds of the calling thread (extract_page, Splitter.split, the embedder's `embed`,
EdgeStore.replace_pages and vectors_for_url, state saves; fetch and the engine's async
`Visitor._process`/`EmbedQueue.flush` as wall time only). Stages run in worker threads overlap each other,
so their wall times do not add up to the pass.

    .venv/bin/python bench/pipeline_profile.py [MAX_PAGES]   (REPLAY_GIT_DIR: a FastAPI clone)
"""

import json
import os
import sys
import time
import threading
import shutil
import tempfile
import functools
import asyncio
import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "bench"))
# after the sys.path set-up above: the repository's and bench/'s modules
from replay_docs_history import DEFAULT_GIT_DIR, Git, Lastmods, Nginx, Renderer  # noqa: E402
from pipeline import render, T0  # noqa: E402
import sync.stages.visit as visit_stage  # noqa: E402
from sync.stages.embed import EmbedQueue  # noqa: E402
from sync.stages.outcomes import Outcomes  # noqa: E402
from sync.stages.visit import Visitor  # noqa: E402
import chunking  # noqa: E402
import sync.edges.edge_store as st  # noqa: E402
import sync.edges.fetcher as fe  # noqa: E402
from embedders import make_embedder  # noqa: E402

_ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
_ap.add_argument("max_pages", nargs="?", type=int, default=None, help="profile the first N pages only")
max_pages = _ap.parse_args().max_pages
work = Path(tempfile.mkdtemp(prefix="ovlprof-"))
T = {}
lock = threading.Lock()


def add(k, wall, cpu):
    with lock:
        a = T.setdefault(k, [0, 0.0, 0.0])
        a[0] += 1
        a[1] += wall
        a[2] += cpu


def wrap(obj, name, key, is_async=False):
    f = getattr(obj, name)
    if is_async:

        @functools.wraps(f)
        async def g(*a, **k):
            t = time.perf_counter()
            try:
                return await f(*a, **k)
            finally:
                add(key, time.perf_counter() - t, 0.0)
    else:

        @functools.wraps(f)
        def g(*a, **k):
            t, c = time.perf_counter(), time.thread_time()
            try:
                return f(*a, **k)
            finally:
                add(key, time.perf_counter() - t, time.thread_time() - c)

    setattr(obj, name, g)


wrap(visit_stage, "extract_page", "extract")
wrap(chunking.Splitter, "split", "split")
wrap(st.EdgeStore, "replace_pages", "write")
wrap(st.EdgeStore, "vectors_for_url", "read_vectors")
wrap(fe.Fetcher, "fetch_page", "fetch(async, concurrent)", True)
wrap(EmbedQueue, "flush", "flush(async)", True)
wrap(EmbedQueue, "drain", "drain(async)", True)  # waiting for the batch in flight, then its writes
wrap(Visitor, "_process", "process(async)", True)
wrap(Outcomes, "save", "state save")
emb = make_embedder(None)
wrap(type(emb), "embed", "embed")
print("embedder", type(emb).__name__, file=sys.stderr)

git = Git(os.environ.get("REPLAY_GIT_DIR") or DEFAULT_GIT_DIR)
commit = git("rev-list", "-1", "--first-parent", f"--before={T0.isoformat()}", "HEAD").strip()
renderer = Renderer(git, "docs/en/docs")
pages = renderer.pages(commit, [], max_pages)
lastmods = Lastmods(git, "docs/en/docs")
lastmods.init(commit, {p.src for p in pages})
root = work / "site"
root.mkdir(parents=True)
nginx = Nginx(work / "nginx", root)
nginx.start()
try:
    render(renderer, pages, root, nginx.base, lastmods, T0.timestamp() - 86400)
    emb.embed(["warm up", "the model"])  # load apart
    T.clear()
    from sync.engine import PassConfig, arun_pass
    from sync.edges.fetcher import Fetcher, make_client
    from sync.edges.edge_store import EdgeStore
    from sync.edges.state import StateDB
    from chunking import Splitter

    store = EdgeStore(work / "qdrant", "pages")
    state = StateDB(work / "state.db")
    cfg = PassConfig(sitemaps=[nginx.base + "/sitemap.xml"], now=T0)

    async def go():
        async with make_client(user_agent="prof", timeout=30) as client:
            return await arun_pass(
                cfg,
                fetcher=Fetcher(client, respect_robots=False),
                store=store,
                state=state,
                embedder=emb,
                splitter=Splitter(),
            )

    c0, t0 = time.process_time(), time.perf_counter()
    rep = asyncio.run(go())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    passT = dict(T)
    T.clear()
    texts = list(
        dict.fromkeys(
            p.payload["text"]
            for p in sorted(
                store.scroll(payload_fields=["url", "chunk_index", "text"]),
                key=lambda p: (p.payload["url"], p.payload["chunk_index"]),
            )
        )
    )
    t = time.perf_counter()
    for i in range(0, len(texts), 64):
        emb.embed(texts[i : i + 64])
    raw = time.perf_counter() - t
    print(
        json.dumps(
            {
                "pages": len(pages),
                "chunks_embedded": rep.chunks_embedded,
                "raw_texts": len(texts),
                "pass_wall": wall,
                "pass_cpu_process": cpu,
                "pass_rate": rep.chunks_embedded / wall,
                "raw_s": raw,
                "raw_rate": len(texts) / raw,
                "ratio": (rep.chunks_embedded / wall) / (len(texts) / raw),
                "breakdown": {k: {"n": v[0], "wall": round(v[1], 2), "cpu": round(v[2], 2)} for k, v in passT.items()},
            },
            indent=1,
        )
    )
finally:
    nginx.stop()
    shutil.rmtree(work, ignore_errors=True)
