"""Audit cost at scale: time and peak memory of `audit_collection` on N points.

Builds an embedded collection of N points (10 chunks a page, 384-d vectors) and a page
state to match, in one process; audits it in a fresh process so that peak RSS is the
audit's own (numpy vectors of the build phase do not count). Peak RSS counts the shard's
memory-mapped files as the scan touches them; the private (anonymous) peak beside it is
what the audit itself holds.

    .venv/bin/python bench/audit_scale.py --points 1000000 [--dir /tmp/audit-bench]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The checkout this script lives in, before any installed copy.
sys.path.insert(0, str(REPO))

CHUNKS = 10
DIM = 384


def build(root: Path, n_points: int) -> None:
    import numpy as np

    from sync.core.ids import chunk_id, point_id
    from sync.core.payload import point_metadata
    from sync.edges.state import LIVE, PageState, StateDB
    from sync.edges.edge_store import EdgeStore
    from sync.edges.store import StoredPoint

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    store = EdgeStore(root / "qdrant", "pages")
    store.ensure_collection(DIM)
    rng = np.random.default_rng(7)
    pages = n_points // CHUNKS
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    t = time.perf_counter()
    with StateDB(root / "state.db") as st:
        for start in range(0, pages, 1000):
            batch, states = [], []
            vecs = rng.standard_normal((1000 * CHUNKS, DIM), dtype=np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            k = 0
            for p in range(start, min(pages, start + 1000)):
                url = f"https://docs.example.com/section-{p // 1000}/page-{p}.html"
                h = f"{p:064x}"
                for i in range(CHUNKS):
                    cid = chunk_id(url, i)
                    payload = {
                        "url": url,
                        "chunk_id": cid,
                        "chunk_index": i,
                        "content_hash": h,
                        "text": f"chunk {i} of page {p}",
                        "title": f"Page {p}",
                        "fetched_at": now.isoformat(),
                        "embedder": "bench",
                    }
                    payload["metadata"] = point_metadata(payload)  # as a pass writes it: the audit reads it
                    batch.append(StoredPoint(point_id(cid), payload, vecs[k].tolist()))
                    k += 1
                states.append(
                    PageState(
                        url=url,
                        status=LIVE,
                        content_hash=h,
                        fingerprint="bench",
                        chunk_count=CHUNKS,
                        title=f"Page {p}",
                        interval=timedelta(days=3),
                        due_at=now + timedelta(days=3),
                        last_fetched_at=now,
                    )
                )
            store.upsert(batch)
            st.put_many(states)
    store.close()
    print(f"built {n_points} points / {pages} pages in {time.perf_counter() - t:.0f}s", file=sys.stderr)


def _hwm_mb() -> int:
    """Peak RSS of this process image (VmHWM: reset by exec, unlike ru_maxrss)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _anon_mb() -> int:
    """Private (anonymous) resident memory now: RSS without the file-backed pages of the
    shard's memory-mapped segments, which the kernel can drop and re-read at will."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024
    return 0


class _AnonPeak:
    """The highest `_anon_mb` seen while the block runs, sampled every 20 ms by a thread
    (the kernel keeps a peak for the whole RSS only)."""

    def __enter__(self) -> "_AnonPeak":
        import threading

        self.peak, self._stop = _anon_mb(), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _anon_mb())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _anon_mb())


def audit(root: Path) -> dict:
    from sync.commands.audit import audit_collection
    from sync.edges.state import StateDB
    from sync.edges.edge_store import EdgeStore

    base = _hwm_mb()
    with _AnonPeak() as anon:
        store = EdgeStore(root / "qdrant", "pages")
        t = time.perf_counter()
        with StateDB(root / "state.db") as st:
            rep = audit_collection(store, st)
        secs = time.perf_counter() - t
        store.close()
    peak = _hwm_mb()
    return {
        "points": rep.points_scanned,
        "pages": rep.pages_live,
        "ok": rep.ok,
        "seconds": round(secs, 1),
        "points_per_s": round(rep.points_scanned / secs),
        "peak_rss_mb": peak,
        "peak_anon_mb": anon.peak,
        "rss_before_mb": base,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=str, default="1000000", help="comma-separated sizes")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here (make bench's summary reads it)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/pagesync-audit-bench"))
    ap.add_argument("--phase", choices=["all", "build", "audit"], default="all")
    args = ap.parse_args()
    sizes = [int(x) for x in args.points.split(",")]
    if args.phase == "build":
        build(args.dir, sizes[0])
    if args.phase == "audit":
        print(json.dumps(audit(args.dir)))
        return
    if args.phase == "all":
        rows = []
        print(
            "| points | pages | audit seconds | points/s | peak RSS (MB) | of it private (MB) | RSS before the audit (MB) |"
        )
        print("|---|---|---|---|---|---|---|")
        for n in sizes:
            build(args.dir, n)
            out = subprocess.run(
                [sys.executable, __file__, "--phase", "audit", "--dir", str(args.dir)],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            print(
                f"| {r['points']:,} | {r['pages']:,} | {r['seconds']} | {r['points_per_s']:,} | {r['peak_rss_mb']} "
                f"| {r['peak_anon_mb']} | {r['rss_before_mb']} |",
                flush=True,
            )
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
