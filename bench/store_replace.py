"""Per-page replace cost vs collection size, embedded stores side by side.

For each size N: fill a collection with N points (10 chunks a page, 384-d random unit
vectors); then time replacing `--replaces` random pages a size, one at a time
(delete-by-url + insert 10 points, as the engine does), in rounds that visit every size in
turn, all stores open. The figure that matters is the ratio
cost(N_large) / cost(N_small): a store whose replace scans the collection grows with N.
Mean, median and p90 are reported: on a shared 2-core machine a few replaces in a hundred
wait milliseconds for the CPU, so a mean over a few dozen replaces is mostly that noise.
For the embedded store, each replace's steps are timed too (`steps_ms`: the count of the
url's points, the delete by url filter, the upsert), through the same shard calls
`EdgeStore.replace_pages` makes.

    .venv/bin/python bench/store_replace.py [--sizes 10000,100000] [--backends edge,local] [--replaces 500]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The checkout this script lives in, before any installed copy.
sys.path.insert(0, str(REPO))

from sync.core.ids import chunk_id, point_id  # noqa: E402
from sync.edges.client_store import ClientStore  # noqa: E402
from sync.edges.edge_queries import url_filter  # noqa: E402
from sync.edges.edge_store import EdgeStore  # noqa: E402
from sync.edges.store import PageWrite, StoredPoint  # noqa: E402

DIM = 384
CHUNKS = 10


def vec(rng: random.Random) -> list[float]:
    v = [rng.random() - 0.5 for _ in range(DIM)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def page(url: str, rng: random.Random, gen: int) -> PageWrite:
    pts = []
    for i in range(CHUNKS):
        cid = chunk_id(url, i)
        pts.append(
            StoredPoint(
                point_id(cid),
                {"url": url, "chunk_id": cid, "chunk_index": i, "content_hash": f"h{gen}", "text": f"text {gen} {i}"},
                vec(rng),
            )
        )
    return PageWrite(url, pts)


def open_store(backend: str, tmp: Path, search_threads: int | None = 1):
    if backend == "edge":
        return EdgeStore(tmp, "bench", search_threads=search_threads)
    from qdrant_client import QdrantClient

    return ClientStore(QdrantClient(path=str(tmp / "local")), "bench")


def _stats(xs: list[float]) -> dict:
    xs = sorted(x * 1000 for x in xs)
    return {"mean": statistics.mean(xs), "median": xs[len(xs) // 2], "p90": xs[int(len(xs) * 0.9)], "max": xs[-1]}


def _edge_steps(store: EdgeStore, w: PageWrite) -> tuple[float, float, float]:
    """One replace as `EdgeStore.replace_pages` does it, each shard call timed."""
    shard, qe = store._open(), store._qe
    f = url_filter(qe, w.url)
    t0 = time.perf_counter()
    n = shard.count(qe.CountRequest(exact=True, filter=f))
    t1 = time.perf_counter()
    if n:
        shard.update(qe.UpdateOperation.delete_points_by_filter(f))
    t2 = time.perf_counter()
    shard.update(qe.UpdateOperation.upsert_points(store._points(w.points)))
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def fill(store, n_points: int, rng: random.Random) -> float:
    """N points into `store`; the seconds spent inside the store (not making test vectors)."""
    store.ensure_collection(DIM)
    spent, batch, pages = 0.0, [], n_points // CHUNKS
    for p in range(pages):
        batch.extend(page(f"https://docs.example/p{p}", rng, 0).points)
        if len(batch) >= 5000 or p == pages - 1:
            t = time.perf_counter()
            store.upsert(batch)
            spent += time.perf_counter() - t
            batch = []
    return spent


def run(
    backend: str, sizes: list[int], rng: random.Random, replaces: int = 500, search_threads: int | None = 1
) -> list[dict]:
    """Fill one store per size, all kept open, then replace pages in rounds that visit every
    size in turn: the sizes share the machine's load of the moment, so their ratio is not
    one size's bad minute (the machine is shared; a 1M fill takes minutes)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{backend}-"))
    stores, rows = [], []
    try:
        for n in sizes:
            store = open_store(backend, tmp / str(n), search_threads)
            stores.append(store)
            rows.append(
                {
                    "backend": backend,
                    "points": n,
                    **({"search_threads": search_threads} if backend == "edge" else {}),
                    "fill_points_per_s": n / fill(store, n, rng),
                    "replaces": replaces,
                }
            )
        times: list[list[float]] = [[] for _ in sizes]
        steps: list[list[tuple[float, float, float]]] = [[] for _ in sizes]
        for _ in range(replaces):
            for i, (n, store) in enumerate(zip(sizes, stores)):
                w = page(f"https://docs.example/p{rng.randrange(n // CHUNKS)}", rng, 1)
                t = time.perf_counter()
                store.replace_pages([w])
                times[i].append(time.perf_counter() - t)
                if backend == "edge":
                    steps[i].append(
                        _edge_steps(store, page(f"https://docs.example/p{rng.randrange(n // CHUNKS)}", rng, 2))
                    )
        for i, (n, store) in enumerate(zip(sizes, stores)):
            rows[i].update(replace_ms=statistics.mean(times[i]) * 1000, replace=_stats(times[i]))
            if backend == "edge":
                rows[i]["steps_ms"] = {
                    k: _stats([s[j] for s in steps[i]]) for j, k in enumerate(("count", "delete", "upsert"))
                }
            assert store.count() == n
    finally:
        for store in stores:
            store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--backends", default="edge,local")
    ap.add_argument("--replaces", type=int, default=500, help="pages replaced (one at a time) a size")
    ap.add_argument(
        "--edge-search-threads",
        type=int,
        default=1,
        help="EdgeStore(search_threads=...); 0: Qdrant's default (one per CPU, as before 2026-11-30)",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here (make bench's summary reads it)")
    args = ap.parse_args()
    rows = []
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(7)
    print(
        f"| backend | points | fill (points/s) | replace one page, ms: mean / median / p90 | ratio vs {sizes[0]:,} "
        "(mean / median) | edge steps, median ms: count / delete / upsert |"
    )
    print("|---|---|---|---|---|---|")
    for backend in args.backends.split(","):
        got = run(backend, sizes, rng, args.replaces, args.edge_search_threads or None)
        base = got[0]
        for r in got:
            rows.append(
                {
                    **r,
                    "ratio_vs_first": r["replace_ms"] / base["replace_ms"],
                    "median_ratio_vs_first": r["replace"]["median"] / base["replace"]["median"],
                }
            )
            q, st = r["replace"], r.get("steps_ms")
            steps = " / ".join(f"{st[k]['median']:.3f}" for k in ("count", "delete", "upsert")) if st else ""
            print(
                f"| {backend} | {r['points']:,} | {r['fill_points_per_s']:,.0f} | {q['mean']:.2f} / {q['median']:.2f} / "
                f"{q['p90']:.2f} | {rows[-1]['ratio_vs_first']:.2f} / {rows[-1]['median_ratio_vs_first']:.2f} | {steps} |",
                flush=True,
            )
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
