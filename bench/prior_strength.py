#!/usr/bin/env python3
"""How strong should change-rate's prior be? (a side question of the
freshness benchmarks)

The default policy estimates each page's change rate with a prior worth `k` changes in
`T` days (`ChangeRatePolicy.prior_changes` / `prior_seconds`; default 0.5 in 7 d). A
stronger prior pulls every page towards the same rate, i.e. towards uniform revisits.
This script answers two questions with the benchmarks' own machinery:

1. `run`: freshness at one fixed budget (`--budget`, the mean `max_fetches` per pass) for
   several priors, on the FastAPI replay (`--site replay`, scenarios git-lastmod /
   same-lastmod) or the simulated site (`--site sim`, honest / lying). Same engine,
   store, clock and meter as `freshness.py`; uniform revisits at an interval can be added
   (`--uniform-days`) as the reference, and each run repeated under other visit orders
   (`--orders N`: `select_visits`' ties broken by salted URL hashes instead of URLs) to
   see how much of a difference is the luck of the order.
2. `fit`: what an empirical-Bayes prior fitted per host would pick: a Gamma(shape,
   rate)-Poisson fit (maximum marginal likelihood, on a log grid) to every page's text
   changes and watched days up to a given day of the site's history.

    .venv/bin/python bench/prior_strength.py run --site replay --scenario same-lastmod --budget 2.79 --priors 0.5:7,2:60
    .venv/bin/python bench/prior_strength.py run --site sim --scenario lying --budget 7.9375 --priors 0.5:7,2:60
    .venv/bin/python bench/prior_strength.py fit --days 15,30,45

The replay's timeline comes from `replay_policies.py`'s cache (`--work`), built on first use.
"""

from __future__ import annotations

import argparse
import collections
import functools
import hashlib
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import freshness as fr  # noqa: E402
import replay_policies as rp  # noqa: E402
from sync.core.policies import POLICIES, ChangeRatePolicy, UniformPolicy  # noqa: E402

D = fr.D


def load_events(site: str, pool: ProcessPoolExecutor, work: str, start: str = "2024-06-20") -> list:
    if site == "sim":
        timeline = fr.build_timeline(fr.SiteSpec())
        return fr.hash_timeline(timeline.events, pool)
    timeline, _ = rp.load_timeline(rp.parse_args(["--work", work, "--start", start]), pool)
    return timeline.events


def _register(kind: str, a: float, b: float = 0.0) -> str:
    """A policy name the engine can build (`POLICIES`), in this process."""
    if kind == "hd":
        return "halve-double"
    name = f"{kind}-{a:g}-{b:g}"
    if kind == "cr":
        POLICIES[name] = functools.partial(ChangeRatePolicy, prior_changes=a, prior_seconds=b * D)
    elif kind == "target":  # the default prior, another staleness target (hours)
        POLICIES[name] = functools.partial(ChangeRatePolicy, target_staleness_s=a * fr.H)
    else:
        POLICIES[name] = functools.partial(UniformPolicy, interval_s=a * D)
    return name


def _visit_order(salt: str) -> None:
    """Break `select_visits`' ties by a salted hash of the URL instead of the URL (this
    process only). Ties are common: pages visited in one pass share their waiting time,
    and under uniform revisits their priority. By URL, a capped pass sweeps the site
    section by section; another salt is another, equally valid, order. The spread over
    salts is the benchmark's noise from visit order alone."""
    import sync.stages.plan as plan
    from sync.core.visit_selection import select_visits

    def salted(cands, policy, max_fetches):
        key = {c.url: hashlib.sha256(f"{salt}|{c.url}".encode()).hexdigest() for c in cands}
        back = {k: u for u, k in key.items()}
        order = select_visits([replace(c, url=key[c.url]) for c in cands], policy, max_fetches)
        return [back[k] for k in order]

    plan.select_visits = salted


