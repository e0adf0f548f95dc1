"""Per-page replace cost vs collection size, embedded stores side by side.

For each size N: fill a collection with N points (10 chunks a page, 384-d random unit
vectors), then time replacing 50 pages (delete-by-url + insert 10 points, as the engine
does). The figure that matters is the ratio cost(N_large) / cost(N_small): a store whose
replace scans the collection grows with N.

    .venv/bin/python bench/store_replace.py [--sizes 10000,100000] [--backends edge,local]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The checkout first: run as a file, bench/ is sys.path[0] and bench/embedders.py would shadow
# the embedders package that sync imports.
sys.path.insert(0, str(REPO))

from sync.ids import chunk_id, point_id  # noqa: E402
from sync.store import ClientStore, EdgeStore, PageWrite, StoredPoint  # noqa: E402

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
        pts.append(StoredPoint(point_id(cid), {"url": url, "chunk_id": cid, "chunk_index": i,
                                               "content_hash": f"h{gen}", "text": f"text {gen} {i}"}, vec(rng)))
    return PageWrite(url, pts)


def open_store(backend: str, tmp: Path):
    if backend == "edge":
        return EdgeStore(tmp, "bench")
    from qdrant_client import QdrantClient

    return ClientStore(QdrantClient(path=str(tmp / "local")), "bench")


def run(backend: str, n_points: int, rng: random.Random) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{backend}-"))
    store = open_store(backend, tmp)
    store.ensure_collection(DIM)
    pages = n_points // CHUNKS
    fill = 0.0  # only time spent inside the store counts, not making test vectors
    batch = []
    for p in range(pages):
        batch.extend(page(f"https://docs.example/p{p}", rng, 0).points)
        if len(batch) >= 5000 or p == pages - 1:
            t = time.perf_counter()
            store.upsert(batch)
            fill += time.perf_counter() - t
            batch = []
    sample = rng.sample(range(pages), 50)
    writes = [page(f"https://docs.example/p{p}", rng, 1) for p in sample]
    t = time.perf_counter()
    for w in writes:
        store.replace_pages([w])
    replace_ms = (time.perf_counter() - t) / len(writes) * 1000
    assert store.count() == pages * CHUNKS
    store.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return {"backend": backend, "points": n_points, "fill_points_per_s": n_points / fill, "replace_ms": replace_ms}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--backends", default="edge,local")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here (make bench's summary reads it)")
    args = ap.parse_args()
    rows = []
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(7)
    print(f"| backend | points | fill (points/s) | replace one page (ms) | ratio vs {sizes[0]} |")
    print("|---|---|---|---|---|")
    for backend in args.backends.split(","):
        base = None
        for n in sizes:
            r = run(backend, n, rng)
            base = base or r["replace_ms"]
            rows.append({**r, "ratio_vs_first": r["replace_ms"] / base})
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
            print(f"| {backend} | {n:,} | {r['fill_points_per_s']:,.0f} | {r['replace_ms']:.2f} | {r['replace_ms'] / base:.2f} |", flush=True)


if __name__ == "__main__":
    main()
