"""The Poisson change-rate model: a page's change rate from its visit history, and staleness.

The rate is Cho & Garcia-Molina's estimate for irregular revisit intervals (J. Cho,
H. Garcia-Molina, "Estimating frequency of change", ACM TOIT 3(3), 2003), regularised by a
prior so that new pages are not extreme; the staleness figures are Olston & Pandey's for
Poisson pages (C. Olston, S. Pandey, "Recrawl scheduling based on information longevity",
WWW 2008). A change is counted only when the extracted text's hash changed, and not when a
trusted `lastmod` advance announced it (`Visit.announced`): the rate is that of the changes
the feed misses, which only revisits can catch.
"""

from __future__ import annotations

import math
from typing import Sequence

from .history import Visit

__all__ = [
    "estimate_rate",
    "expected_staleness",
    "accrued_staleness",
    "interval_for_staleness",
    "change_probability",
]

_DAY_S = 86400.0
_SERIES_BELOW = 1e-2  # below this λt, closed forms lose digits to cancellation


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


def interval_for_staleness(rate: float, target_s: float) -> float:
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


def change_probability(rate: float, t_s: float) -> float:
    """P(at least one change in t seconds) for a Poisson page of rate λ: 1 - e^(-λt)."""
    _check_rate_t(rate, t_s)
    return -math.expm1(-rate * t_s)
