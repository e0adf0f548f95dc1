"""Revisit policies: when a page is next due, and how urgent a due page is.

Pure functions of a page's visit history (`sync.core.history`) and the time since its last
visit. Three policies, and `deploys` (`DeployPolicy`, the default) on top of them:

- `uniform` (`UniformPolicy`), the baseline: every page on one fixed revisit interval
  (3 d by default), whatever it does.
- `halve-double` (`HalveDoublePolicy`), the simple adaptive rule: the interval
  halves on a change, doubles otherwise, clamped to [6 h, 60 d] (`sync.core.scheduler`).
- `change-rate` (`ChangeRatePolicy`), what `deploys` schedules a dynamic site with: estimate the page's Poisson change
  rate from its visit history with Cho & Garcia-Molina's estimator for irregular
  revisit intervals (J. Cho, H. Garcia-Molina, "Estimating frequency of change",
  ACM TOIT 3(3), 2003), regularised by a prior so that new pages are not extreme, and
  rank pages by Olston & Pandey's refresh utility for Poisson pages (C. Olston,
  S. Pandey, "Recrawl scheduling based on information longevity", WWW 2008).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Callable, Protocol, Sequence, runtime_checkable

from . import scheduler
from ..errors import ConfigError
from .change_rate import estimate_rate, expected_staleness, interval_for_staleness
from .history import Visit
from .scheduler import MAX_INTERVAL, MIN_INTERVAL, NEW_PAGE_INTERVAL, clamp_interval

__all__ = [
    "DEFAULT_POLICY",
    "Policy",
    "HalveDoublePolicy",
    "ChangeRatePolicy",
    "UniformPolicy",
    "DeployPolicy",
    "POLICIES",
    "make_policy",
]

DEFAULT_POLICY = "deploys"

_DAY_S = 86400.0
_MAX_S = MAX_INTERVAL.total_seconds()


@runtime_checkable
class Policy(Protocol):
    """A revisit policy: when a page is next due, and how urgent a due page is."""

    name: str

    def next_interval(self, visits: Sequence[Visit], current: timedelta | None, changed: bool | None) -> timedelta:
        """Interval from this visit to the next, clamped to [MIN_INTERVAL, MAX_INTERVAL].

        `visits` is the page's history including the visit just made (append it with
        `add_visit` first); `current` the interval that led to this visit; `changed`
        whether this visit found new text, `None` for a page's first visit.
        """
        ...

    def priority(self, visits: Sequence[Visit], since_last_visit_s: float | None) -> float:
        """Bigger is visited sooner; `None` (never visited) is +inf."""
        ...

    def under_feed(self, trust: float) -> "Policy":
        """This policy for a page a trusted sitemap `lastmod` covers (`trust`: its host's
        `host_lastmod_trust`, above `lastmod_makes_due`'s threshold). A policy that
        learns nothing returns itself."""
        ...


@dataclass(frozen=True)
class HalveDoublePolicy:
    """Halve-double (`--policy halve-double`): halve on change, double otherwise.

    `next_interval` is `sync.core.scheduler.next_interval` exactly (a first visit, `changed`
    None, starts at 3 d). It keeps no per-page estimate, so among due pages the one
    waiting longest goes first: priority is the time since the last visit.
    """

    name = "halve-double"

    def next_interval(self, visits: Sequence[Visit], current: timedelta | None, changed: bool | None) -> timedelta:
        if changed is None:
            return NEW_PAGE_INTERVAL
        return scheduler.next_interval(current, changed)

    def priority(self, visits: Sequence[Visit], since_last_visit_s: float | None) -> float:
        if since_last_visit_s is None:
            return math.inf
        return max(0.0, float(since_last_visit_s))

    def under_feed(self, trust: float) -> "HalveDoublePolicy":
        return self


@dataclass(frozen=True)
class ChangeRatePolicy:
    """The learned per-page policy (`--policy change-rate`; what `deploys` uses on a dynamic site).

    Each page's change rate λ comes from `estimate_rate` on its history.

    `next_interval` picks the interval T whose expected accrued staleness equals a
    per-visit target: S(λ, T) = `target_staleness_s` (default 6 h). Why this
    equation rather than Olston & Pandey's own U(λ, T) = μ: both give T ≈ sqrt(2·μ/λ)
    while λT is small, which covers every page whose interval lies inside the clamps;
    but U is bounded by 1/λ, so U = μ has no root for pages changing faster than once
    per μ and the freshness-optimal policy would stop visiting them (its interval
    jumps to the 60 d ceiling), while S = μ always has one root, decreasing in λ
    (≈ μ + 1/λ for fast pages, then floored at 6 h). So faster-changing pages always
    get shorter intervals. The result is clamped to [6 h, 60 d]; a first visit gives
    3 d like halve-double.

    The target trades fetches for freshness. 6 h (the interval floor) is where, in the
    mixed-site simulation of `tests/core/test_policy.py` with no budget, this policy fetches
    no more than halve-double and is about a third less stale; 0.1 d fetches ~40%
    more than halve-double for a little less staleness. The price is on pages that never
    change: their estimate stays above the prior's pull, 0.5 / (unchanged time + 7 d),
    so they are revisited every few days at first and every two weeks after six months
    (about 3x halve-double's fetches on an all-static site), where halve-double reaches 60 d
    after five unchanged visits. `--max-fetches` caps the cost either way.

    `priority` is Olston & Pandey's utility U(λ, t) (`expected_staleness`): with a
    fetch budget, the due pages whose visit saves the most staleness go first.
    """

    target_staleness_s: float = 0.25 * _DAY_S
    prior_changes: float = 0.5
    prior_seconds: float = 7 * _DAY_S
    name = "change-rate"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.target_staleness_s) and self.target_staleness_s > 0):
            raise ValueError("target_staleness_s must be finite and > 0")
        estimate_rate((), prior_changes=self.prior_changes, prior_seconds=self.prior_seconds)

    def rate(self, visits: Sequence[Visit]) -> float:
        """The page's estimated change rate (changes per second) under this policy's prior."""
        return estimate_rate(visits, prior_changes=self.prior_changes, prior_seconds=self.prior_seconds)

    def next_interval(self, visits: Sequence[Visit], current: timedelta | None, changed: bool | None) -> timedelta:
        if changed is None:
            return NEW_PAGE_INTERVAL
        t = interval_for_staleness(self.rate(visits), self.target_staleness_s)
        if t >= _MAX_S:
            return MAX_INTERVAL
        return clamp_interval(timedelta(seconds=round(t)))

    def priority(self, visits: Sequence[Visit], since_last_visit_s: float | None) -> float:
        if since_last_visit_s is None:
            return math.inf
        return expected_staleness(self.rate(visits), max(0.0, float(since_last_visit_s)))

    def under_feed(self, trust: float) -> "ChangeRatePolicy":
        """The prior scaled by (1 - trust), for a page a trusted `lastmod` feed covers.

        The rate this policy learns is that of the changes the feed misses (announced
        changes are left out, `Visit.announced`), and where a host's advances have
        nearly all been confirmed, few are missed: the prior's pull of 0.5 changes per
        7 d would keep every quiet page on a revisit every week or two, checking for
        changes the feed would have announced (on FastAPI's history, 1,600 requests where
        halve-double spends 761, for the same freshness). Trust is the feed's precision,
        standing in for the recall nobody can observe; a missed change still counts in
        full once a visit finds it, so a page whose changes the feed misses (an included
        code sample) earns its own rate back from the data.
        """
        if not (0.0 <= trust < 1.0):
            raise ValueError(f"trust must lie in [0, 1), got {trust!r}")
        return replace(self, prior_changes=self.prior_changes * (1.0 - trust))


@dataclass(frozen=True)
class UniformPolicy:
    """One fixed revisit interval for every page (`--policy uniform`): the baseline.

    Every visit, the first included, schedules the next one `interval_s` later (default
    3 d), whether or not the text changed; nothing is learned. It is the yardstick the
    adaptive policies are measured against (Cho & Garcia-Molina, "Effective page refresh
    policies for web crawlers", ACM TODS 28(4), 2003, show it already beats visiting
    pages in proportion to their change rate). Among due pages the one waiting longest
    goes first: priority is the time since the last visit.

    `interval_s` must lie within the clamps, [6 h, 60 d]: a value outside would be
    silently clamped, which is worse than an error.
    """

    interval_s: float = 3 * _DAY_S
    name = "uniform"

    def __post_init__(self) -> None:
        lo, hi = MIN_INTERVAL.total_seconds(), _MAX_S
        if not (math.isfinite(self.interval_s) and lo <= self.interval_s <= hi):
            raise ValueError(f"interval_s must lie in [{lo:g}, {hi:g}] seconds, got {self.interval_s!r}")

    def next_interval(self, visits: Sequence[Visit], current: timedelta | None, changed: bool | None) -> timedelta:
        return timedelta(seconds=self.interval_s)

    def priority(self, visits: Sequence[Visit], since_last_visit_s: float | None) -> float:
        if since_last_visit_s is None:
            return math.inf
        return max(0.0, float(since_last_visit_s))

    def under_feed(self, trust: float) -> "UniformPolicy":
        return self


@dataclass(frozen=True)
class DeployPolicy(ChangeRatePolicy):
    """Deploy-aware scheduling (`--policy deploys`, `sync.core.deploys`): on a host whose
    pages change only when it is deployed, a pass visits pages only at a deploy, by their
    learned chance of a change per deploy, and only what a trusted change feed names;
    elsewhere (a dynamic host, or before a first deploy is seen) it is change-rate."""

    name = "deploys"


POLICIES: dict[str, Callable[[], Policy]] = {
    "deploys": DeployPolicy,
    "change-rate": ChangeRatePolicy,
    "halve-double": HalveDoublePolicy,
    "uniform": UniformPolicy,
}


def make_policy(name: str, *, interval: timedelta | None = None) -> Policy:
    """The policy called `name` with its defaults; `ConfigError` for an unknown name.

    `interval` is uniform revisits' one interval (`--revisit-interval`; default 3 d). It
    must lie within the clamps, [6 h, 60 d], and means nothing to the other policies,
    which choose each page's interval themselves: giving it with them is a `ConfigError`
    rather than silently ignored.
    """
    try:
        cls = POLICIES[name]
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise ConfigError(f"unknown policy {name!r} (choose one of: {known})") from None
    if interval is None:
        return cls()
    if cls is not UniformPolicy:
        raise ConfigError(
            f"a revisit interval (--revisit-interval) is for --policy uniform only: "
            f"{name!r} sets each page's interval itself"
        )
    try:
        return UniformPolicy(interval_s=interval.total_seconds())
    except ValueError:
        raise ConfigError(
            f"revisit interval {_span(interval)} is outside [{_span(MIN_INTERVAL)}, {_span(MAX_INTERVAL)}]"
        ) from None


def _span(t: timedelta) -> str:
    """`36 h`, `3 d`, `1.5 d`: a duration as a user would write it."""
    s = t.total_seconds()
    return f"{s / _DAY_S:g} d" if abs(s) >= _DAY_S else f"{s / 3600:g} h"
