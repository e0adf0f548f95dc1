"""Scheduling policies: which pages a pass visits, and when each page is next due.

Pure functions of a page's visit history and the pass's clock (passed in, never read):
no I/O, no state. The engine stores each page's history (`history_to_json`), builds a
`Candidate` per known page and asks `select_visits` which to fetch; after a visit it
appends a `Visit` (`add_visit`) and asks the policy for the next interval.

Three policies, and `deploys` (`DeployPolicy`, the default) on top of them:

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

A change is counted only when the extracted text's hash changed: ETag or
Last-Modified churn on an unchanged text is not a change, so it never raises a rate.
Nor does a change a trusted `lastmod` advance announced (`Visit.announced`): the rate is
that of the changes the feed misses, which only revisits can catch.

Sitemap `lastmod` serves as a change feed only once it has earned trust: the share of
a host's `lastmod` advances that a text-hash change confirmed (`lastmod_trust`); a
trusted advance makes the page due now (`lastmod_makes_due`). Ignoring `lastmod`
altogether when every URL carries the same stamp is the sitemap diff's job.

Bulk edits (`PassConfig.bulk_edits`, `--bulk-edits`; off by default): a host whose visits
find far more changed pages than their own rates predict (`update_bulk_state`, a
one-sided Poisson test) is in a bulk edit for `BULK_HOLD_S`; its pages not visited since
get a priority bonus (`BulkEdit.bonus`, learned per URL section) within `--max-fetches`,
and the changes found on them are put down to the edit, not to their rates.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Callable, NamedTuple, Protocol, Sequence, runtime_checkable

from . import scheduler
from ..errors import ConfigError, StateError
from .scheduler import MAX_INTERVAL, MIN_INTERVAL, NEW_PAGE_INTERVAL, clamp_interval

__all__ = [
    "HISTORY_LIMIT",
    "DEFAULT_POLICY",
    "Visit",
    "history_to_json",
    "history_from_json",
    "history_json_with",
    "add_visit",
    "estimate_rate",
    "expected_staleness",
    "accrued_staleness",
    "Policy",
    "HalveDoublePolicy",
    "ChangeRatePolicy",
    "UniformPolicy",
    "POLICIES",
    "make_policy",
    "Candidate",
    "select_visits",
    "lastmod_trust",
    "LASTMOD_PRIOR",
    "host_lastmod_trust",
    "lastmod_makes_due",
    "change_probability",
    "poisson_tail",
    "PassEvidence",
    "pass_evidence",
    "BulkEdit",
    "BulkState",
    "url_section",
    "update_bulk_state",
    "bulk_state_to_json",
    "bulk_state_from_json",
]

HISTORY_LIMIT = 64
"""Visits kept per page, oldest dropped: enough for a stable estimate, bounded state."""

DEFAULT_POLICY = "deploys"

_DAY_S = 86400.0
_MAX_S = MAX_INTERVAL.total_seconds()
_SERIES_BELOW = 1e-2  # below this λt, closed forms lose digits to cancellation


# --------------------------------------------------------------------------- history


class _VisitFields(NamedTuple):
    elapsed_s: float
    changed: bool
    announced: bool = False


class Visit(_VisitFields):
    """One visit that got an answer with text (200, or 304 meaning the same text).

    `elapsed_s` is the time since the page's previous such visit; a page's first visit
    has no predecessor and is not recorded as a `Visit`. `changed` is whether the
    extracted text's hash differs from the previous visit's (never ETag churn).
    `announced` is whether a trusted sitemap `lastmod` advance had said the page changed
    (the pass visited it for that): such a change is the feed's catch, not the revisit
    policy's, so `estimate_rate` leaves it out. Failed fetches are not visits: they
    observe nothing about the text.

    A (validated) named tuple rather than a dataclass: every visit of a page's history
    (up to `HISTORY_LIMIT`) is rebuilt from the state at each of its visits, and a tuple
    is built in a fraction of a frozen dataclass's time (`history_from_json`).
    """

    __slots__ = ()

    def __new__(cls, elapsed_s: float, changed: bool, announced: bool = False) -> "Visit":
        if not (math.isfinite(elapsed_s) and elapsed_s >= 0):
            raise ValueError(f"Visit.elapsed_s must be finite and >= 0, got {elapsed_s!r}")
        return tuple.__new__(cls, (elapsed_s, changed, announced))


def _visit_json(v: Visit) -> str:
    """One visit as `history_to_json` writes it: `[elapsed_s,0|1]`, or `[elapsed_s,0|1,1]`
    when announced. A whole number of seconds (what the engine records) is written as an
    integer: shorter, and parsed faster; it reads back as the same float. Written by hand,
    not by `json.dumps`, at a fraction of its cost: the fields are a finite float (whose
    `repr` is what `json` writes) and flags."""
    e = float(v.elapsed_s)
    field = repr(int(e)) if e.is_integer() else repr(e)
    if v.announced:
        return f"[{field},{1 if v.changed else 0},1]"
    return f"[{field},{1 if v.changed else 0}]"


def history_to_json(visits: Sequence[Visit]) -> str:
    """Compact JSON for the state DB: `[[elapsed_s, 0|1], ...]`, oldest first; an
    announced visit has a third field, `[elapsed_s, 0|1, 1]` (older rows read as before)."""
    return "[" + ",".join([_visit_json(v) for v in visits]) + "]"


def history_from_json(s: str | None) -> list[Visit]:
    """Inverse of `history_to_json`; `None` or `''` (no history yet) gives `[]`.

    Raises `StateError` on anything else that is not a list of `[seconds, 0|1]` pairs
    (or `[seconds, 0|1, 0|1]` triples), so a corrupted row is reported rather than
    silently scheduled as a new page. Each item is checked here, as `Visit` would, and
    the tuple built without a second check: this runs once per page visit on the whole
    history.
    """
    if not s:
        return []
    make, inf = tuple.__new__, math.inf
    try:
        raw = json.loads(s)
        if type(raw) is not list:
            raise ValueError("not a list")
        out: list[Visit] = []
        append = out.append
        for item in raw:
            n = len(item) if type(item) is list else 0
            if n == 2:
                elapsed, changed = item
                announced = 0
            elif n == 3:
                elapsed, changed, announced = item
            else:
                raise ValueError(f"bad visit {item!r}")
            kind = type(elapsed)  # bool is not accepted: type(True) is bool, not int
            if not ((kind is int or kind is float) and 0 <= elapsed < inf):  # NaN fails too
                raise ValueError(f"bad elapsed {elapsed!r}")
            if changed not in (0, 1) or announced not in (0, 1):  # also accepts true/false
                raise ValueError(f"bad flag in {item!r}")
            append(make(Visit, (float(elapsed), changed == 1, announced == 1)))
        return out
    except (ValueError, TypeError, OverflowError) as e:
        raise StateError(f"unreadable visit history {s[:80]!r}: {e}") from e


def add_visit(visits: Sequence[Visit], visit: Visit) -> list[Visit]:
    """A new history with `visit` appended, keeping the last `HISTORY_LIMIT` visits."""
    out = [*visits, visit]
    return out[-HISTORY_LIMIT:]


# A history exactly as `history_to_json` writes it when every elapsed time is a whole
# number of seconds below 10^15 (what the engine records; such a float prints as the
# integer it is): items `[s,c]` or `[s,c,1]`, s without leading zeros, c 0 or 1.
_WHOLE_VISIT = r"\[(?:0|[1-9][0-9]{0,14}),[01](?:,1)?\]"
_WHOLE_HISTORY = re.compile(rf"\[(?:{_WHOLE_VISIT}(?:,{_WHOLE_VISIT})*)?\]")


def history_json_with(stored: str | None, visits: Sequence[Visit], visit: Visit) -> str:
    """`history_to_json(add_visit(visits, visit))`, where `visits` is
    `history_from_json(stored)`: the JSON a visit leaves in the state.

    When `stored` is what `history_to_json` writes (whole seconds, as the engine records
    them), the result is `stored` with the visit's item appended and the oldest items
    past `HISTORY_LIMIT` cut from the front, as text: the same string, without writing
    every visit of the history again at each visit of the page."""
    n = len(visits)
    if not (stored and _WHOLE_HISTORY.fullmatch(stored)):
        return history_to_json(add_visit(visits, visit))
    item = _visit_json(visit)
    drop = n + 1 - HISTORY_LIMIT  # the oldest visits add_visit leaves out
    if drop <= 0:
        return f"{stored[:-1]},{item}]" if n else f"[{item}]"
    if drop >= n:
        return f"[{item}]"
    cut = 0
    for _ in range(drop):  # items are separated by "],[" and hold no bracket of their own
        cut = stored.index("],[", cut) + 2
    return f"[{stored[cut:-1]},{item}]"


# ------------------------------------------------------------------ change-rate model


def _phi(u: float) -> float:
    """u / (e^u - 1): the 'expected change count' term of a changed interval, λ·t/(e^λt-1)."""
    if u < _SERIES_BELOW:
        return 1.0 - u / 2.0 + u * u / 12.0 - u**4 / 720.0
    e = math.exp(-u)
    return u * e / -math.expm1(-u)


def _dphi(u: float) -> float:
    """d/du of `_phi`, stable for all u >= 0."""
    if u < _SERIES_BELOW:
        return -0.5 + u / 6.0 - u**3 / 180.0
    e = math.exp(-u)
    m = -math.expm1(-u)  # 1 - e^-u
    return e * (m - u) / (m * m)


def estimate_rate(
    visits: Sequence[Visit],
    *,
    prior_changes: float = 0.5,
    prior_seconds: float = 7 * _DAY_S,
) -> float:
    """Estimated change rate of a page, in changes per second (always finite and > 0).

    Model: the page's text changes as a Poisson process of rate λ, and each visit only
    reveals whether at least one change happened in the `elapsed_s = t` since the
    previous visit, with probability 1 - e^(-λt). Cho & Garcia-Molina (2003) give the
    maximum-likelihood estimate for such irregular revisit intervals as the root of

        Σ_changed t_i / (e^(λ t_i) - 1)  =  Σ_unchanged t_j .

    That root is 0 when nothing ever changed and infinite when everything did, so the
    likelihood is regularised with pseudo-counts. Exactly: the log-likelihood gets one
    extra term, `prior_changes · log λ - λ · prior_seconds`, which is what a fully
    watched Poisson process showing `prior_changes` changes in `prior_seconds` would
    contribute (equivalently, the estimate is the posterior mode under a
    Gamma(shape = prior_changes + 1, rate = prior_seconds) prior). The estimate is the
    unique root of

        Σ_changed t_i / (e^(λ t_i) - 1) + prior_changes / λ  =  Σ_unchanged t_j + prior_seconds

    whose left side falls strictly from +inf to 0 as λ grows. Consequences:

    - no visits: λ = prior_changes / prior_seconds (default 1 change per 14 days);
    - no change observed: λ = prior_changes / (Σ t + prior_seconds), small but > 0;
    - every visit changed: finite, since the right side is at least prior_seconds;
    - always  k / (U + T) <= λ <= (C + k) / (U + T)  with k = prior_changes,
      T = prior_seconds, U the unchanged seconds, C the number of changed visits;
    - more changes observed (a visit flipped to changed, or a changed visit added)
      never lowers the estimate; more unchanged time never raises it.

    The rate is that of the changes a trusted sitemap `lastmod` does not announce: a
    visit that such an advance caused (`Visit.announced`) counts as an unchanged
    interval whatever it found, since the feed, not the revisit policy, will catch the
    page's next announced change. On a site with an honest lastmod the revisits then go
    where it is silent (a page whose included code sample changed, say) rather than to
    the pages it already covers. Should the host lose the feed's trust, its pages'
    changes count again from their next visits on (their announced past stays as
    unchanged time, so they are slow to look fast again).

    The prior is worth `prior_seconds` of observation, so it fades once the unchanged
    time in the history is much longer than that (within a few percent for pages
    changing daily or slower). For pages changing several times a day the unchanged
    time stays short and the estimate stays low (about half the truth for an hourly
    page seen 500 times at ~1 h); their intervals barely move, as they sit near the
    6 h floor either way, but their priority (bounded by 1/λ) is overstated.
    """
    k, big_t = float(prior_changes), float(prior_seconds)
    if not (math.isfinite(k) and k > 0 and math.isfinite(big_t) and big_t > 0):
        raise ValueError("prior_changes and prior_seconds must be finite and > 0")
    # A change a trusted lastmod advance announced (`Visit.announced`) is the feed's
    # catch: for the rate of the changes it misses, its interval counts as unchanged. (An
    # unannounced change in that interval too is invisible, but the announced visit
    # caught it anyway.)
    changed = [v.elapsed_s for v in visits if v.changed and not v.announced]
    exposure = math.fsum(v.elapsed_s for v in visits if not v.changed or v.announced) + big_t
    lo, hi = k / exposure, (len(changed) + k) / exposure
    if not changed:
        return lo

    # Solve f(λ) = Σ φ(λ t_i) + k - λ·exposure = 0 (the equation above times λ), by
    # Newton's method on x = log λ, safeguarded by bisection of the bracket [lo, hi].
    def f_and_slope(lam: float) -> tuple[float, float]:
        f = k - lam * exposure
        dfdx = -lam * exposure
        for t in changed:
            u = lam * t
            f += _phi(u)
            dfdx += u * _dphi(u)
        return f, dfdx

    x_lo, x_hi = math.log(lo), math.log(hi)
    x = 0.5 * (x_lo + x_hi)
    for _ in range(200):
        f, dfdx = f_and_slope(math.exp(x))
        if f == 0.0:
            break
        if f > 0:
            x_lo = x
        else:
            x_hi = x
        step = -f / dfdx if dfdx < 0 else math.inf
        x_new = x + step
        if not (x_lo <= x_new <= x_hi):
            x_new = 0.5 * (x_lo + x_hi)
        if abs(x_new - x) <= 1e-13 * max(1.0, abs(x)) or x_hi - x_lo <= 1e-13 * max(1.0, abs(x)):
            x = x_new
            break
        x = x_new
    return math.exp(x)


def _check_rate_t(rate: float, t_s: float) -> None:
    if not (math.isfinite(rate) and rate >= 0 and math.isfinite(t_s) and t_s >= 0):
        raise ValueError(f"rate and t_s must be finite and >= 0, got {rate!r}, {t_s!r}")


def expected_staleness(rate: float, t_s: float) -> float:
    """Olston & Pandey's refresh utility of a Poisson page, in seconds:

        U(λ, t) = 1/λ - (t + 1/λ) · e^(-λt)        (t = time since the last visit)

    Why this ranks pages: with S(t) = t - (1 - e^(-λt))/λ the expected staleness
    accrued t after a visit (`accrued_staleness`), U(t) = t·S'(t) - S(t). Refreshing
    every page when its U reaches one common threshold is the Lagrange condition for
    the least time-averaged staleness at a given fetch rate (Olston & Pandey 2008,
    after Cho & Garcia-Molina), so a pass with a budget visits the highest U first.
    Probabilistically U = E[τ; τ <= t], τ ~ Exp(λ) the time of the first change.

    U is 0 at t = 0, increases with t (U' = λ t e^(-λt)), is ≈ λt²/2 while λt is small
    (like S) and tends to 1/λ: a page that changes faster than it can be visited gains
    little from a visit. Computed as t·ψ(λt) with a series for small λt (no
    cancellation) and without overflow for large λt; λ = 0 gives 0.
    """
    _check_rate_t(rate, t_s)
    u = rate * t_s
    if u == 0.0:
        return 0.0
    if u < _SERIES_BELOW:
        # 1 - (1+u)e^-u = Σ_{n>=2} (-1)^n (n-1)/n! u^n, divided by u
        psi = u / 2 - u**2 / 3 + u**3 / 8 - u**4 / 30 + u**5 / 144
    else:
        psi = (-math.expm1(-u) - u * math.exp(-u)) / u
    return t_s * psi


def accrued_staleness(rate: float, t_s: float) -> float:
    """Expected seconds a Poisson page has spent stale t after a visit:

        S(λ, t) = ∫_0^t (1 - e^(-λs)) ds = t - (1 - e^(-λt))/λ = E[(t - τ)⁺]

    ≈ λt²/2 for small λt, ≈ t - 1/λ for large. `ChangeRatePolicy.next_interval` picks
    the interval whose S equals its staleness target.
    """
    _check_rate_t(rate, t_s)
    u = rate * t_s
    if u == 0.0:
        return 0.0
    if u < _SERIES_BELOW:
        chi = u / 2 - u**2 / 6 + u**3 / 24 - u**4 / 120 + u**5 / 720
    else:
        chi = (u + math.expm1(-u)) / u
    return t_s * chi


def _interval_for_staleness(rate: float, target_s: float) -> float:
    """The t >= 0 with S(rate, t) = target_s, in seconds (inf for rate 0).

    In u = λt this is g(u) = u - 1 + e^(-u) = λ·target: g is increasing and convex, so
    Newton's method started at or above the root descends to it monotonically.
    Bounds: sqrt(2c) <= u <= c + 1 with c = λ·target.
    """
    if rate == 0.0:
        return math.inf
    c = rate * target_s

    def g(u: float) -> float:
        if u < _SERIES_BELOW:
            return u**2 / 2 - u**3 / 6 + u**4 / 24 - u**5 / 120 + u**6 / 720
        return u + math.expm1(-u)

    u = min(c + 1.0, math.sqrt(2 * c) + c)
    if g(u) < c:  # the tighter start is not above the root (cannot happen; be safe)
        u = c + 1.0
    for _ in range(200):
        gu = g(u)
        slope = -math.expm1(-u)
        if slope <= 0.0:
            break
        u_new = u - (gu - c) / slope
        if u_new >= u or u_new <= 0.0:
            break  # converged to within rounding
        if u - u_new <= 1e-14 * u:
            u = u_new
            break
        u = u_new
    return u / rate


# -------------------------------------------------------------------------- policies


@runtime_checkable
class Policy(Protocol):
    """A revisit policy: when a page is next due, and how urgent a due page is."""

    name: str

    def next_interval(
        self, visits: Sequence[Visit], current: timedelta | None, changed: bool | None
    ) -> timedelta:
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

    def next_interval(
        self, visits: Sequence[Visit], current: timedelta | None, changed: bool | None
    ) -> timedelta:
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
    """The learned default (`--policy change-rate`).

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
        return estimate_rate(
            visits, prior_changes=self.prior_changes, prior_seconds=self.prior_seconds
        )

    def next_interval(
        self, visits: Sequence[Visit], current: timedelta | None, changed: bool | None
    ) -> timedelta:
        if changed is None:
            return NEW_PAGE_INTERVAL
        t = _interval_for_staleness(self.rate(visits), self.target_staleness_s)
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

    def next_interval(
        self, visits: Sequence[Visit], current: timedelta | None, changed: bool | None
    ) -> timedelta:
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
        raise ConfigError(f"a revisit interval (--revisit-interval) is for --policy uniform only: "
                          f"{name!r} sets each page's interval itself")
    try:
        return UniformPolicy(interval_s=interval.total_seconds())
    except ValueError:
        raise ConfigError(f"revisit interval {_span(interval)} is outside "
                          f"[{_span(MIN_INTERVAL)}, {_span(MAX_INTERVAL)}]") from None


def _span(t: timedelta) -> str:
    """`36 h`, `3 d`, `1.5 d`: a duration as a user would write it."""
    s = t.total_seconds()
    return f"{s / _DAY_S:g} d" if abs(s) >= _DAY_S else f"{s / 3600:g} h"


# ------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class Candidate:
    """A page the pass could visit.

    `since_last_visit_s` is None for a page never visited. `due`: its scheduled time
    has come (the caller leaves it False while a failing page backs off). `forced`: a
    trusted `lastmod` advance or `--full` asks for it whatever the budget. `repair`: the
    page has a pending write (a crash or a store error between the store write and the
    state's record): it is visited first, whatever the budget. `bonus_s` (>= 0) is added
    to the policy's priority of a due page: `BulkEdit.bonus` of a page a bulk edit under
    way may have changed. `policy`, when set, scores this page instead of the pass's
    policy: `Policy.under_feed` for a page a trusted `lastmod` feed covers.
    """

    url: str
    visits: tuple[Visit, ...]
    since_last_visit_s: float | None
    due: bool
    forced: bool
    repair: bool = False
    bonus_s: float = 0.0
    policy: Policy | None = None


def select_visits(
    candidates: Sequence[Candidate], policy: Policy, max_fetches: int | None
) -> list[str]:
    """The URLs this pass visits, in visiting order.

    1. Repairs (`repair`), by URL: always, even past the budget, so a pending write is
       never postponed. They count against the budget.
    2. New pages (never visited), by URL, so a page is indexed before anything known is
       refreshed: within what the repairs leave of `max_fetches`. A new page that is also
       `forced` is never cut.
    3. Forced pages (trusted `lastmod` advance, `--full`), by URL, then starved pages (due,
       last visit at least `MAX_INTERVAL` ago, longest-waiting first): always, even past
       the budget, so that a trusted change feed is followed at once and no page goes
       unvisited longer than the 60 d ceiling. They count against the budget after the
       new pages, so they never take a new page's place.
    4. Other due pages, highest `policy.priority` + `bonus_s` first, ties by URL: within
       what is left.

    So every visit counts against `max_fetches`, but only repairs, forced and starved
    pages may take the pass past it; a new page is cut only when the repairs (and the new
    pages before it) fill the budget, never for a forced, starved or due page.
    Pages neither repaired, forced, new nor due are not visited: the budget is a cap, not
    a quota. Duplicate URLs are a caller bug and raise `ValueError`.
    """
    if max_fetches is not None and max_fetches < 0:
        raise ValueError(f"max_fetches must be >= 0 or None, got {max_fetches}")
    seen: set[str] = set()
    repairs: list[str] = []
    new: list[Candidate] = []
    forced: list[str] = []
    starved: list[Candidate] = []
    due: list[tuple[float, str]] = []
    for c in candidates:
        if c.url in seen:
            raise ValueError(f"duplicate candidate {c.url!r}")
        seen.add(c.url)
        if c.repair:
            repairs.append(c.url)
        elif c.since_last_visit_s is None:
            new.append(c)
        elif c.forced:
            forced.append(c.url)
        elif c.due and c.since_last_visit_s >= _MAX_S:
            starved.append(c)
        elif c.due:
            due.append(((c.policy or policy).priority(c.visits, c.since_last_visit_s) + c.bonus_s, c.url))

    cap = math.inf if max_fetches is None else max_fetches
    out = sorted(repairs)
    for c in sorted(new, key=lambda c: c.url):
        if c.forced or len(out) < cap:
            out.append(c.url)
    out += sorted(forced)
    out += [c.url for c in sorted(starved, key=lambda c: (-(c.since_last_visit_s or 0.0), c.url))]
    for _, url in sorted(due, key=lambda p: (-p[0], p[1])):
        if len(out) >= cap:
            break
        out.append(url)
    return out


# --------------------------------------------------------------------- lastmod trust


def lastmod_trust(
    confirmed: int,
    advances: int,
    *,
    prior_confirmed: float = 1.0,
    prior_advances: float = 2.0,
) -> float:
    """How far a host's sitemap `lastmod` can be believed, in [0, 1].

    The share of its `lastmod` advances that a text-hash change confirmed when the
    page was next visited, Beta-smoothed: (confirmed + prior_confirmed) /
    (advances + prior_advances). With the default prior (one confirmation in two
    advances) a host starts at 0.5, which `lastmod_makes_due` does not yet trust.
    """
    if not (0 <= confirmed <= advances):
        raise ValueError(f"need 0 <= confirmed <= advances, got {confirmed}, {advances}")
    if not (0 <= prior_confirmed <= prior_advances and prior_advances > 0):
        raise ValueError("need 0 <= prior_confirmed <= prior_advances and prior_advances > 0")
    return (confirmed + prior_confirmed) / (advances + prior_advances)


# A host's sitemap lastmod starts with the benefit of the doubt (as if 2 of 3 advances had
# been confirmed); a couple of advances that no text change confirms take it away.
LASTMOD_PRIOR = (2.0, 3.0)


def host_lastmod_trust(advances: int, confirmed: int) -> float:
    """A host's `lastmod_trust` from its recorded counts, under the engine's prior
    (`LASTMOD_PRIOR`): what a pass and `pagesync status` both go by."""
    return lastmod_trust(confirmed, advances, prior_confirmed=LASTMOD_PRIOR[0], prior_advances=LASTMOD_PRIOR[1])


def lastmod_makes_due(trust: float, threshold: float = 0.5) -> bool:
    """Whether a `lastmod` advance makes the page due now: trust strictly above
    `threshold`, so a host with no record yet (trust 0.5 by default) must first earn it
    through advances that its pages' scheduled visits confirmed."""
    return trust > threshold


# ------------------------------------------------------------------------ bulk edits
#
# A bulk edit (a rename, a reworded admonition, a docs-wide fix) changes many pages at
# once, pages whose histories say they hardly ever change. The rate estimates cannot see
# it coming, and a budgeted pass then takes a whole revisit cycle to find every page it
# touched, while the pages it did find look faster-changing than they are. The pieces
# below notice one from the passes' own visits and say how to react; the engine keeps
# their state per host in its run report (`bulk_edits`), so nothing new is stored per page.

BULK_WINDOW_S = 2 * _DAY_S
"""Evidence older than this (pass clock) is forgotten."""
BULK_ALPHA = 0.01
"""One-sided significance of the excess of changes: P(X >= x) under the pages' own rates."""
BULK_MIN_CHANGES = 3
"""A bulk edit needs at least this many changed visits in the window."""
BULK_HOLD_S = 14 * _DAY_S
"""How long after its detection a bulk edit raises its pages' priority: about a whole
revisit cycle of a site under a tight budget (measured on the FastAPI replay: 7 d caught
less of the edit, 30 d no more than 14 d)."""


def change_probability(rate: float, t_s: float) -> float:
    """P(at least one change in t seconds) for a Poisson page of rate λ: 1 - e^(-λt)."""
    _check_rate_t(rate, t_s)
    return -math.expm1(-rate * t_s)


def poisson_tail(k: int, mu: float) -> float:
    """P(X >= k) for X ~ Poisson(mu), in [0, 1].

    The test statistic of `update_bulk_state`: the number of changed visits, whose exact
    law under "no bulk edit" is Poisson-binomial with the visits' predicted P(change) p_i.
    The Poisson law of the same mean Σ p_i is more spread out (variance Σ p_i against
    Σ p_i (1 - p_i)), so its upper tail is the larger one (Hoeffding 1956 for k >= mean
    + 1): using it errs on the side of not declaring a bulk edit.
    """
    if not (math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be finite and >= 0, got {mu!r}")
    if k <= 0:
        return 1.0
    if mu == 0.0:
        return 0.0
    if k <= mu:  # the tail is at least ~1/2: 1 - P(X < k), summed upwards
        term = math.exp(-mu)
        below = 0.0
        for i in range(k):
            below += term
            term *= mu / (i + 1)
        return min(1.0, max(0.0, 1.0 - below))
    term = math.exp(-mu + k * math.log(mu) - math.lgamma(k + 1))  # P(X = k), terms now shrink
    total, i = 0.0, k
    while term > 1e-17 * total or total == 0.0:
        total += term
        i += 1
        term *= mu / i
        if term == 0.0:
            break
    return min(1.0, total)


@dataclass(frozen=True)
class PassEvidence:
    """One pass's visits to one host that tell about bulk edits: how many there were, how
    many found changed text, and how many changes the pages' own rates predicted (the sum
    of each visit's P(change) = 1 - e^(-λt), λ estimated before the visit)."""

    at_s: float
    visits: int
    changes: int
    expected: float

    def __post_init__(self) -> None:
        if not (0 <= self.changes <= self.visits and 0 <= self.expected <= self.visits + 1e-9):
            raise ValueError(f"inconsistent evidence {self!r}")


def pass_evidence(at_s: float, observations: Sequence[tuple[float, bool]]) -> PassEvidence:
    """A pass's evidence from its (predicted P(change), changed) pairs."""
    return PassEvidence(at_s, len(observations), sum(1 for _, ch in observations if ch),
                        math.fsum(p for p, _ in observations))


BULK_SECTION_PRIOR = 2.0
"""Pseudo-visits at the host's share behind each section's share of a bulk edit."""


def url_section(url: str) -> str:
    """The first segment of the URL's path when more follow ('' for a page at the top
    level, `/features/` or `/index.html`): docs sites lay their sections out this way, and a
    bulk edit often covers some sections and not others."""
    path = url.split("://", 1)[-1].partition("/")[2].split("?", 1)[0].split("#", 1)[0]
    segments = [seg for seg in path.split("/") if seg]
    return segments[0] if len(segments) >= 2 else ""


@dataclass(frozen=True)
class BulkEdit:
    """A bulk edit under way on a host, detected at `since_s`.

    Pages last visited before `since_s` ("suspects") may carry it; each had a share `share`
    of being changed by it. Until `until_s` a suspect's priority gets `bonus`, and a
    change found on one is put down to the edit rather than to the page's own rate.
    `sections` counts the suspects visited since, per `url_section`: (section, visited,
    changed), so the edit's share is learned per section as its pages are seen.
    """

    since_s: float
    until_s: float
    share: float
    sections: tuple[tuple[str, int, int], ...] = ()

    def share_for(self, section: str) -> float:
        """The section's share of changed suspects so far, smoothed towards the host's:
        (changed + k·share) / (visited + k), k = `BULK_SECTION_PRIOR`."""
        for name, visited, changed in self.sections:
            if name == section:
                k = BULK_SECTION_PRIOR
                return (changed + k * self.share) / (visited + k)
        return self.share

    def with_visits(self, seen: Sequence[tuple[str, bool]]) -> "BulkEdit":
        """This edit with suspect visits (section, changed) added to its section counts."""
        counts = {name: [v, c] for name, v, c in self.sections}
        for section, changed in seen:
            cell = counts.setdefault(section, [0, 0])
            cell[0] += 1
            cell[1] += int(bool(changed))
        return replace(self, sections=tuple(sorted((n, v, c) for n, (v, c) in counts.items())))

    def active(self, now_s: float) -> bool:
        return now_s < self.until_s

    def suspect(self, last_visit_s: float | None, now_s: float) -> bool:
        """Whether a page last visited at `last_visit_s` (None: never) may carry the edit."""
        return self.active(now_s) and last_visit_s is not None and last_visit_s < self.since_s

    def bonus(self, last_visit_s: float | None, now_s: float, section: str = "") -> float:
        """Seconds added to a suspect's priority: share x (since - last visit), 0 otherwise;
        the share is its section's (`share_for`).

        Why this: Olston & Pandey's utility U = t·S'(t) - S(t) of a slowly changing page
        that also took a step change with probability q at time B, b = B - (last visit)
        after its last visit, is its Poisson utility plus q·b (to first order in λt). So a
        suspect ranks by its own utility plus the edit's, in the same unit, and the
        pages longest unvisited before the edit go first.
        """
        if last_visit_s is None or not self.suspect(last_visit_s, now_s):  # never visited: no suspect
            return 0.0
        return self.share_for(section) * (self.since_s - float(last_visit_s))


@dataclass(frozen=True)
class BulkState:
    """What the engine keeps per host between passes: the evidence since the last
    detection (within `BULK_WINDOW_S`), and the bulk edit under way, if any."""

    evidence: tuple[PassEvidence, ...] = ()
    edit: BulkEdit | None = None


def update_bulk_state(
    state: BulkState,
    new: PassEvidence | None,
    now_s: float,
    *,
    window_s: float = BULK_WINDOW_S,
    alpha: float = BULK_ALPHA,
    min_changes: int = BULK_MIN_CHANGES,
    hold_s: float = BULK_HOLD_S,
) -> BulkState:
    """The host's state after a pass at `now_s` that gathered `new` (None: no evidence).

    Evidence is the visits that no trusted `lastmod` advance or repair caused and that
    were not to a current edit's suspects (the caller filters; those expect changes).
    Over the passes in the window: with x changed visits of n and m = Σ P(change)
    predicted, a bulk edit is declared when x >= `min_changes` and the one-sided
    P(X >= x) under Poisson(m) is at most `alpha` (`poisson_tail`). Its `since_s` is now,
    so every page not visited in this pass is a suspect (a superset of those last visited
    before the edit began: only the few visited between the edit and now are visited
    needlessly); `share` is the excess (x - m) / n; it lasts `hold_s`. A detection
    consumes its evidence, so the same changes never declare two edits; a new detection
    while one is under way replaces it (its suspects are a superset). An expired edit
    is dropped.
    """
    if not (window_s > 0 and 0 < alpha < 1 and min_changes >= 1 and hold_s > 0):
        raise ValueError("need window_s > 0, 0 < alpha < 1, min_changes >= 1, hold_s > 0")
    evidence = [e for e in state.evidence if 0 <= now_s - e.at_s < window_s and e.at_s != now_s]
    if new is not None and new.visits:
        evidence.append(new)
    edit = state.edit if state.edit is not None and state.edit.active(now_s) else None
    n = sum(e.visits for e in evidence)
    x = sum(e.changes for e in evidence)
    m = math.fsum(e.expected for e in evidence)
    if n and x >= min_changes and x > m and poisson_tail(x, m) <= alpha:
        share = min(1.0, (x - m) / n)
        return BulkState((), BulkEdit(since_s=now_s, until_s=now_s + hold_s, share=share))
    return BulkState(tuple(evidence), edit)


def bulk_state_to_json(state: BulkState) -> dict:
    """A JSON-ready form for the run report (epoch seconds; the evidence as
    `[at_s, visits, changes, expected]` rows)."""
    out: dict = {"evidence": [[e.at_s, e.visits, e.changes, round(e.expected, 6)] for e in state.evidence]}
    if state.edit is not None:
        out.update(since_s=state.edit.since_s, until_s=state.edit.until_s, share=round(state.edit.share, 6),
                   sections={name: [v, c] for name, v, c in state.edit.sections})
    return out


def bulk_state_from_json(d: object) -> BulkState:
    """Inverse of `bulk_state_to_json`; anything unreadable is an empty state (the
    state is a scheduling hint: losing it costs only a slower reaction)."""
    try:
        if not isinstance(d, dict):
            return BulkState()
        evidence = tuple(PassEvidence(float(a), int(v), int(c), float(m)) for a, v, c, m in d.get("evidence", ()))
        edit = None
        if "since_s" in d:
            sections = tuple(sorted((str(name), int(v), int(c)) for name, (v, c) in d.get("sections", {}).items()))
            if any(not 0 <= c <= v for _, v, c in sections):
                raise ValueError("bad section counts")
            edit = BulkEdit(float(d["since_s"]), float(d["until_s"]), float(d["share"]), sections)
            if not (0.0 <= edit.share <= 1.0 and all(map(math.isfinite, (edit.since_s, edit.until_s)))):
                edit = None
        return BulkState(evidence, edit)
    except (TypeError, ValueError, KeyError):
        return BulkState()
