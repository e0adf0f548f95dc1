#!/usr/bin/env python3
"""No-op and fetch-bound passes before/after: passes of two checkouts, interleaved, on one
kept site.

Runs `bench/scale_passes.py`'s probe (the pagesync command in-process, peak RSS, heavy
modules) for checkout A, then B, then A ... on the work directory a run of
`bench/scale_passes.py --work DIR` left behind (nginx is started again on its config), so
both see the same site, state, load and sitemap 304. Reports wall, CPU (user+sys), the
report's `seconds` and peak RSS per run, and the best of each.

No-op passes by default. `--full` makes them fetch-bound passes (every
page a conditional GET answered 304) and adds CPU ms per page and pages/s, as medians.
`--loop` (with `--full`) also runs the fetch-bound pass's baseline, `scale_passes.plain_loop`
(the same conditional GETs from a plain httpx loop, same concurrency), right before each pass, and
reports each pass against its own loop: pages/s and CPU ratios, as medians.
`--fill-history N` first gives every tracked page an N-visit history (random elapsed
times with fractions of a second, as a wall-clock cron writes them, 10 % changed), the
state of a site pagesync has followed for a long time; the state file is changed.

    .venv/bin/python bench/noop_ab.py --work DIR --a /path/to/old/checkout --b . [--runs 5]
    .venv/bin/python bench/noop_ab.py --work DIR --a OLD --full --fill-history 64 --runs 6
    .venv/bin/python bench/noop_ab.py --work DIR --a OLD --full --loop --runs 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import scale_passes as sp  # noqa: E402
from replay_docs_history import NGINX  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="a directory left by scale_passes.py --work")
    ap.add_argument("--a", type=Path, required=True, help="checkout A (e.g. the commit before a change)")
    ap.add_argument("--b", type=Path, default=REPO, help="checkout B (default: this one)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--hours", type=float, default=24.0, help="pass clock: T0 + this many hours (+1 min per run)")
    ap.add_argument("--full", action="store_true", help="fetch-bound: --full passes (every page a conditional GET)")
    ap.add_argument("--fill-history", type=int, default=0, metavar="N", help="first give every page an N-visit history")
    ap.add_argument(
        "--loop", action="store_true", help="with --full: a plain httpx loop before each pass, and the ratios"
    )
    args = ap.parse_args(argv)
    if args.loop and not args.full:
        ap.error("--loop needs --full")
    args.work = args.work.resolve()
    if args.fill_history:
        fill_history(args.work / "state.db", args.fill_history)
    conf = args.work / "nginx" / "nginx.conf"
    port = int(re.search(r"listen 127.0.0.1:(\d+)", conf.read_text()).group(1))
    nginx = subprocess.Popen(
        [NGINX, "-c", str(conf), "-p", str(args.work / "nginx"), "-e", str(args.work / "nginx/error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    sitemap = f"http://127.0.0.1:{port}/sitemap.xml"
    out: dict[str, list[dict]] = {"a": [], "b": []}
    k = 0
    try:
        for _ in range(args.runs):
            for name, repo in (("a", args.a), ("b", args.b)):
                env = {**os.environ, "PYTHONPATH": str(repo.resolve()), "HF_HUB_OFFLINE": "1"}
                loop = None
                if args.loop:  # the same conditional GETs (the state's ETags) at the same concurrency
                    urls = sp.etags(args.work)
                    secs, cpu, _ = asyncio.run(sp.plain_loop(urls, 8))
                    loop = {"loop_pages_s": len(urls) / secs, "loop_cpu_ms": 1000 * cpu / len(urls)}
                os.chdir(repo)  # `python -c` puts the working directory first on sys.path
                base = sp.run_probe(sp.BASELINE, [], env)
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                extra = ("--full", "--embedder", "fake-384", "--workers", "8", "--per-host", "8") if args.full else ()
                r = sp.run_probe(
                    sp.PROBE,
                    sp.pagesync_args(args.work, sitemap, sp.T0 + timedelta(hours=args.hours, minutes=k), *extra),
                    env,
                )
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                k += 1
                rep = sp.report(args.work)
                row = {
                    "wall_s": r["wall_s"],
                    "cpu_s": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime,
                    "pass_seconds": rep["seconds"],
                    "hwm_mb": r["hwm_mb"],
                    "import_cli_s": base["wall_s"],
                    "import_cli_mb": base["hwm_mb"],
                    "pages_fetched": rep["pages_fetched"],
                    "sitemaps_not_modified": rep.get("sitemaps_not_modified"),
                    "loadavg": os.getloadavg()[0],
                    "pass_cpu_s": r.get("cpu_s"),
                    **(loop or {}),
                }
                out[name].append(row)
                print(
                    name,
                    json.dumps({x: round(v, 3) if isinstance(v, float) else v for x, v in row.items()}),
                    flush=True,
                )
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait()
    for name, rows in out.items():
        print(
            f"{name}: best wall {min(r['wall_s'] for r in rows):.2f} s, best CPU {min(r['cpu_s'] for r in rows):.2f} s, "
            f"best in the pass {min(r['pass_seconds'] for r in rows):.2f} s, peak {max(r['hwm_mb'] for r in rows):.0f} MB, "
            f"import sync.commands.cli best {min(r['import_cli_s'] for r in rows):.2f} s"
        )
        if args.full:
            cpu = statistics.median(1000 * r["pass_cpu_s"] / r["pages_fetched"] for r in rows)
            rate = statistics.median(r["pages_fetched"] / r["pass_seconds"] for r in rows)
            print(f"{name}: median CPU {cpu:.3f} ms per page (the command's own), median {rate:.0f} pages/s")
        if args.loop:
            ratio = [r["pages_fetched"] / r["pass_seconds"] / r["loop_pages_s"] for r in rows]
            cpu_ratio = [r["loop_cpu_ms"] / (1000 * r["pass_cpu_s"] / r["pages_fetched"]) for r in rows]
            print(
                f"{name}: against the plain loop before each pass: pages/s ratio median {statistics.median(ratio):.2f} "
                f"({', '.join(f'{x:.2f}' for x in ratio)}), CPU ratio median {statistics.median(cpu_ratio):.2f} "
                f"({', '.join(f'{x:.2f}' for x in cpu_ratio)}); loop median "
                f"{statistics.median(r['loop_pages_s'] for r in rows):.0f} pages/s, "
                f"{statistics.median(r['loop_cpu_ms'] for r in rows):.3f} ms CPU a page"
            )
    return 0


def fill_history(state: Path, n: int, seed: int = 3) -> None:
    """Give every tracked page an `n`-visit history in the stored JSON form."""
    rng = random.Random(seed)
    with sqlite3.connect(state) as db:
        urls = [u for (u,) in db.execute("SELECT url FROM pages")]
        rows = [
            (
                json.dumps(
                    [[rng.uniform(6 * 3600, 20 * 86400), int(rng.random() < 0.1)] for _ in range(n)],
                    separators=(",", ":"),
                ),
                u,
            )
            for u in urls
        ]
        db.executemany("UPDATE pages SET history = ? WHERE url = ?", rows)
    print(f"{len(rows)} pages given {n}-visit histories", flush=True)


if __name__ == "__main__":
    sys.exit(main())
