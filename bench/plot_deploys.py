#!/usr/bin/env python3
"""The scheduling page's picture: stale share against page requests per strategy, one panel
per sitemap scenario, from the replay's rows (`bench/replay_policies.py` with the deploy
scenarios; a JSON list of {scenario, strategy, requests, freshness}).

    .venv/bin/python bench/plot_deploys.py bench/results/replay_deploys.json docs/img/deploys.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAMES = {
    "git-lastmod": "honest lastmod (git)",
    "deploy-date": "deploy date on every URL",
    "mkdocs": "MkDocs: deploy date + search_index.json",
}


def main(src: str, out: str) -> int:
    rows = json.loads(Path(src).read_text())["rows"]
    scenarios = [s for s in NAMES if any(r["scenario"] == s for r in rows)]
    fig, axes = plt.subplots(1, len(scenarios), figsize=(4.2 * len(scenarios), 3.6), sharey=True)
    for ax, sc in zip(axes if len(scenarios) > 1 else [axes], scenarios):
        for r in (r for r in rows if r["scenario"] == sc):
            stale = 100 * (1 - r["freshness"])
            ax.scatter(r["requests"], stale, s=40)
            ax.annotate(r["strategy"], (r["requests"], stale), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(NAMES[sc], fontsize=9)
        ax.set_xlabel("page requests (log)")
        ax.grid(alpha=0.3)
    (axes[0] if len(scenarios) > 1 else axes).set_ylabel("stale pages, time-averaged (%)")
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Plot stale share against page requests per strategy.")
    ap.add_argument("src", help="the replay's JSON ({rows: [{scenario, strategy, requests, freshness}]})")
    ap.add_argument("out", help="the PNG to write")
    args = ap.parse_args()
    sys.exit(main(args.src, args.out))