def _oracle(events: list, mode: str) -> None:
    """Order due pages by Olston & Pandey's utility with rates the policy cannot know (this
    process only): `whole`, each page's text changes over the whole window ÷ the time it
    existed (the true mean rates, future included); `past`, its changes so far ÷ its time
    so far (every change seen as it happens, none missed between visits, no prior). Every
    page is due at every pass (uniform revisits at the 6 h floor), so the budget alone
    decides, by the oracle's utility. What change-rate loses against `past` is the cost of
    seeing changes only at visits; what `past` loses against `whole` is the cost of rates
    that move (a quiet month, then a busy one)."""
    from urllib.parse import urlsplit

    import sync.stages.plan as plan
    from sync.core.change_rate import expected_staleness

    prior = ChangeRatePolicy()
    order = plan.select_visits  # ties as `_visit_order` set them, if it did

    born: dict[str, float] = {}
    changes: dict[str, list[float]] = collections.defaultdict(list)
    for ev, changed in rp.text_change_events(events):
        born.setdefault(ev.path, ev.t)
        if changed:
            changes[ev.path].append(ev.t)
    end = 60 * D  # the runs' horizon (`run_one`)
    clock = {"now": 0.0}

    def rate(path: str, visits: tuple) -> float:
        if mode == "visits":
            return prior.rate(visits)
        if mode == "whole":
            return len(changes[path]) / max(end - born[path], fr.H)  # KeyError: a URL the timeline lacks
        now = clock["now"]
        seen = sum(1 for t in changes[path] if t <= now)
        return (seen + prior.prior_changes) / (max(now - born[path], 0.0) + prior.prior_seconds)

    class ByBonus:  # the oracle's utility travels in `bonus_s`
        name = "oracle"

        def priority(self, visits, since_last_visit_s):
            return 0.0

    def oracle(cands, policy, max_fetches):
        cands = [
            replace(c, bonus_s=expected_staleness(rate(urlsplit(c.url).path, c.visits), c.since_last_visit_s or 0.0))
            for c in cands
        ]
        return order(cands, ByBonus(), max_fetches)

    cut = plan.Planner._order_and_cut

    def order_and_cut(self, visits, known):
        clock["now"] = (self.now - fr.T0).total_seconds()
        return cut(self, visits, known)

    plan.select_visits = oracle
    plan.Planner._order_and_cut = order_and_cut


def run_one(job: tuple, events: list) -> dict:
    """One run in a worker process (policies are registered there, not inherited)."""
    scenario, kind, a, b, budget, label, salt = job
    if salt:
        _visit_order(salt)
    if kind.startswith("oracle-"):
        _oracle(events, kind.removeprefix("oracle-"))
        kind, a = "uniform", 0.25
    strategy = fr.Strategy(label, policy=_register(kind, a, b), budget=budget, key=label)
    res = fr.run_one(fr.RunSpec(scenario, strategy, 6 * fr.H, 60 * D), events)
    return {
        "label": label,
        "salt": salt,
        "requests": res["page_requests"],
        "freshness": res["freshness"],
        "by_kind": res["freshness_by_kind"],
    }


def cmd_run(args: argparse.Namespace) -> None:
    jobs = []
    for item in filter(None, args.priors.split(",")):
        k, days = (float(x) for x in item.split(":"))
        jobs.append((args.scenario, "cr", k, days, args.budget, f"change-rate, prior {k:g} changes / {days:g} d"))
    if args.halve_double:  # uncapped, as in the benchmarks: its requests set their budgets
        jobs.append((args.scenario, "hd", 0.0, 0.0, None, "halve-double (uncapped)"))
    if args.hd_budget:  # capped like the others: due pages longest-waiting first
        jobs.append((args.scenario, "hd", 0.0, 0.0, args.hd_budget, f"halve-double @ {args.hd_budget:g} a pass"))
    for hours in [float(x) for x in args.targets.split(",") if x]:  # uncapped: the target sets the cost
        jobs.append((args.scenario, "target", hours, 0.0, None, f"change-rate, target {hours:g} h, uncapped"))
    for mode in filter(None, args.oracle.split(",")):
        jobs.append((args.scenario, f"oracle-{mode}", 0.0, 0.0, args.budget, f"rate oracle ({mode})"))
    for days in [float(x) for x in args.uniform_days.split(",") if x]:
        jobs.append(
            (args.scenario, "uniform", days, 0.0, args.uniform_budget or args.budget, f"uniform every {days:g} d")
        )
    salts = [""] + [f"order{i}" for i in range(1, args.orders)]
    jobs = [(*job, salt) for job in jobs for salt in salts]
    with ProcessPoolExecutor(max_workers=args.jobs, max_tasks_per_child=1) as pool:
        events = load_events(args.site, pool, args.work, args.start)
        window = f" from {args.start}" if args.site == "replay" else ""
        print(f"{args.site}{window} / {args.scenario}, budget {args.budget} per pass\n")
        print(
            "| strategy | visit order (ties by) | page requests | freshness | static / weekly / hot |\n"
            "|---|---|---|---|---|"
        )
        by_label: dict[str, list[float]] = collections.defaultdict(list)
        for r in pool.map(functools.partial(run_one, events=events), jobs):
            kinds = " / ".join("–" if v is None else f"{v:.4f}" for v in r["by_kind"].values())
            order = f"hash, salt {r['salt']}" if r["salt"] else "URL"
            print(f"| {r['label']} | {order} | {r['requests']:,} | {r['freshness']:.4f} | {kinds} |", flush=True)
            by_label[r["label"]].append(r["freshness"])
    if args.orders > 1:
        print("\n| strategy | freshness: mean over orders | min | max |\n|---|---|---|---|")
        for label, xs in by_label.items():
            print(f"| {label} | {sum(xs) / len(xs):.4f} | {min(xs):.4f} | {max(xs):.4f} |")


