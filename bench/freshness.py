#!/usr/bin/env python3
"""Freshness benchmark: revisit strategies at equal fetch budgets on a simulated docs site.

What it measures. A docs site of ~150 pages evolves over 60 simulated days; pagesync runs
a pass every 6 h (or once a night) against it, with the real engine, fetcher, state and
embedded store and the fake hash embedder, so a pass costs tenths of a second. After
each pass the benchmark compares what the index holds (each page's `content_hash` in the
state) with what the site serves (the hash of the live page's text, computed exactly as
the engine does: `content_hash(extract_page(html).markdown)`), and integrates over time:

- freshness: time-averaged share of live pages whose indexed text is the live text
  (a live page not yet indexed counts as stale);
- staleness age: how long the stale pages have been stale (time-averaged over stale
  pages; a page is stale from its first change the index has not caught up with);
- cost: page requests (server log, sitemap and robots.txt excluded), bytes downloaded
  (the run reports, sitemaps included), chunks embedded;
- time to notice pages added (and 301 targets) and pages removed (404, 410, 301 sources).

The site. Each page's text changes as a Poisson process: ~75% nearly static (1 change
per 60 d), ~20% weekly, ~5% hot changelog pages (1-3 changes a day). On top: two bulk
edit days (30% of pages change at once), cosmetic deploys every ~2 days that rewrite the
footer (and once the nav) of 30-100% of pages (ETag changes, extracted text does not),
pages added, removed (404/410) and moved (301). The same site history is replayed in two
scenarios that differ only in the sitemap's `lastmod`:

- honest: lastmod = time of the page's last text change;
- lying: lastmod = time of the last cosmetic deploy that touched the page; text edits
  leave it alone. Deploys touch subsets, so the stamps differ across URLs and the
  "every URL has the same stamp" test does not catch the lie: only the engine's per-host
  lastmod trust can.

Strategies, per scenario (a pass every 6 h unless said otherwise):

- nightly full: `full=True` once a day at 00:00, no pass in between;
- halve-double (halve the interval on a change, double it otherwise), no cap; its page-request total is THE budget;
- uniform @ HD budget: one fixed interval for every page (pages x pass interval / budget,
  so that it would spend the budget) and `max_fetches` = the budget per pass;
- change-rate (the default) @ HD budget, uncapped, and @ 1/2 HD budget;
- change-rate with bulk-edit detection (`bulk_edits=True`) @ HD budget and uncapped;
- change-rate with one incremental pass a day (00:00), uncapped and @ 10% of the nightly
  full recrawl's requests: the same cadence as the recrawl, for the tenth-of-nightly goal.

A budget of b requests per pass is given as an integer `max_fetches` per pass whose
running mean is b (floor(b(k+1)) - floor(bk)). Forced visits (trusted lastmod advances,
repairs) ignore the cap, so b is then corrected by secant steps (at most `--calibrate`)
until the run's requests are within 2% of the target (0-7% under it for the goals'
"at most" budgets).

Run it with `make bench-freshness`, or

    .venv/bin/python bench/freshness.py [--pages 150 --days 60 --jobs 2]

A partial run: `--strategies cr@hd,cr+bulk@hd` runs only those keys, and `--refs-from
bench/results/freshness.json` takes the halve-double and nightly references (hence the
budgets) from an earlier run instead of running them (write it elsewhere with `--out`).

Writes bench/results/freshness.md (tables, goals), bench/results/freshness.json (raw)
and, when matplotlib is installed, notebooks/freshness.png.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import functools
import json
import math
import random
import shlex
import statistics
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from chunking import extract_page  # noqa: E402
from demo.site_server import Site, SiteServer, render_page  # noqa: E402
from embedders import HashEmbedder  # noqa: E402
from sync.engine import PassConfig, arun_pass  # noqa: E402
from sync.edges.fetcher import Fetcher, make_client  # noqa: E402
from sync.core.hashing import content_hash  # noqa: E402
from sync.core.policies import POLICIES, UniformPolicy  # noqa: E402
from sync.core.scheduler import MAX_INTERVAL, MIN_INTERVAL  # noqa: E402
from sync.edges.state import LIVE, StateDB  # noqa: E402
from sync.edges.edge_store import EdgeStore  # noqa: E402

H = 3600.0
D = 86400.0
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SCENARIOS = ("honest", "lying")
SAME_LASTMOD = "same-lastmod"  # a scenario whose sitemap gives every URL one stamp (replay_policies.py)
# Deploy scenarios (replay_policies.py): every commit is a deploy that rewrites every page's
# bytes (a build stamp) and stamps every URL with the deploy time; "mkdocs" also serves
# search/search_index.json (each page's text) as MkDocs does.
DEPLOY_DATE = "deploy-date"
MKDOCS = "mkdocs"
DEPLOY_SCENARIOS = (DEPLOY_DATE, MKDOCS)
FEED_PATH = "/search/search_index.json"
KINDS = ("static", "weekly", "hot")
HTML_TYPE = "text/html; charset=utf-8"


# ==========================================================================================
# the simulated site: documents, and the timeline of what happens to them
# ==========================================================================================
@dataclass(frozen=True)
class SiteSpec:
    """Knobs of the simulated site; the defaults are the benchmark's."""

    pages: int = 150
    days: float = 60.0
    seed: int = 3
    mix: tuple[tuple[str, float], ...] = (("static", 0.75), ("weekly", 0.20), ("hot", 0.05))
    static_per_day: float = 1 / 60
    weekly_per_day: float = 1 / 7
    hot_per_day: tuple[float, float] = (1.0, 3.0)  # log-uniform
    burst_days: tuple[float, ...] = (20.4, 44.6)  # 10:00 and 14:00 on those days
    burst_share: float = 0.30
    deploys_per_day: float = 0.5
    deploy_share: tuple[float, float] = (0.3, 1.0)
    nav_redesign_day: float = 30.3
    adds_per_day: float = 1 / 3
    removals_per_day: float = 1 / 8
    moves_per_day: float = 1 / 10


_WORDS = (
    "install configure deploy server client request response cache token index vector page sitemap "
    "chunk embed store query filter update delete schedule retry error timeout header payload batch "
    "cluster replica shard snapshot backup restore migrate upgrade version release plugin option "
    "default limit quota region endpoint webhook secret key rotate audit log metric trace alert"
).split()


def _prose(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 16))]
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


