#!/usr/bin/env python3
"""A fast model of `--policy deploys`' choice at a deploy on the replay's history (a static
host, the deploy date on every URL, no feed): requests and time-averaged stale share per
rule, with the passes shifted by 0-5 h, to see how far a rule's figure is luck.

It replays the timeline `bench/replay_policies.py` built (its cache in --work) through the
pure functions of `sync.core.deploys` alone: no engine, no server. The engine's figures are
the replay's; this only compares rules quickly.

    .venv/bin/python bench/deploy_choice_model.py [--work /tmp/pagesync-replay-policies]
"""

from __future__ import annotations

import argparse
import bisect
import math
import pickle
import statistics
import sys
from pathlib import Path
from typing import Callable, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from sync.core.deploys import (  # noqa: E402
    DeployCandidate,
    chance_per_deploy,
    change_chance,
    choose_at_deploy,
    deploy_candidate,
    deploys_between,
    surprised,
)
from sync.core.history import Visit  # noqa: E402

H = 3600.0
# (url, visits, last visit s, deploy times, deploy number, now s) -> a candidate or None
Rule = Callable[[str, Sequence[Visit], float, Sequence[float], int, float], "DeployCandidate | None"]


def threshold_only(url, visits, last_s, deploys, number, now_s):
    k = deploys_between(deploys, last_s, now_s)
    return DeployCandidate(change_chance(chance_per_deploy(visits, last_s, deploys), k), url) if k else None


def replay(
    events, rule: Rule, threshold: float, days: float, pass_h: float, shift_h: float, widen: bool = False
) -> tuple[int, float]:
    """(page requests after the initial index, time-averaged stale share). `widen`: a
    surprise at a deploy (`surprised`) visits the candidates it passed over, in the same pass."""
    times = [e.t for e in events]
    live: dict[str, str | None] = {}
    indexed: dict[str, str | None] = {}
    last: dict[str, float] = {}
    hist: dict[str, list[Visit]] = {}
    deploys: list[float] = []
    pos = requests = 0
    stale = total = prev = 0.0

    def advance(to: float) -> None:
        nonlocal stale, total, prev
        total += len(live) * (to - prev)
        stale += sum(1 for p, h in live.items() if indexed.get(p) != h) * (to - prev)
        prev = to

    for k in range(math.ceil(days * 24 / pass_h)):
        t = k * pass_h * H + (shift_h * H if k else 0.0)
        end = bisect.bisect_right(times, t)
        deployed = end > pos
        for e in events[pos:end]:
            advance(e.t)
            if e.op == "set":
                live[e.path] = e.text_hash
            else:
                live.pop(e.path, None)
                indexed.pop(e.path, None)
                if e.op == "move":
                    live[e.target] = e.text_hash
        pos = end
        advance(t)
        if k and deployed:
            deploys.append(t)
        new = [p for p in live if p not in indexed]
        cands: list[DeployCandidate] = []
        if k and deployed:
            cands = [c for p in live if p in indexed and (c := rule(p, hist[p], last[p], deploys, len(deploys), t))]
        at_deploy = {c.url: c for c in cands}
        chosen = choose_at_deploy(cands, threshold=threshold)
        wave, seen, surprise = [*new, *chosen], set(), False
        while wave:
            for p in wave:
                changed = p in indexed and indexed[p] != live[p]
                if p in indexed:
                    hist[p].append(Visit(t - last[p], changed))
                else:
                    hist[p] = []
                requests += 1 if k else 0
                indexed[p], last[p] = live[p], t
                surprise = surprise or (p in at_deploy and surprised(at_deploy[p], changed))
                seen.add(p)
            wave = [c.url for c in cands if c.url not in seen] if widen and surprise else []
    advance(days * 86400)
    return requests, stale / total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/pagesync-replay-policies", help="replay_policies.py's timeline cache")
    ap.add_argument("--days", type=float, default=28.0)
    args = ap.parse_args()
    caches = sorted(Path(args.work).glob("timeline-*.pickle"), key=lambda f: f.stat().st_mtime)
    if not caches:
        ap.error(f"no timeline in {args.work}: run bench/replay_policies.py --days {args.days:g} first")
    timeline, _ = pickle.loads(caches[-1].read_bytes())
    rules = [(f"chance >= {th:g} alone", threshold_only, th, False) for th in (0.25, 0.15, 0.1)]
    rules.append(("every page at every deploy", lambda *a: deploy_candidate(*a, turn=1), 0.25, False))
    rules.append(("chance >= 0.25, turns of 2 deploys", deploy_candidate, 0.25, False))
    rules.append(
        ("chance >= 0.25, turns of 2 deploys, a surprise visits the rest (the default)", deploy_candidate, 0.25, True)
    )
    print("| rule | requests (mean) | % stale: mean | min | max |\n|---|---|---|---|---|")
    for name, rule, th, widen in rules:
        rows = [replay(timeline.events, rule, th, args.days, 6.0, s, widen) for s in range(6)]
        st = [100 * r[1] for r in rows]
        print(
            f"| {name} | {statistics.mean(r[0] for r in rows):,.0f} | {statistics.mean(st):.3f} | "
            f"{min(st):.3f} | {max(st):.3f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