def page_counts(events: list, upto_s: float) -> list[tuple[int, float]]:
    """(text changes, days watched) per page seen up to `upto_s`."""
    first: dict[str, float] = {}
    changes: collections.Counter = collections.Counter()
    for ev, changed in rp.text_change_events([e for e in events if e.t <= upto_s]):
        first.setdefault(ev.path, ev.t)
        changes[ev.path] += changed
    return [(changes[p], (upto_s - first[p]) / D) for p in first]


def gamma_poisson_fit(data: list[tuple[int, float]]) -> tuple[float, float]:
    """(shape, rate per day) of the Gamma prior maximising the negative-binomial marginal
    likelihood of the pages' change counts, on a grid of 0.1 decades."""

    def loglik(a: float, b: float) -> float:
        return sum(
            math.lgamma(a + c) - math.lgamma(a) + a * math.log(b / (b + e)) + (c * math.log(e / (b + e)) if c else 0.0)
            for c, e in data
        )

    grid = [(10 ** (i / 10), 10 ** (j / 10)) for i in range(-30, 31) for j in range(-10, 41)]
    return max(grid, key=lambda ab: loglik(*ab))


def cmd_fit(args: argparse.Namespace) -> None:
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        sites = {"replay": load_events("replay", pool, args.work), "sim": load_events("sim", pool, args.work)}
    print(
        "| site | day | pages | changes | fitted shape | fitted rate (d) | prior mean (changes / d) |\n|---|---|---|---|---|---|---|"
    )
    for name, events in sites.items():
        for day in [float(x) for x in args.days.split(",")]:
            data = page_counts(events, day * D)
            a, b = gamma_poisson_fit(data)
            print(f"| {name} | {day:g} | {len(data)} | {sum(c for c, _ in data)} | {a:.3g} | {b:.3g} | {a / b:.4f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="freshness at one budget for several priors")
    run.add_argument("--site", choices=("replay", "sim"), default="replay")
    run.add_argument("--scenario", default="same-lastmod")
    run.add_argument("--budget", type=float, required=True, help="mean max_fetches per pass")
    run.add_argument("--start", default="2024-06-20", help="the replay's window (as replay_policies.py --start)")
    run.add_argument(
        "--orders",
        type=int,
        default=1,
        help="visit orders per strategy: ties by URL (the engine's), then by salted URL hashes",
    )
    run.add_argument("--priors", default="0.5:7,1:30,2:60,4:120", help="k:days,... (prior changes : prior days)")
    run.add_argument("--uniform-days", default="", help="also uniform revisits at these intervals (days)")
    run.add_argument("--uniform-budget", type=float, default=None, help="their budget (default: --budget)")
    run.add_argument(
        "--halve-double", action="store_true", help="also halve-double (halve on a change, double otherwise), uncapped"
    )
    run.add_argument("--hd-budget", type=float, default=None, help="also halve-double capped at this budget")
    run.add_argument(
        "--targets",
        default="",
        help="also change-rate uncapped at these staleness targets "
        "(hours; the default is 6), to trade requests for freshness",
    )
    run.add_argument(
        "--oracle",
        default="",
        help="also rate oracles at --budget: whole (true window rates), "
        "past (every change seen so far), visits (change-rate's own rates), comma-separated",
    )
    fit = sub.add_parser("fit", help="the empirical-Bayes prior of both sites at some days")
    fit.add_argument("--days", default="15,30,45")
    for p in (run, fit):
        p.add_argument("--jobs", type=int, default=2)
        p.add_argument("--work", default="/tmp/pagesync-replay-policies", help="replay_policies.py's timeline cache")
    args = ap.parse_args(argv)
    {"run": cmd_run, "fit": cmd_fit}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