@dataclass
class Doc:
    """One page's mutable content while the timeline is generated."""

    ident: int
    kind: str
    rate_per_s: float
    path: str
    title: str
    sections: list[tuple[str, str]]
    build: int = 0  # last cosmetic deploy that rewrote this page (footer)
    nav: int = 0  # nav version the page was last rendered with
    alive: bool = True
    stamp: dict[str, float] = field(default_factory=dict)  # scenario -> lastmod (s from T0)

    def html(self) -> str:
        body = "".join(f"<h2>{h}</h2><p>{p}</p>" for h, p in self.sections)
        nav = ["Guide", "API", "Blog"] if self.nav == 0 else ["Docs", "Reference", "Tutorials", "Changelog", "Blog"]
        return render_page(self.title, body, nav=nav, footer=f"© Acme · build {self.build} · all rights reserved")

    def edit(self, rng: random.Random, t: float) -> None:
        """A text change: a changelog gets a new entry on top; a doc gets a section rewritten,
        sometimes one added or dropped."""
        if self.kind == "hot":
            day = (T0 + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M")
            self.sections = [(f"Release {day}", _prose(rng, 3)), *self.sections][:12]
            return
        r = rng.random()
        if r < 0.15:
            self.sections.append((f"Section {len(self.sections) + 1}", _prose(rng, rng.randint(3, 6))))
        elif r < 0.25 and len(self.sections) > 2:
            self.sections.pop(rng.randrange(len(self.sections)))
        else:
            i = rng.randrange(len(self.sections))
            self.sections[i] = (self.sections[i][0], _prose(rng, rng.randint(3, 6)))


@dataclass(frozen=True)
class SiteEvent:
    """One change to the served site at `t` seconds from T0.

    op: "set" (a page's HTML: new page, text edit or cosmetic deploy), "remove" (404),
    "gone" (410), "move" (301 from `path` to `target`, whose HTML is `html`).
    `lastmod` maps each scenario to the sitemap lastmod the page (or target) now carries.
    `text_hash` is the live text's hash, filled in by `hash_timeline`.
    """

    t: float
    op: str
    path: str
    kind: str
    html: str | None = None
    target: str | None = None
    new_page: bool = False
    text_changed: bool = False
    lastmod: dict[str, float] = field(default_factory=dict)
    text_hash: str | None = None

    @property
    def live_path(self) -> str:
        """The path whose content this event sets (the target of a move)."""
        return self.target if self.op == "move" else self.path


def _poisson_times(rng: random.Random, rate_per_s: float, start: float, end: float) -> list[float]:
    out, t = [], start
    while rate_per_s > 0:
        t += rng.expovariate(rate_per_s)
        if t > end:
            return out
        out.append(t)
    return out


def _draw_kind(rng: random.Random, spec: SiteSpec) -> str:
    """A page class drawn from the mix (for pages added later)."""
    r, acc = rng.random(), 0.0
    for kind, share in spec.mix:
        acc += share
        if r < acc:
            return kind
    return spec.mix[-1][0]


def _initial_kinds(rng: random.Random, spec: SiteSpec) -> list[str]:
    """The initial pages' classes in the mix's exact proportions (largest remainder), shuffled."""
    quotas = {k: math.floor(share * spec.pages) for k, share in spec.mix}
    by_remainder = sorted(spec.mix, key=lambda ks: -(ks[1] * spec.pages - quotas[ks[0]]))
    for k, _ in by_remainder[: spec.pages - sum(quotas.values())]:
        quotas[k] += 1
    kinds = [k for k, n in quotas.items() for _ in range(n)]
    rng.shuffle(kinds)
    return kinds


def _rate(rng: random.Random, spec: SiteSpec, kind: str) -> float:
    """A page's change rate per second for its class."""
    if kind == "static":
        return spec.static_per_day / D
    if kind == "weekly":
        return spec.weekly_per_day / D
    lo, hi = spec.hot_per_day
    return math.exp(rng.uniform(math.log(lo), math.log(hi))) / D


def _new_doc(rng: random.Random, spec: SiteSpec, ident: int, kind: str) -> Doc:
    rate = _rate(rng, spec, kind)
    folder = "changelog" if kind == "hot" else rng.choice(("guide", "reference", "tutorials", "api"))
    n = rng.randint(3, 7) if kind != "hot" else 6
    sections = [(f"Section {i + 1}", _prose(rng, rng.randint(3, 6))) for i in range(n)]
    return Doc(ident, kind, rate, f"/{folder}/page-{ident:03d}.html", f"{kind.title()} page {ident}", sections)


def _schedule(
    rng: random.Random, spec: SiteSpec, docs: dict[int, Doc], horizon: float
) -> list[tuple[float, int, str, int]]:
    """Every raw happening as (t, tiebreak, action, ident-or-arg), sorted by time."""
    raw: list[tuple[float, int, str, int]] = []
    seq = iter(range(10**9))
    born = dict.fromkeys(docs, 0.0)
    for t in _poisson_times(rng, spec.adds_per_day / D, 0.0, horizon):
        ident = len(docs)
        docs[ident] = _new_doc(rng, spec, ident, _draw_kind(rng, spec))
        docs[ident].alive = False  # until its "add" at t
        born[ident] = t
        raw.append((t, next(seq), "add", ident))
    for d in list(docs.values()):
        raw += [(t, next(seq), "edit", d.ident) for t in _poisson_times(rng, d.rate_per_s, born[d.ident], horizon)]
    for name, per_day in (("remove", spec.removals_per_day), ("move", spec.moves_per_day)):
        raw += [(t, next(seq), name, 0) for t in _poisson_times(rng, per_day / D, 2 * D, horizon)]
    raw += [(t, next(seq), "deploy", 0) for t in _poisson_times(rng, spec.deploys_per_day / D, 0.0, horizon)]
    raw += [(day * D, next(seq), "burst", 0) for day in spec.burst_days if day * D < horizon]
    if spec.nav_redesign_day * D < horizon:
        raw.append((spec.nav_redesign_day * D, next(seq), "nav", 0))
    return sorted(raw)


class _Walker:
    """Turns raw happenings into concrete `SiteEvent`s, keeping each page's content and
    its lastmod under both scenarios."""

    def __init__(self, rng: random.Random, spec: SiteSpec, docs: dict[int, Doc]):
        self.rng, self.spec, self.docs = rng, spec, docs
        self.events: list[SiteEvent] = []
        self.build_no = 0  # cosmetic deploys so far

    def alive(self, *, kinds: tuple[str, ...] = KINDS, initial_only: bool = False) -> list[Doc]:
        return [
            d
            for d in self.docs.values()
            if d.alive and d.kind in kinds and (not initial_only or d.ident < self.spec.pages)
        ]

    def emit_set(self, t: float, d: Doc, *, new: bool, text: bool) -> None:
        """Honest lastmod follows text changes; the lying one follows cosmetic deploys."""
        if new or text:
            d.stamp["honest"] = t
        if new or not text:
            d.stamp["lying"] = t
        self.events.append(
            SiteEvent(t, "set", d.path, d.kind, html=d.html(), new_page=new, text_changed=text, lastmod=dict(d.stamp))
        )

    def step(self, t: float, action: str, arg: int) -> None:
        getattr(self, f"_{action}")(t, arg)

    def _add(self, t: float, ident: int) -> None:
        d = self.docs[ident]
        d.alive, d.build, d.nav = True, self.build_no, self._current_nav(t)
        self.emit_set(t, d, new=True, text=True)

    def _edit(self, t: float, ident: int) -> None:
        d = self.docs[ident]
        if d.alive:
            d.edit(self.rng, t)
            self.emit_set(t, d, new=False, text=True)

    def _burst(self, t: float, _: int) -> None:
        pages = self.alive()
        for d in self.rng.sample(pages, round(self.spec.burst_share * len(pages))):
            d.edit(self.rng, t)
            self.emit_set(t, d, new=False, text=True)

    def _deploy(self, t: float, _: int, share: float | None = None) -> None:
        pages = self.alive()
        share = share if share is not None else self.rng.uniform(*self.spec.deploy_share)
        self.build_no += 1
        for d in self.rng.sample(pages, round(share * len(pages))):
            d.build, d.nav = self.build_no, self._current_nav(t)
            self.emit_set(t, d, new=False, text=False)

    def _nav(self, t: float, _: int) -> None:
        self._deploy(t, 0, share=1.0)

    def _remove(self, t: float, _: int) -> None:
        candidates = self.alive(kinds=("static", "weekly"), initial_only=True)
        d = self.rng.choice(candidates)
        d.alive = False
        op = "remove" if self.rng.random() < 0.5 else "gone"
        self.events.append(SiteEvent(t, op, d.path, d.kind))

    def _move(self, t: float, _: int) -> None:
        d = self.rng.choice(self.alive(kinds=("static", "weekly"), initial_only=True))
        old = d.path
        d.path = f"/moved/{old.strip('/').replace('/', '-')}"
        d.stamp = {"honest": t, "lying": t}  # a new URL: its lastmod is the move
        self.events.append(
            SiteEvent(t, "move", old, d.kind, html=d.html(), target=d.path, new_page=True, lastmod=dict(d.stamp))
        )

    def _current_nav(self, t: float) -> int:
        return int(t >= self.spec.nav_redesign_day * D)


@dataclass(frozen=True)
class Timeline:
    events: list[SiteEvent]
    initial_rates: list[float]  # change rate per second of each initial page (for the oracle)


def build_timeline(spec: SiteSpec) -> Timeline:
    """The site's whole history, deterministic in `spec.seed`: the initial pages at t = 0
    (their lastmod in the past), then every change in time order."""
    rng = random.Random(spec.seed)
    horizon = spec.days * D
    docs = {i: _new_doc(rng, spec, i, kind) for i, kind in enumerate(_initial_kinds(rng, spec))}
    rates = [d.rate_per_s for d in docs.values()]
    for d in docs.values():
        # Before T0: text last changed up to a year ago; last deploy within the last 60 days.
        d.stamp = {"honest": -rng.uniform(0, 365 * D), "lying": -rng.uniform(0, 60 * D)}
    raw = _schedule(rng, spec, docs, horizon)
    walker = _Walker(rng, spec, docs)
    for d in [d for d in docs.values() if d.alive]:
        walker.events.append(SiteEvent(0.0, "set", d.path, d.kind, html=d.html(), new_page=True, lastmod=dict(d.stamp)))
    for t, _, action, arg in raw:
        walker.step(t, action, arg)
    return Timeline(walker.events, rates)


# ==========================================================================================
# ground truth: the live text's hash, computed as the engine computes it
# ==========================================================================================
def live_text_hash(html: str) -> str:
    """What the engine would record for this page: hash of the extracted main text."""
    return content_hash(extract_page(html.encode(), HTML_TYPE).markdown)


def hash_timeline(events: list[SiteEvent], pool: ProcessPoolExecutor) -> list[SiteEvent]:
    """Fill in `text_hash` for every event carrying HTML (distinct HTML hashed once)."""
    htmls = sorted({e.html for e in events if e.html is not None})
    hashes = dict(zip(htmls, pool.map(live_text_hash, htmls, chunksize=64)))
    return [replace(e, text_hash=hashes[e.html]) if e.html is not None else e for e in events]


# ==========================================================================================
# analytic reference: the best a policy knowing every page's true Poisson rate could do
# ==========================================================================================
def _poisson_freshness(rate: float, visits_per_s: float) -> float:
    """Time-averaged freshness of a Poisson page visited at evenly spaced times
    (a page that never changes is always fresh, visited or not)."""
    if rate == 0:
        return 1.0
    if visits_per_s <= 0:
        return 0.0
    x = rate / visits_per_s
    return 1.0 if x == 0 else -math.expm1(-x) / x


def _visits_for_marginal(rate: float, mu: float) -> float:
    """Visit frequency where d(freshness)/d(frequency) = mu: the Lagrange condition
    (1 - (1 + x)e^-x) / rate = mu with x = rate / frequency; 0 when unreachable."""
    c = rate * mu
    if c >= 1 or rate == 0:
        return 0.0
    g = lambda x: -math.expm1(-x) - x * math.exp(-x)  # noqa: E731  increasing in x, 0 -> 1
    lo, hi = 0.0, 1.0
    while g(hi) < c:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g(mid) < c else (lo, mid)
    return rate / ((lo + hi) / 2)


def oracle_freshness(rates: list[float], visits_per_s: float) -> tuple[float, float]:
    """(optimal, uniform) mean freshness of Poisson pages for a total visit rate.

    Cho & Garcia-Molina's optimal allocation (ACM TODS 2003) by bisection on the
    Lagrange multiplier. Ignores what no policy can model: bursts, adds, removals, and
    requests spent on lastmod or 301s; so it is an upper bound for the Poisson part.
    """
    lo, hi = 1e-6, 1e15
    for _ in range(200):
        mu = math.sqrt(lo * hi)
        lo, hi = (mu, hi) if sum(_visits_for_marginal(r, mu) for r in rates) > visits_per_s else (lo, mu)
    best = statistics.fmean(_poisson_freshness(r, _visits_for_marginal(r, mu)) for r in rates)
    even = statistics.fmean(_poisson_freshness(r, visits_per_s / len(rates)) for r in rates)
    return best, even


# ==========================================================================================
# the meter: freshness, staleness age and notice delays, integrated over simulated time
# ==========================================================================================
class Meter:
    """Integrates index-vs-site agreement over time.

    The site changes at event times; the index only at pass times; between any two such
    instants both are constant, so the integrals are exact. `advance(t)` must be called
    with non-decreasing `t` before every change.
    """

    def __init__(self, day_s: float = D):
        self.t = 0.0
        self.live: dict[str, tuple[str, str]] = {}  # path -> (text hash, kind)
        self.index: dict[str, str] = {}  # path -> indexed hash
        self.stale_since: dict[str, float] = {}
        self.kind_of: dict[str, str] = {}
        self.live_s = self.fresh_s = self.stale_s = self.age_s2 = 0.0
        self.by_kind = {k: [0.0, 0.0] for k in KINDS}  # kind -> [live s, fresh s]
        self.day_s = day_s
        self.daily: dict[int, list[float]] = {}  # day -> [live s, fresh s]
        self.added: dict[str, float] = {}
        self.removed: dict[str, float] = {}
        self.new_delays: list[float] = []
        self.removal_delays: list[float] = []

    # -- time ---------------------------------------------------------------------------
    def advance(self, t: float) -> None:
        while self.t < t:  # split at day boundaries for the daily series
            end = min(t, (math.floor(self.t / self.day_s) + 1) * self.day_s)
            self._integrate(self.t, end)
            self.t = end

    def _integrate(self, a: float, b: float) -> None:
        dt = b - a
        if dt <= 0:
            return
        n_live = len(self.live)
        n_fresh = n_live - len(self.stale_since)
        self.live_s += n_live * dt
        self.fresh_s += n_fresh * dt
        self.stale_s += len(self.stale_since) * dt
        self.age_s2 += sum(dt * ((a + b) / 2 - s) for s in self.stale_since.values())
        for path, (_, kind) in self.live.items():
            acc = self.by_kind[kind]
            acc[0] += dt
            acc[1] += dt if path not in self.stale_since else 0.0
        day = self.daily.setdefault(int(a // self.day_s), [0.0, 0.0])
        day[0] += n_live * dt
        day[1] += n_fresh * dt

    # -- changes ------------------------------------------------------------------------
    def _recheck(self, path: str) -> None:
        fresh = path not in self.live or self.index.get(path) == self.live[path][0]
        if fresh:
            self.stale_since.pop(path, None)
        elif path not in self.stale_since:
            self.stale_since[path] = self.t

    def site_event(self, ev: SiteEvent) -> None:
        """Apply one site change (call `advance(ev.t)` first)."""
        if ev.op in ("remove", "gone", "move"):
            self.live.pop(ev.path, None)
            self.removed.setdefault(ev.path, ev.t)
            self._recheck(ev.path)
        if ev.op in ("set", "move"):
            path = ev.live_path
            if ev.new_page and ev.t > 0:
                self.added.setdefault(path, ev.t)
            self.live[path] = (ev.text_hash or "", ev.kind)
            self.kind_of[path] = ev.kind
            self._recheck(path)

    def index_snapshot(self, index: dict[str, str]) -> None:
        """The index after a pass at `self.t`: path -> content hash of indexed pages."""
        self.index = index
        for path in set(self.live) | set(self.stale_since):
            self._recheck(path)
        for path, t in list(self.added.items()):
            if path in index:
                self.new_delays.append(self.t - t)
                del self.added[path]
        for path, t in list(self.removed.items()):
            if path not in index:
                self.removal_delays.append(self.t - t)
                del self.removed[path]

    # -- results ------------------------------------------------------------------------
    def summary(self) -> dict:
        def delays(xs: list[float], missed: int) -> dict:
            return {
                "n": len(xs),
                "missed": missed,
                "mean_h": statistics.fmean(xs) / H if xs else None,
                "max_h": max(xs) / H if xs else None,
            }

        return {
            "freshness": self.fresh_s / self.live_s,
            "stale_share": 1 - self.fresh_s / self.live_s,
            "mean_stale_age_h": self.age_s2 / self.stale_s / H if self.stale_s else 0.0,
            "freshness_by_kind": {k: (f / live if live else None) for k, (live, f) in self.by_kind.items()},
            "daily_freshness": [f / live for _, (live, f) in sorted(self.daily.items())],
            "new": delays(self.new_delays, len(self.added)),
            "removed": delays(self.removal_delays, len(self.removed)),
        }


# ==========================================================================================
# running one strategy against the site
# ==========================================================================================
@dataclass(frozen=True)
class Strategy:
    """How pagesync is run: which policy, full passes how often, and what budget."""

    label: str
    policy: str = "change-rate"
    every_passes: int = 1  # a pass at every k-th tick
    full: bool = False
    budget: float | None = None  # mean max_fetches per pass; None: uncapped
    uniform_interval_s: float | None = None  # for policy "uniform"
    key: str = ""  # short id for the budget targets
    bulk_edits: bool = False  # PassConfig.bulk_edits (bulk-edit detection)
    full_after_deploy: bool = False  # a --full pass when the site changed since the last one, else none

    def cap(self, k: int) -> int | None:
        """Integer max_fetches for pass k whose running mean is `budget`; the first pass,
        the initial index, is never capped."""
        if self.budget is None or k == 0:
            return None
        return math.floor(self.budget * (k + 1)) - math.floor(self.budget * k)


@dataclass(frozen=True)
class RunSpec:
    scenario: str
    strategy: Strategy
    pass_s: float
    horizon_s: float


def _policy_name(strategy: Strategy) -> str:
    """Registers the uniform policy with the benchmark's interval under its own name
    (the engine builds policies by name from `POLICIES`)."""
    if strategy.policy != "uniform" or strategy.uniform_interval_s is None:
        return strategy.policy
    name = f"uniform-{strategy.uniform_interval_s:.0f}s"
    POLICIES[name] = functools.partial(UniformPolicy, interval_s=strategy.uniform_interval_s)
    return name


class _Site:
    """The served site plus what the runner needs of it: applying events, counting requests."""

    def __init__(self, scenario: str):
        self.scenario = scenario
        self.site = Site()
        if scenario in (SAME_LASTMOD, *DEPLOY_SCENARIOS):  # one stamp on every URL: the engine must ignore it
            self.site.sitemap_mode = "same-lastmod"
        self.server = SiteServer(self.site)
        self.html: dict[str, str] = {}  # live path -> its HTML as the history has it (deploy scenarios)
        self.texts: dict[str, str] = {}  # live path -> its text hash (the feed's text)
        self.builds = 0

    def deploy(self, t: float) -> None:
        """A deploy at `t`: every live page rewritten with a new build stamp (same text), every
        URL stamped `t`, and with MkDocs the search index regenerated."""
        if self.scenario not in DEPLOY_SCENARIOS:
            return
        self.builds += 1
        mtime = (T0 + timedelta(seconds=t)).timestamp()
        self.site.same_lastmod_at = mtime
        for path, html in self.html.items():
            self.site.set(path, html.replace("</body>", f"<!-- build {self.builds} --></body>"), mtime=mtime)
        if self.scenario == MKDOCS:
            docs = [{"location": p.lstrip("/"), "title": p, "text": h} for p, h in sorted(self.texts.items())]
            self.site.set(
                FEED_PATH, json.dumps({"config": {}, "docs": docs}), content_type="application/json", mtime=mtime
            )

    def _track(self, ev: SiteEvent) -> None:
        if ev.op in ("set", "move") and ev.html is not None:
            self.html[ev.live_path] = ev.html
            self.texts[ev.live_path] = ev.text_hash or ""
        if ev.op in ("remove", "gone", "move"):
            self.html.pop(ev.path, None)
            self.texts.pop(ev.path, None)

    def apply(self, ev: SiteEvent) -> None:
        self._track(ev)
        mtime = (T0 + timedelta(seconds=ev.lastmod.get(self.scenario, 0.0))).timestamp()
        if ev.op == "set":
            self.site.set(ev.path, ev.html, mtime=mtime)
        elif ev.op == "remove":
            self.site.remove(ev.path)
        elif ev.op == "gone":
            self.site.gone(ev.path)
        elif ev.op == "move":
            self.site.set(ev.target, ev.html, mtime=mtime)
            self.site.redirect(ev.path, self.server.url(ev.target), status=301)

    def sitemap_bytes(self) -> int:
        """Size of the sitemap as served now (what a pass downloads for it)."""
        res = self.site.sitemap_response("/sitemap.xml")
        return len(res.body) if res is not None else 0

    def take_requests(self) -> tuple[int, int]:
        """(page requests, other requests) since the last call; the log is cleared."""
        paths = [p for _, p, _, _ in self.site.requests]
        self.site.clear_log()
        pages = sum(1 for p in paths if not (p.startswith("/sitemap") or p == "/robots.txt"))
        return pages, len(paths) - pages


def _index(state: StateDB, base: str) -> tuple[dict[str, str], dict[str, object]]:
    """(path -> indexed hash for live indexed pages, path -> PageState for all)."""
    pages = {p.url[len(base) :]: p for p in state.all_pages() if p.url.startswith(base)}
    return {path: p.content_hash for path, p in pages.items() if p.status == LIVE and p.content_hash}, pages


def _check_visited(pages: dict, meter: Meter, now: datetime) -> int:
    """Pages visited this pass whose recorded hash is not the live text's hash (must be 0:
    it validates the benchmark's truth against the engine's own hashing)."""
    bad = 0
    for path, p in pages.items():
        if p.last_fetched_at == now and p.status == LIVE and path in meter.live and p.pending_hash is None:
            bad += p.content_hash != meter.live[path][0]
    return bad


def _store_matches_state(store: EdgeStore, index_by_url: dict[str, str]) -> bool:
    """Every indexed page's points carry its recorded hash, and no other page has points."""
    seen: dict[str, set[str]] = {}
    for point in store.scroll():
        seen.setdefault(point.payload["url"], set()).add(point.payload["content_hash"])
    return seen == {u: {h} for u, h in index_by_url.items()}


class _Totals:
    """Sums of the per-pass reports."""

    FIELDS = (
        "pages_fetched",
        "pages_not_modified",
        "pages_unchanged",
        "pages_changed",
        "pages_added",
        "pages_removed",
        "pages_failed",
        "pages_deferred",
        "chunks_embedded",
        "bytes_downloaded",
        "mass_delete_blocked",
    )

    def __init__(self) -> None:
        self.sums = dict.fromkeys(self.FIELDS, 0)
        self.errors = 0
        self.passes = 0

    def add(self, report) -> None:
        self.passes += 1
        for f in self.FIELDS:
            self.sums[f] += getattr(report, f)
        self.errors += len(report.errors)


async def _simulate(run: RunSpec, events: list[SiteEvent], workdir: Path) -> dict:
    """Replay the site's history, running passes on the strategy's schedule."""
    st = run.strategy
    policy = _policy_name(st)
    site, meter, totals = _Site(run.scenario), Meter(), _Totals()
    requests = [0, 0]
    sitemap_bytes = mismatches = 0
    bulk_detected: list[float] = []  # days at which a pass declared a bulk edit
    times = [ev.t for ev in events]
    pos = 0
    with site.server, StateDB(workdir / "state.db") as state:
        store = EdgeStore(workdir / "qdrant", "pages")
        sitemap, base = site.server.url("/sitemap.xml"), site.server.base_url
        try:
            async with make_client(timeout=10) as client:
                n_ticks = math.ceil(run.horizon_s / run.pass_s)
                for k in range(0, n_ticks, st.every_passes):
                    t = k * run.pass_s
                    end = bisect.bisect_right(times, t)
                    deployed = end > pos
                    for i, ev in enumerate(events[pos:end]):
                        meter.advance(ev.t)
                        site.apply(ev)
                        meter.site_event(ev)
                        if pos + i + 1 == end or events[pos + i + 1].t != ev.t:
                            site.deploy(ev.t)  # a commit's events together are one deploy
                    pos = end
                    if st.full_after_deploy and k > 0 and not deployed:
                        meter.advance(t)
                        index, pages = _index(state, base)
                        meter.index_snapshot(index)
                        continue
                    meter.advance(t)
                    sitemap_size = site.sitemap_bytes()
                    now = T0 + timedelta(seconds=t)
                    cfg = PassConfig(
                        sitemaps=[sitemap],
                        now=now,
                        full=st.full or st.full_after_deploy,
                        policy=policy,
                        max_fetches=st.cap(k // st.every_passes),
                        bulk_edits=st.bulk_edits,
                    )
                    report = await arun_pass(
                        cfg, fetcher=Fetcher(client), store=store, state=state, embedder=HashEmbedder(16)
                    )
                    pages_req, other_req = site.take_requests()
                    for edit in getattr(report, "bulk_edits", {}).values():
                        if edit.get("since_s") == now.timestamp():
                            bulk_detected.append(round(t / D, 2))
                    if k > 0:  # the initial index is the same for every strategy: not counted
                        totals.add(report)
                        requests[0] += pages_req
                        requests[1] += other_req
                        # a 304 for the sitemap costs headers only; the body came from the state
                        sitemap_bytes += sitemap_size if not getattr(report, "sitemaps_not_modified", 0) else 0
                    index, pages = _index(state, base)
                    mismatches += _check_visited(pages, meter, now)
                    meter.index_snapshot(index)
            for ev in events[pos:]:
                if ev.t <= run.horizon_s:
                    meter.advance(ev.t)
                    meter.site_event(ev)
            meter.advance(run.horizon_s)
            index, pages = _index(state, base)
            consistent = _store_matches_state(store, {base + p: h for p, h in index.items()})
            trust = state.host_trust_counts()
        finally:
            store.close()
    return {
        **meter.summary(),
        "page_requests": requests[0],
        "other_requests": requests[1],
        "sitemap_bytes": sitemap_bytes,
        **totals.sums,
        "pass_errors": totals.errors,
        "passes": totals.passes,
        "hash_mismatches": mismatches,
        "store_matches_state": consistent,
        "lastmod_advances_confirmed": [list(v) for v in trust.values()],
        "median_interval_d": _median_intervals(pages, meter.kind_of),
        "bulk_detected_days": bulk_detected,
    }


def _median_intervals(pages: dict, kind_of: dict[str, str]) -> dict[str, float | None]:
    """Median scheduled revisit interval per page class at the end (live pages)."""
    out: dict[str, list[float]] = {k: [] for k in KINDS}
    for path, p in pages.items():
        if p.status == LIVE and p.interval is not None and path in kind_of:
            out[kind_of[path]].append(p.interval.total_seconds() / D)
    return {k: (statistics.median(v) if v else None) for k, v in out.items()}


def run_one(run: RunSpec, events: list[SiteEvent]) -> dict:
    """One (scenario, strategy) run in a fresh work dir; runs in a worker process."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pagesync-fresh-") as tmp:
        result = asyncio.run(_simulate(run, events, Path(tmp)))
    return {"scenario": run.scenario, "strategy": asdict(run.strategy), "wall_s": time.monotonic() - t0, **result}


# ==========================================================================================
# orchestration: phase 1 (references), budgets, phase 2 (equal budgets), calibration
# ==========================================================================================
def _reference_strategies(pass_s: float) -> list[Strategy]:
    return [
        Strategy("nightly full", every_passes=round(D / pass_s), full=True, key="nightly"),
        Strategy("halve-double", policy="halve-double", key="hd"),
        Strategy("change-rate, uncapped", key="cr"),
        Strategy("change-rate + bulk edits, uncapped", bulk_edits=True, key="cr+bulk"),
        Strategy("change-rate, one pass a day", every_passes=round(D / pass_s), key="cr-daily"),
        Strategy("deploys (the new policy)", policy="deploys", key="dep"),
        Strategy("every page after each deploy", policy="change-rate", full_after_deploy=True, key="dep-full"),
    ]


def _uniform_interval(pages: int, pass_s: float, budget: float) -> float:
    """The one interval at which `pages` pages cost `budget` visits a pass, within the clamps."""
    if budget <= 0:
        return MAX_INTERVAL.total_seconds()
    return min(max(pages * pass_s / budget, MIN_INTERVAL.total_seconds()), MAX_INTERVAL.total_seconds())


EQUAL = (
    0.98,
    1.02,
)  # requests / target accepted as "the same budget" (freshness moves ~0.005 per 3 % of requests on the replay)
AT_MOST = (0.93, 1.0)  # ... accepted as "within the limit" (the goals' "at most half", "at most 10%")


def _budget_strategies(
    hd_requests: int, nightly_requests: int, n_passes: int, pages: int, pass_s: float
) -> list[tuple[Strategy, float, tuple[float, float]]]:
    """The capped runs: (strategy, request total to match, accepted window of requests / total)."""
    b = hd_requests / n_passes
    every_day = round(D / pass_s)
    daily_passes = math.ceil(n_passes / every_day)
    uniform = Strategy(
        "uniform @ HD budget",
        policy="uniform",
        budget=b,
        uniform_interval_s=_uniform_interval(pages, pass_s, b),
        key="uniform@hd",
    )
    return [
        (uniform, hd_requests, EQUAL),
        (Strategy("change-rate @ HD budget", budget=b, key="cr@hd"), hd_requests, EQUAL),
        (
            Strategy("change-rate + bulk edits @ HD budget", budget=b, bulk_edits=True, key="cr+bulk@hd"),
            hd_requests,
            EQUAL,
        ),
        (Strategy("change-rate @ 1/2 HD budget", budget=b / 2, key="cr@hd/2"), hd_requests / 2, AT_MOST),
        (
            Strategy(
                "change-rate, one pass a day @ 10% nightly",
                every_passes=every_day,
                budget=0.1 * nightly_requests / daily_passes,
                key="cr@10%n",
            ),
            0.1 * nightly_requests,
            AT_MOST,
        ),
    ]


def _next_budget(tries: list[tuple[float, int]], aim: float) -> float:
    """The budget for the next try: a secant step through the last two (budget, requests)
    points, or proportional scaling from one. Why it needs correcting at all: forced
    visits ignore the cap, some passes have fewer due pages than the cap, and a 301 costs
    two requests."""
    (b1, g1) = tries[-1]
    new = b1 * aim / g1 if g1 else 2 * b1
    if len(tries) >= 2:
        b0, g0 = tries[-2]
        if b1 != b0 and (g1 - g0) / (b1 - b0) > 0:
            new = b1 + (aim - g1) * (b1 - b0) / (g1 - g0)
    return min(max(new, 0.05), 4 * b1)


def _calibrated(
    st: Strategy, tries: list[tuple[float, int]], target: float, window: tuple[float, float], pages: int, pass_s: float
) -> Strategy | None:
    """The strategy to run next, or None when the last try is accepted."""
    got = tries[-1][1]
    if target <= 0 or window[0] <= got / target <= window[1]:
        return None
    b = _next_budget(tries, target * (window[0] + window[1]) / 2)
    interval = _uniform_interval(pages, pass_s, b) if st.policy == "uniform" else st.uniform_interval_s
    return replace(st, budget=b, uniform_interval_s=interval)


@dataclass
class _Job:
    scenario: str
    strategy: Strategy
    target: float | None = None  # request total a capped run must match
    window: tuple[float, float] = EQUAL  # accepted requests / target
    tries: list[tuple[float, int]] = field(default_factory=list)  # (budget, requests) so far


class Campaign:
    """Runs every (scenario, strategy) in a process pool, reacting to results as they
    come: a scenario's capped runs start once its halve-double and nightly references
    are in, and a capped run that missed its request target is re-run with a corrected
    budget (at most `calibrate` times)."""

    def __init__(self, pool: ProcessPoolExecutor, timeline: Timeline, args: argparse.Namespace):
        self.pool, self.timeline, self.args = pool, timeline, args
        self.pass_s = args.pass_hours * H
        self.horizon = args.days * D
        self.n_passes = math.ceil(self.horizon / self.pass_s)
        self.pending: dict = {}
        self.refs: dict[tuple[str, str], dict] = {}
        self.results: list[dict] = []

    def submit(self, job: _Job) -> None:
        run = RunSpec(job.scenario, job.strategy, self.pass_s, self.horizon)
        self.pending[self.pool.submit(run_one, run, self.timeline.events)] = job

    def wanted(self, key: str) -> bool:
        only = getattr(self.args, "strategies", None)
        return not only or key in only

    def run(self) -> list[dict]:
        refs = load_refs(getattr(self.args, "refs_from", None))
        for sc in self.args.scenarios:
            for key in REFERENCE_KEYS:
                if (sc, key) in refs:
                    self.refs[sc, key] = refs[sc, key]
            for st in _reference_strategies(self.pass_s):
                if (sc, st.key) in self.refs:
                    continue
                if self.wanted(st.key) or st.key in REFERENCE_KEYS:
                    self.submit(_Job(sc, st))
            self.start_budget_runs(sc)
        while self.pending:
            done, _ = wait(self.pending, return_when=FIRST_COMPLETED)
            for fut in done:
                self.on_result(self.pending.pop(fut), fut.result())
        return self.results

    def on_result(self, job: _Job, res: dict) -> None:
        st = job.strategy
        log(
            f"  {job.scenario:7s} {st.label:30s} budget {_fmt(st.budget, '6.2f')}  requests "
            f"{res['page_requests']:6d}  freshness {res['freshness']:.4f}  ({res['wall_s']:.0f} s)"
        )
        if job.target is None:
            if self.wanted(st.key):
                self.results.append(res)
            self.refs[job.scenario, st.key] = res
            self.start_budget_runs(job.scenario)
            return
        job.tries.append((st.budget or 0.0, res["page_requests"]))
        again = None
        if len(job.tries) <= self.args.calibrate:
            again = _calibrated(st, job.tries, job.target, job.window, self.args.pages, self.pass_s)
        if again is None:
            self.results.append({**res, "target_requests": job.target, "tries": job.tries})
        else:
            self.submit(replace(job, strategy=again))

    def start_budget_runs(self, sc: str) -> None:
        hd, night = self.refs.get((sc, "hd")), self.refs.get((sc, "nightly"))
        if hd is None or night is None or (sc, "budget runs") in self.refs:
            return
        self.refs[sc, "budget runs"] = {}
        for st, target, window in _budget_strategies(
            hd["page_requests"], night["page_requests"], self.n_passes, self.args.pages, self.pass_s
        ):
            if self.wanted(st.key):
                self.submit(_Job(sc, st, target, window))


def load_refs(path: Path | None) -> dict[tuple[str, str], dict]:
    """(scenario, key) -> result of the reference runs (halve-double, nightly) in an
    earlier run's JSON, so that a partial run (`--strategies`) gets the same budgets
    without running them again. Only valid for the same site, days and pass interval.
    The MkDocs scenario's references are the deploy-date ones when the file has none of its
    own: neither reads the feed, so the two are the same runs on the same served pages."""
    if path is None:
        return {}
    data = json.loads(Path(path).read_text())
    refs = {(r["scenario"], r["strategy"]["key"]): r for r in data["results"] if r["strategy"]["key"] in REFERENCE_KEYS}
    for key in REFERENCE_KEYS:
        if (MKDOCS, key) not in refs and (DEPLOY_DATE, key) in refs:
            refs[MKDOCS, key] = {**refs[DEPLOY_DATE, key], "scenario": MKDOCS}
    return refs


def add_partial_args(ap: argparse.ArgumentParser) -> None:
    """--strategies and --refs-from, shared with replay_policies.py."""
    ap.add_argument(
        "--strategies",
        default="",
        type=lambda s: [x for x in s.split(",") if x],
        help=f"run only these strategy keys ({', '.join(ORDER).replace('%', '%%')}); default: all",
    )
    ap.add_argument(
        "--refs-from",
        type=Path,
        default=None,
        help="take the halve-double and nightly references (the budgets) from this earlier "
        "results JSON instead of running them",
    )


def run_all(args: argparse.Namespace) -> dict:
    spec = SiteSpec(pages=args.pages, days=args.days, seed=args.seed, burst_share=args.burst_share)
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        timeline = build_timeline(spec)
        timeline = replace(timeline, events=hash_timeline(timeline.events, pool))
        log(
            f"timeline: {len(timeline.events)} events, {sum(e.text_changed for e in timeline.events)} text changes "
            f"({time.monotonic() - started:.0f} s)"
        )
        campaign = Campaign(pool, timeline, args)
        results = campaign.run()
    oracle = {}
    for sc in args.scenarios:
        hd, night = campaign.refs.get((sc, "hd")), campaign.refs.get((sc, "nightly"))
        for key, requests in (("hd", hd and hd["page_requests"]), ("10%n", night and 0.1 * night["page_requests"])):
            if requests:
                best, even = oracle_freshness(timeline.initial_rates, requests / campaign.horizon)
                oracle[f"{sc}@{key}"] = {"requests": requests, "optimal": best, "uniform": even}
    return {
        "spec": asdict(spec),
        "pass_hours": args.pass_hours,
        "n_passes": campaign.n_passes,
        "jobs": args.jobs,
        "wall_s": time.monotonic() - started,
        "oracle": oracle,
        "results": results,
        # reference runs taken from --refs-from (the goals need them), not re-run here
        "references": [r for r in campaign.refs.values() if r not in results],
    }


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ==========================================================================================
# reporting: markdown table, goals, plot
# ==========================================================================================
ORDER = (
    "nightly",
    "dep-full",
    "hd",
    "dep",
    "uniform@hd",
    "cr@hd",
    "cr+bulk@hd",
    "cr",
    "cr+bulk",
    "cr@hd/2",
    "cr-daily",
    "cr@10%n",
)
REFERENCE_KEYS = ("hd", "nightly")  # the budgets of the capped runs come from these


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "–" if x is None else format(x, spec)


def _sorted(results: list[dict], scenario: str) -> list[dict]:
    rows = [r for r in results if r["scenario"] == scenario]
    return sorted(rows, key=lambda r: ORDER.index(r["strategy"]["key"]))


def main_table(data: dict, scenarios: tuple[str, ...] = SCENARIOS) -> list[str]:
    out = [
        "| scenario | strategy | max_fetches/pass | page requests | 304 | 200 same text | MB pages + sitemaps | "
        "chunks embedded | freshness | stale share | stale age (h) | new: mean / max (h) | "
        "removed: mean / max (h) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sc in scenarios:
        for r in _sorted(data["results"], sc):
            st = r["strategy"]
            budget = "–" if st["budget"] is None else f"{st['budget']:.2f}"
            new, rem = r["new"], r["removed"]
            missed = lambda d: f" ({d['missed']} missed)" if d["missed"] else ""  # noqa: E731
            out.append(
                f"| {sc} | {st['label']} | {budget} | {r['page_requests']:,} | {r['pages_not_modified']:,} | "
                f"{r['pages_unchanged']:,} | {(r['bytes_downloaded'] - r['sitemap_bytes']) / 1e6:.1f} + "
                f"{r['sitemap_bytes'] / 1e6:.1f} | {r['chunks_embedded']:,} | "
                f"{r['freshness']:.4f} | {r['stale_share']:.4f} | {r['mean_stale_age_h']:.1f} | "
                f"{_fmt(new['mean_h'])} / {_fmt(new['max_h'])}{missed(new)} | "
                f"{_fmt(rem['mean_h'])} / {_fmt(rem['max_h'])}{missed(rem)} |"
            )
    return out


def detail_table(data: dict, scenarios: tuple[str, ...] = SCENARIOS) -> list[str]:
    out = [
        "| scenario | strategy | fresh: static | fresh: weekly | fresh: hot | median interval (d) static / weekly / hot | "
        "lastmod advances: confirmed / counted | deferred | checks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for sc in scenarios:
        for r in _sorted(data["results"], sc):
            fk, iv = r["freshness_by_kind"], r["median_interval_d"]
            trust = r["lastmod_advances_confirmed"]
            adv = f"{trust[0][1]} / {trust[0][0]}" if trust else "–"
            ok = r["hash_mismatches"] == 0 and r["store_matches_state"] and r["pass_errors"] == 0
            checks = (
                "ok"
                if ok
                else (
                    f"{r['hash_mismatches']} hash mismatches, store==state "
                    f"{r['store_matches_state']}, {r['pass_errors']} errors"
                )
            )
            out.append(
                f"| {sc} | {r['strategy']['label']} | {_fmt(fk['static'], '.4f')} | {_fmt(fk['weekly'], '.4f')} | "
                f"{_fmt(fk['hot'], '.4f')} | {_fmt(iv['static'], '.2f')} / {_fmt(iv['weekly'], '.2f')} / "
                f"{_fmt(iv['hot'], '.2f')} | {adv} | {r['pages_deferred']:,} | {checks} |"
            )
    return out


def goals(data: dict) -> list[str]:
    """The three goals, checked (not asserted), per scenario: the stale-share goal (half
    halve-double's stale share at its budget), the half-budget goal (freshness >= 0.95 on half
    its requests) and the tenth-of-nightly goal (the nightly recrawl's freshness on 10% of its
    requests)."""
    out = []
    for sc in SCENARIOS:
        # The references (halve-double, nightly) may come from --refs-from: data["references"].
        by = {r["strategy"]["key"]: r for r in data["results"] + data.get("references", []) if r["scenario"] == sc}
        if not {"hd", "cr@hd", "nightly"} <= set(by):
            continue
        hd, crhd, night = by["hd"], by["cr@hd"], by["nightly"]
        ratio = crhd["stale_share"] / hd["stale_share"] if hd["stale_share"] else math.inf
        req = crhd["page_requests"] / hd["page_requests"]
        bound = _oracle_note(data, sc, "hd")
        out.append(
            f"- **{sc}, stale-share goal** (change-rate at halve-double's budget: stale share <= 1/2 of "
            f"halve-double's): {'MET' if ratio <= 0.5 else 'MISSED'}: {crhd['stale_share']:.4f} vs "
            f"{hd['stale_share']:.4f}, ratio {ratio:.2f} (at {req:.2f}x halve-double's requests).{bound}"
        )
        if sc == "honest":
            out.append(_half_budget_goal(by, hd))
        out.append(_tenth_of_nightly_goal(data, sc, by, night))
    return out


def _oracle_note(data: dict, sc: str, key: str) -> str:
    """The analytic bound at a budget, for the scenario where lastmod does not decide."""
    oracle = data["oracle"].get(f"{sc}@{key}") if sc == "lying" else None
    if oracle is None:
        return ""
    return (
        f" For scale: at {oracle['requests']:,.0f} requests, a policy told every initial page's true rate, "
        f"visiting at evenly spaced times, would reach freshness {oracle['optimal']:.4f} on the Poisson part "
        f"of the site alone (visiting all pages equally: {oracle['uniform']:.4f}); bursts, adds and moves "
        f"only lower that."
    )


def _half_budget_goal(by: dict, hd: dict) -> str:
    cands = [r for k, r in by.items() if k.startswith("cr") and r["page_requests"] <= 0.5 * hd["page_requests"]]
    head = (
        "- **honest, half-budget goal** (freshness >= 0.95 with <= 1/2 of halve-double's requests, "
        f"<= {0.5 * hd['page_requests']:.0f}): "
    )
    if not cands:
        half = by.get("cr@hd/2")
        if half is None:
            return head + "not measured."
        return head + (
            f"MISSED: no change-rate run stayed within half the requests; the 1/2-budget run made "
            f"{half['page_requests']:,} ({half['page_requests'] / hd['page_requests']:.2f}x) with freshness "
            f"{half['freshness']:.4f}."
        )
    best = max(cands, key=lambda r: r["freshness"])
    verdict = "MET" if best["freshness"] >= 0.95 else "MISSED"
    return head + (
        f"{verdict}: {best['strategy']['label']} made {best['page_requests']:,} requests "
        f"({best['page_requests'] / hd['page_requests']:.2f}x) for freshness {best['freshness']:.4f}."
    )


def _tenth_of_nightly_goal(data: dict, sc: str, by: dict, night: dict) -> str:
    limit = 0.1 * night["page_requests"]
    head = (
        f"- **{sc}, tenth-of-nightly goal** (<= 10% of the nightly full recrawl's {night['page_requests']:,} requests, "
        f"i.e. <= {limit:.0f}, for freshness >= its {night['freshness']:.4f}): "
    )
    cands = [r for k, r in by.items() if k != "nightly" and r["page_requests"] <= limit]
    good = [r for r in cands if r["freshness"] >= night["freshness"]]
    if good:
        best = min(good, key=lambda r: r["page_requests"])
        return head + (
            f"MET by {best['strategy']['label']}: {best['page_requests']:,} requests "
            f"({best['page_requests'] / night['page_requests']:.1%}), freshness {best['freshness']:.4f}."
        )
    r = by.get("cr@10%n")
    if r is None:
        return head + "not measured."
    cheapest_ok = [x for k, x in by.items() if k != "nightly" and x["freshness"] >= night["freshness"]]
    alt = ""
    c = min(cheapest_ok, key=lambda x: x["page_requests"]) if cheapest_ok else None
    if c is not None and c is not r:
        alt = (
            f" The cheapest run at least as fresh was {c['strategy']['label']}: {c['page_requests']:,} requests "
            f"({c['page_requests'] / night['page_requests']:.1%} of nightly)."
        )
    floor = ""
    if r["page_requests"] > limit and r["strategy"]["budget"] is not None and r["strategy"]["budget"] <= 0.051:
        floor = (
            " Even with the cap at its floor (0.05 a pass) the run made more requests than the limit: the "
            "visits the cap does not apply to (trusted lastmod advances, repairs) exceed it on their own."
        )
    return head + (
        f"MISSED: {r['strategy']['label']} made {r['page_requests']:,} requests "
        f"({r['page_requests'] / night['page_requests']:.1%}) for freshness {r['freshness']:.4f}."
        f"{floor}{alt}{_oracle_note(data, sc, '10%n')}"
    )


def write_markdown(data: dict, command: str, path: Path) -> None:
    spec = data["spec"]
    lines = [
        "# Freshness benchmark: revisit strategies at equal fetch budgets",
        "",
        f"Command: `{command}` (`make bench-freshness` runs it with the defaults; wall time "
        f"{data['wall_s'] / 60:.1f} min on {data['jobs']} worker processes).",
        "",
        f"Simulated docs site of {spec['pages']} pages over {spec['days']:g} days, a pass every "
        f"{data['pass_hours']:g} h ({data['n_passes']} passes; nightly: one `--full` pass a day at 00:00). "
        "Text changes are Poisson: 75% of pages ~1 change / 60 d, 20% weekly, 5% hot changelogs at 1-3 / d; "
        f"bulk edits of {spec['burst_share']:.0%} of the pages on days {', '.join(f'{d:g}' for d in spec['burst_days'])}; "
        f"cosmetic deploys (~{spec['deploys_per_day']:g} / d, footer, once the nav) rewriting 30-100% of the pages' "
        "HTML with the same text; pages added (~1 / 3 d), removed (404 or 410, ~1 / 8 d) and moved (301, ~1 / 10 d). "
        "honest: sitemap lastmod = last text change; lying: lastmod = last cosmetic deploy touching the page "
        "(text edits leave it alone). Real engine, fetcher, state and Qdrant Edge store; fake hash embedder.",
        "",
        "Freshness: time-averaged share of live pages whose indexed `content_hash` is the live text's hash "
        "(not yet indexed = stale). Stale age: time-averaged age of the stale pages' staleness. Page requests: "
        "server log, sitemap and robots.txt excluded (a 301 costs two). Bytes: the pass reports (sitemaps included). "
        "max_fetches/pass: the mean of the cap per pass that ran (forced visits, i.e. trusted lastmod advances and "
        "repairs, ignore it), corrected until the run's requests are within 2% of its target (93-100% for the "
        '"at most" budgets). The initial full index (pass 0, never capped) is not counted. New = added pages and 301 targets; removed = 404, 410 and 301 sources.',
        "",
        *main_table(data),
        "",
        "Per class, and checks (every page visited in a pass has the live text's hash in the state; "
        "store points == state at the end; no pass errors):",
        "",
        *detail_table(data),
        "",
        "## Goals (checked, not asserted)",
        "",
        *goals(data),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def figure(data: dict, scenarios: tuple[str, ...] = SCENARIOS, title: str = "lastmod"):
    """Daily freshness per strategy (top) and stale share vs requests (bottom), one column
    per scenario; a matplotlib Figure (ImportError without matplotlib). Shared by the
    benchmarks' PNGs and notebooks/freshness.ipynb."""
    import matplotlib.pyplot as plt

    scenarios = [sc for sc in scenarios if any(r["scenario"] == sc for r in data["results"])]
    colors = {key: plt.get_cmap("tab10")(i) for i, key in enumerate(ORDER)}
    fig, axes = plt.subplots(2, len(scenarios), figsize=(7 * len(scenarios), 9), squeeze=False)
    for col, sc in enumerate(scenarios):
        rows = _sorted(data["results"], sc)
        ax = axes[0][col]
        for r in rows:
            ax.plot(
                range(len(r["daily_freshness"])),
                r["daily_freshness"],
                label=r["strategy"]["label"],
                lw=1.2,
                color=colors[r["strategy"]["key"]],
            )
        ax.set(title=f"{sc} {title}: daily freshness", xlabel="simulated day", ylabel="share of live pages fresh")
        ax.legend(fontsize=7, loc="lower left")
        ax = axes[1][col]
        for r in rows:
            ax.scatter(
                r["page_requests"],
                r["stale_share"],
                s=40,
                label=r["strategy"]["label"],
                color=colors[r["strategy"]["key"]],
            )
        ax.set(
            xscale="log",
            yscale="log",
            title=f"{sc} {title}: stale share vs page requests",
            xlabel="page requests over the run",
            ylabel="time-averaged stale share",
        )
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def write_plot(data: dict, path: Path, scenarios: tuple[str, ...] = SCENARIOS, title: str = "lastmod") -> bool:
    """`figure` saved as a PNG at `path`; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig = figure(data, scenarios, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=150)
    ap.add_argument("--days", type=float, default=60.0)
    ap.add_argument("--pass-hours", type=float, default=6.0)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), type=lambda s: [x for x in s.split(",") if x])
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (one run each)")
    ap.add_argument("--calibrate", type=int, default=4, help="budget corrections per capped run, at most")
    ap.add_argument(
        "--burst-share",
        type=float,
        default=SiteSpec.burst_share,
        help="share of pages a bulk-edit day changes (0: no bursts)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/freshness.md")
    ap.add_argument("--plot", type=Path, default=REPO / "notebooks/freshness.png")
    add_partial_args(ap)
    args = ap.parse_args(argv)
    bad = set(args.scenarios) - set(SCENARIOS)
    if bad:
        ap.error(f"unknown scenario(s) {', '.join(sorted(bad))}")
    if bad := set(args.strategies) - set(ORDER):
        ap.error(f"unknown strategy key(s) {', '.join(sorted(bad))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([".venv/bin/python", "bench/freshness.py", *(sys.argv[1:] if argv is None else argv)])
    data = run_all(args)
    write_markdown(data, command, args.out)
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=1))
    log(f"wrote {args.out} and {args.out.with_suffix('.json')}")
    if write_plot(data, args.plot):
        log(f"wrote {args.plot}")
    else:
        log("matplotlib is not installed: no plot (pip install matplotlib)")
    print("\n".join(main_table(data) + [""] + goals(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
