#!/usr/bin/env python3
"""Row 3 before/after: no-op passes of two checkouts, interleaved, on one kept site.

Runs `bench/scale_passes.py`'s probe (the pagesync command in-process, peak RSS, heavy
modules) for checkout A, then B, then A ... on the work directory a run of
`bench/scale_passes.py --work DIR` left behind (nginx is started again on its config), so
both see the same site, state, load and sitemap 304. Reports wall, CPU (user+sys), the
report's `seconds` and peak RSS per run, and the best of each.

    .venv/bin/python bench/noop_ab.py --work DIR --a /path/to/old/checkout --b . [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import socket
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
    args = ap.parse_args(argv)
    args.work = args.work.resolve()
    conf = args.work / "nginx" / "nginx.conf"
    port = int(re.search(r"listen 127.0.0.1:(\d+)", conf.read_text()).group(1))
    nginx = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(args.work / "nginx"), "-e", str(args.work / "nginx/error.log")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
                os.chdir(repo)  # `python -c` puts the working directory first on sys.path
                base = sp.run_probe(sp.BASELINE, [], env)
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                r = sp.run_probe(sp.PROBE, sp.pagesync_args(args.work, sitemap, sp.T0 + timedelta(hours=args.hours, minutes=k)), env)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                k += 1
                rep = sp.report(args.work)
                row = {"wall_s": r["wall_s"], "cpu_s": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime,
                       "pass_seconds": rep["seconds"], "hwm_mb": r["hwm_mb"], "import_cli_s": base["wall_s"],
                       "import_cli_mb": base["hwm_mb"], "pages_fetched": rep["pages_fetched"],
                       "sitemaps_not_modified": rep.get("sitemaps_not_modified"), "loadavg": os.getloadavg()[0]}
                out[name].append(row)
                print(name, json.dumps({x: round(v, 3) if isinstance(v, float) else v for x, v in row.items()}), flush=True)
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait()
    for name, rows in out.items():
        print(f"{name}: best wall {min(r['wall_s'] for r in rows):.2f} s, best CPU {min(r['cpu_s'] for r in rows):.2f} s, "
              f"best in the pass {min(r['pass_seconds'] for r in rows):.2f} s, peak {max(r['hwm_mb'] for r in rows):.0f} MB, "
              f"import sync.cli best {min(r['import_cli_s'] for r in rows):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
