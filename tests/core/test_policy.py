"""Scheduling policies: history, change-rate estimate, staleness, intervals, selection,
lastmod trust, and a simulation of both policies on a mixed site."""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import replace
from datetime import timedelta
from functools import lru_cache, cache

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sync.core import scheduler
from sync.errors import ConfigError, StateError
from sync.core.policies import (
    DEFAULT_POLICY,
    POLICIES,
    ChangeRatePolicy,
    HalveDoublePolicy,
    Policy,
    UniformPolicy,
    make_policy,
)
from sync.core.history import HISTORY_LIMIT, Visit, add_visit, history_from_json, history_json_with, history_to_json
from sync.core.visit_selection import Candidate, select_visits
from sync.core.change_rate import accrued_staleness, change_probability, estimate_rate, expected_staleness
from sync.core.lastmod_trust import lastmod_makes_due, lastmod_trust
from sync.core.bulk_edits import (
    BULK_HOLD_S,
    BULK_WINDOW_S,
    BulkEdit,
    BulkState,
    PassEvidence,
    bulk_state_from_json,
    bulk_state_to_json,
    pass_evidence,
    poisson_tail,
    update_bulk_state,
    url_section,
)
from sync.core.scheduler import MAX_INTERVAL, MIN_INTERVAL, NEW_PAGE_INTERVAL

H = 3600.0
D = 86400.0
MAX_S = MAX_INTERVAL.total_seconds()

elapsed = st.floats(min_value=0.0, max_value=400 * D, allow_nan=False, allow_infinity=False)
visits_st = st.builds(Visit, elapsed, st.booleans(), st.booleans())
histories = st.lists(visits_st, max_size=HISTORY_LIMIT)


def poisson_history(rate: float, n: int, rng: random.Random) -> list[Visit]:
    """`n` visits of a Poisson page at irregular intervals (log-uniform in [0.1, 3]/rate)."""
    out = []
    for _ in range(n):
        t = math.exp(rng.uniform(math.log(0.1), math.log(3.0))) / rate
        out.append(Visit(t, rng.random() < -math.expm1(-rate * t)))
    return out


def oracle(rate: float) -> ChangeRatePolicy:
    """The default policy told the true change rate instead of estimating it."""

    class Oracle(ChangeRatePolicy):
        def rate(self, visits):
            return rate

    return Oracle()


# ------------------------------------------------------------------------- history


def test_history_json_is_compact():
    s = history_to_json([Visit(3600.0, True), Visit(7200.5, False)])
    assert s == "[[3600,1],[7200.5,0]]"  # whole seconds (what the engine records) as integers
    assert history_from_json(s) == [Visit(3600.0, True), Visit(7200.5, False)]
    assert [type(v.elapsed_s) for v in history_from_json(s)] == [float, float]
    s = history_to_json([Visit(60.0, True, announced=True), Visit(5.0, False)])
    assert s == "[[60,1,1],[5,0]]"  # the third field only when announced
    assert history_from_json("[[60.0,1,1],[5.0,0]]") == history_from_json(s)  # rows written before
    assert history_from_json(s) == [Visit(60.0, True, True), Visit(5.0, False, False)]
    assert history_from_json("[[60,1,0]]") == [Visit(60.0, True)]


@given(st.lists(visits_st, max_size=200))
def test_history_json_round_trip(visits):
    assert history_from_json(history_to_json(visits)) == visits


@pytest.mark.parametrize("s", [None, "", "[]"])
def test_empty_history(s):
    assert history_from_json(s) == []


@pytest.mark.parametrize(
    "s",
    [
        "nope",
        "{}",
        "[1]",
        "[[1]]",
        "[[1,2]]",
        "[[-1,0]]",
        '[["a",0]]',
        "[[1,0,3]]",
        "[[true,1]]",
        "[[1,0,1,0]]",
        '[[1,0,"1"]]',
        '["ab"]',
        '[{"a":1,"b":0}]',
        "[[NaN,0]]",
        "[[Infinity,0]]",
        "[[1e999,0]]",
        "[[1" + "0" * 400 + ",0]]",
        "[[null,0]]",
        "[[1,null]]",
        "[[1,0.5]]",
    ],
)
def test_corrupt_history_is_a_state_error(s):
    with pytest.raises(StateError):
        history_from_json(s)


whole_visits_st = st.builds(Visit, st.integers(0, 400 * 86400).map(float), st.booleans(), st.booleans())


@settings(max_examples=300)
@given(
    st.lists(st.one_of(whole_visits_st, visits_st), max_size=HISTORY_LIMIT + 5), st.one_of(whole_visits_st, visits_st)
)
def test_history_json_with_is_the_json_of_the_history_with_the_visit(visits, visit):
    """The engine's way to write a visit into a stored history (the stored text extended
    when it is what history_to_json writes) gives history_to_json's string exactly: at the
    limit, past it, with fractions of a second, and from stored texts in other forms."""
    want = history_to_json(add_visit(visits, visit))
    stored = history_to_json(visits)
    assert history_json_with(stored, history_from_json(stored), visit) == want
    # Valid texts history_to_json would not write: floats for whole seconds, a third field
    # of 0, spaces. They read as the same visits and are written again in full.
    other = "[" + ", ".join(f"[{v.elapsed_s!r}, {int(v.changed)}, {int(v.announced)}]" for v in visits) + "]"
    assert history_from_json(other) == visits
    assert history_json_with(other, visits, visit) == want


@pytest.mark.parametrize(
    "stored",
    [
        "[[5,0,0],[7,1]]",  # a third field of 0: history_to_json leaves it out
        "[[12345678901234567891,0]]",  # more digits than a float holds: written back as the float's
        "[[7200.0,1]]",  # whole seconds as a float
        history_to_json([Visit(float(i), i % 3 == 0, i % 5 == 0) for i in range(HISTORY_LIMIT)]),  # at the limit
        history_to_json([Visit(float(i), i % 3 == 0) for i in range(HISTORY_LIMIT + 6)]),  # past it (an older limit)
    ],
)
def test_history_json_with_edges(stored):
    visits, visit = history_from_json(stored), Visit(60.0, True)
    assert history_json_with(stored, visits, visit) == history_to_json(add_visit(visits, visit))


@pytest.mark.parametrize("stored", [None, "", "[]"])
def test_history_json_with_starts_a_history(stored):
    assert history_json_with(stored, [], Visit(60.0, False)) == "[[60,0]]"
    assert history_json_with(stored, [], Visit(60.5, True, True)) == "[[60.5,1,1]]"


def test_history_accepts_json_booleans_and_ints():
    assert history_from_json("[[60,true],[0,false]]") == [Visit(60.0, True), Visit(0.0, False)]


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_visit_rejects_bad_elapsed(bad):
    with pytest.raises(ValueError):
        Visit(bad, False)


def test_add_visit_keeps_the_last_visits_and_copies():
    hist: list[Visit] = []
    for i in range(HISTORY_LIMIT + 10):
        new = add_visit(hist, Visit(float(i), i % 2 == 0))
        assert len(hist) == min(i, HISTORY_LIMIT)  # input untouched
        hist = new
    assert len(hist) == HISTORY_LIMIT
    assert hist[0].elapsed_s == 10.0 and hist[-1].elapsed_s == HISTORY_LIMIT + 9.0
    assert add_visit((), Visit(1.0, True)) == [Visit(1.0, True)]


# ------------------------------------------------------------------- estimate_rate


def test_no_visits_gives_the_prior_rate():
    assert estimate_rate([]) == pytest.approx(0.5 / (7 * D))
    assert estimate_rate([], prior_changes=2, prior_seconds=10) == pytest.approx(0.2)


def test_prior_dominates_a_short_history():
    prior = estimate_rate([])
    assert estimate_rate([Visit(H, False)]) == pytest.approx(prior, rel=0.01)
    assert prior < estimate_rate([Visit(H, True)]) < 3 * prior


@pytest.mark.parametrize(
    "visits",
    [[Visit(D, False)], [Visit(3 * D, False)] * 10, [Visit(60 * D, False)] * 64],
)
def test_nothing_changed_is_closed_form_small_but_positive(visits):
    exposure = sum(v.elapsed_s for v in visits) + 7 * D
    assert estimate_rate(visits) == pytest.approx(0.5 / exposure, rel=1e-12)
    assert estimate_rate(visits) > 0


@pytest.mark.parametrize("t", [6 * H, D, 60 * D])
@pytest.mark.parametrize("n", [1, 10, 64, 500])
def test_everything_changed_is_large_but_finite(t, n):
    rate = estimate_rate([Visit(t, True)] * n)
    assert math.isfinite(rate)
    if n >= 64:  # once the history outweighs the prior: faster than once per interval
        assert rate > 1 / t
    assert estimate_rate([Visit(t, True)] * (n + 1)) > rate


@settings(max_examples=200, deadline=None)
@given(histories)
def test_estimate_solves_the_regularised_equation_within_its_bracket(visits):
    k, big_t = 0.5, 7 * D
    rate = estimate_rate(visits)
    changed = [v.elapsed_s for v in visits if v.changed and not v.announced]
    exposure = sum(v.elapsed_s for v in visits if not v.changed or v.announced) + big_t
    assert k / exposure * (1 - 1e-12) <= rate <= (len(changed) + k) / exposure * (1 + 1e-12)
    # Σ λt/(e^λt - 1) + k = λ·exposure (the documented equation, times λ)
    lhs = sum(rate * t / math.expm1(rate * t) if rate * t > 0 else 1.0 for t in changed) + k
    assert lhs == pytest.approx(rate * exposure, rel=1e-9)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rate", [1 / H, 1 / (6 * H), 1 / D, 1 / (7 * D), 1 / (60 * D)])
def test_recovers_the_true_rate_from_500_irregular_visits(rate, seed):
    """The estimator itself (prior made negligible: 1/1000 of the default's weight)."""
    visits = poisson_history(rate, 500, random.Random(seed))
    est = estimate_rate(visits, prior_changes=0.5e-3, prior_seconds=7e-3 * D)
    assert est == pytest.approx(rate, rel=0.30)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rate", [1 / D, 1 / (7 * D), 1 / (60 * D)])
def test_default_prior_fades_for_pages_slower_than_daily(rate, seed):
    visits = poisson_history(rate, 500, random.Random(seed))
    assert estimate_rate(visits) == pytest.approx(rate, rel=0.30)


@pytest.mark.parametrize("rate", [1 / H, 1 / (6 * H)])
def test_default_prior_holds_fast_pages_low_but_their_interval_barely_moves(rate):
    """The prior is worth 7 days of watching: for a page changing every hour, 500 visits
    at ~1 h hold fewer unchanged seconds than that, so the estimate stays low (about half
    the truth). The interval it leads to is still within 30% of the true rate's."""
    visits = poisson_history(rate, 500, random.Random(4))
    est = estimate_rate(visits)
    assert rate / 3 < est < rate
    got = ChangeRatePolicy().next_interval(visits, None, True)
    truth = oracle(rate).next_interval(visits, None, True)
    assert got / truth == pytest.approx(1.0, rel=0.30)


@settings(max_examples=150, deadline=None)
@given(histories, st.data())
def test_more_changes_never_lower_the_rate(visits, data):
    base = estimate_rate(visits)
    tol = 1 - 1e-9
    unchanged = [i for i, v in enumerate(visits) if not v.changed]
    if unchanged:
        i = data.draw(st.sampled_from(unchanged))
        flipped = [*visits[:i], Visit(visits[i].elapsed_s, True), *visits[i + 1 :]]
        assert estimate_rate(flipped) >= base * tol
    t = data.draw(elapsed)
    assert estimate_rate([*visits, Visit(t, True)]) >= base * tol
    assert estimate_rate([*visits, Visit(t, False)]) <= base / tol


@settings(max_examples=150, deadline=None)
@given(histories, st.lists(st.tuples(st.integers(0, HISTORY_LIMIT), elapsed), max_size=10))
def test_announced_visits_count_as_unchanged_intervals(visits, inserts):
    """A change a trusted lastmod advance announced is the feed's catch: to the rate of
    the changes it misses, an announced visit is an unchanged interval, changed or not."""
    as_unchanged = [Visit(v.elapsed_s, False) if v.announced else v for v in visits]
    assert estimate_rate(visits) == estimate_rate(as_unchanged)
    grown, grown_unchanged = list(visits), list(as_unchanged)
    for i, t in inserts:
        grown.insert(i, Visit(t, True, announced=True))
        grown_unchanged.insert(i, Visit(t, False))
    assert estimate_rate(grown) == estimate_rate(grown_unchanged) <= estimate_rate(visits)


def test_announced_changes_leave_a_page_on_a_long_interval():
    """A page whose every change the feed announced looks like a page that never changed
    to the revisit policy (a long interval, low priority); unannounced, the same changes
    make it a fast page."""
    policy = ChangeRatePolicy()
    announced = [Visit(D, True, announced=True)] * 30
    quiet = policy.next_interval(announced, None, True)
    assert quiet == policy.next_interval([Visit(D, False)] * 30, None, False) and quiet > timedelta(days=5)
    assert policy.next_interval([Visit(D, True)] * 30, None, True) < timedelta(days=1)


def test_more_changes_strictly_raise_the_rate():
    visits = [Visit(D, i < 3) for i in range(20)]
    rates = [estimate_rate([Visit(D, i < c) for i in range(20)]) for c in range(21)]
    assert rates == sorted(rates) and len(set(rates)) == 21
    assert estimate_rate(visits) == rates[3]


@pytest.mark.parametrize("k, t", [(0, D), (-1, D), (0.5, 0), (0.5, -D), (math.inf, D), (0.5, math.nan)])
def test_prior_must_be_positive(k, t):
    with pytest.raises(ValueError):
        estimate_rate([], prior_changes=k, prior_seconds=t)


# --------------------------------------------------------------- staleness formulas


@pytest.mark.parametrize("rate, t", [(1 / D, D), (1 / H, 5 * H), (2e-6, 1e5), (1e-3, 30.0)])
def test_utility_matches_the_closed_form(rate, t):
    direct = 1 / rate - (t + 1 / rate) * math.exp(-rate * t)
    assert expected_staleness(rate, t) == pytest.approx(direct, rel=1e-12)
    assert accrued_staleness(rate, t) == pytest.approx(t - (1 - math.exp(-rate * t)) / rate, rel=1e-12)


@pytest.mark.parametrize("rate, t", [(1 / D, 0.3 * D), (1 / D, D), (1 / D, 4 * D), (1 / H, 20 * H)])
def test_staleness_matches_monte_carlo(rate, t):
    """U = E[τ; τ <= t] and S = E[(t - τ)⁺] for τ ~ Exp(λ), the first change's time."""
    rng = random.Random(11)
    n = 100_000
    taus = [rng.expovariate(rate) for _ in range(n)]
    for f, sample in [
        (expected_staleness, [x if x <= t else 0.0 for x in taus]),
        (accrued_staleness, [t - x if x <= t else 0.0 for x in taus]),
    ]:
        mean = math.fsum(sample) / n
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in sample) / (n - 1))
        assert abs(f(rate, t) - mean) < 4.5 * sd / math.sqrt(n)


@given(
    st.floats(min_value=0, max_value=1e-2, allow_nan=False),
    st.floats(min_value=0, max_value=400 * D, allow_nan=False),
    st.floats(min_value=0, max_value=400 * D, allow_nan=False),
)
def test_utility_is_nonnegative_increasing_and_bounded(rate, t1, t2):
    lo, hi = sorted((t1, t2))
    u_lo, u_hi = expected_staleness(rate, lo), expected_staleness(rate, hi)
    assert 0 <= u_lo <= u_hi * (1 + 1e-12)
    assert u_hi <= hi  # never more than the time elapsed
    if rate > 0:
        assert u_hi <= (1 / rate) * (1 + 1e-12)  # and never more than 1/λ
    s = accrued_staleness(rate, hi)
    assert 0 <= s <= hi
    # U + S = t·P(changed by t)
    assert u_hi + s == pytest.approx(hi * -math.expm1(-rate * hi), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("u", [1e-9, 1e-6, 1e-4, 1e-3, 1e-2, 0.05])
def test_small_rate_times_t_is_quadratic(u):
    rate = 1 / (7 * D)
    t = u / rate
    quad = rate * t * t / 2
    assert expected_staleness(rate, t) / quad == pytest.approx(1 - 2 * u / 3, rel=u, abs=1e-12)
    assert accrued_staleness(rate, t) / quad == pytest.approx(1 - u / 3, rel=u, abs=1e-12)


@pytest.mark.parametrize("f", [expected_staleness, accrued_staleness])
def test_series_and_closed_form_agree_at_the_switch(f):
    rate = 1.0
    below, above = f(rate, 0.01 * (1 - 1e-12)), f(rate, 0.01 * (1 + 1e-12))
    assert below == pytest.approx(above, rel=1e-10)


def test_staleness_edges():
    assert expected_staleness(0.0, 1e9) == 0.0 and accrued_staleness(0.0, 1e9) == 0.0
    assert expected_staleness(1.0, 0.0) == 0.0 and accrued_staleness(1.0, 0.0) == 0.0
    assert expected_staleness(1.0, 1e6) == pytest.approx(1.0)  # -> 1/λ, no overflow
    assert accrued_staleness(1.0, 1e6) == pytest.approx(1e6 - 1)
    for f in (expected_staleness, accrued_staleness):
        for args in [(-1.0, 1.0), (1.0, -1.0), (math.nan, 1.0), (1.0, math.inf)]:
            with pytest.raises(ValueError):
                f(*args)


# ----------------------------------------------------------------- next_interval


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.none(), st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=500))),
    st.booleans(),
)
def test_halve_double_is_the_seed_rule(current, changed):
    p = HalveDoublePolicy()
    assert p.next_interval([], current, changed) == scheduler.next_interval(current, changed)


def test_halve_double_first_visit_and_priority():
    p = HalveDoublePolicy()
    assert p.next_interval([], None, None) == NEW_PAGE_INTERVAL
    assert p.next_interval([], timedelta(days=10), None) == NEW_PAGE_INTERVAL
    assert p.priority([], None) == math.inf
    assert p.priority([Visit(D, True)], 5 * H) == 5 * H
    assert p.priority([], -3.0) == 0.0


def test_change_rate_first_visit_is_three_days():
    assert ChangeRatePolicy().next_interval([], None, None) == NEW_PAGE_INTERVAL


@settings(max_examples=200, deadline=None)
@given(histories, st.one_of(st.none(), st.timedeltas(max_value=timedelta(days=500))), st.booleans())
def test_change_rate_interval_is_clamped_and_hits_the_target(visits, current, changed):
    p = ChangeRatePolicy()
    iv = p.next_interval(visits, current, changed)
    assert MIN_INTERVAL <= iv <= MAX_INTERVAL
    if MIN_INTERVAL < iv < MAX_INTERVAL:  # unclamped: S(λ, T) = target, to the second
        rate = p.rate(visits)
        s = accrued_staleness(rate, iv.total_seconds())
        assert abs(s - p.target_staleness_s) <= rate * 1.0 * iv.total_seconds() + 1e-6


@pytest.mark.parametrize("t", [6 * H, D, 7 * D])
def test_faster_changing_pages_get_shorter_intervals(t):
    p = ChangeRatePolicy()
    ivs = [p.next_interval([Visit(t, i < c) for i in range(40)], None, True) for c in range(41)]
    assert ivs == sorted(ivs, reverse=True)
    assert ivs[0] > ivs[-1]


@given(st.floats(min_value=1e-12, max_value=1e-2), st.floats(min_value=1e-12, max_value=1e-2))
def test_interval_decreases_with_the_rate(r1, r2):
    slow, fast = sorted((r1, r2))
    assert oracle(slow).next_interval([], None, False) >= oracle(fast).next_interval([], None, False)


def test_change_rate_interval_examples():
    """With the default 6 h target: T ≈ sqrt(2·target/λ) while λT is small."""
    p = ChangeRatePolicy()

    def iv(rate):
        return oracle(rate).next_interval([], None, False)

    # fast pages: T ≈ target + 1/λ, so with the 6 h target they sit just above the floor
    assert iv(1 / H).total_seconds() == pytest.approx(7 * H, rel=0.01)
    assert iv(1 / 60).total_seconds() == pytest.approx(6 * H + 60, abs=1)
    assert oracle(1 / H).next_interval([], None, False) >= MIN_INTERVAL
    assert ChangeRatePolicy(target_staleness_s=H).next_interval([Visit(H, True)] * 64, None, True) == MIN_INTERVAL
    assert iv(1e-15) == MAX_INTERVAL
    weekly = iv(1 / (7 * D)).total_seconds()
    assert weekly / D == pytest.approx(math.sqrt(2 * 0.25 * 7), rel=0.12)
    # a page never seen to change: interval grows with its unchanged history
    hist: list = []
    seen = []
    for _ in range(30):
        i = p.next_interval(hist, None, False)
        seen.append(i)
        hist = add_visit(hist, Visit(i.total_seconds(), False))
    assert seen == sorted(seen) and seen[-1] > 4 * seen[0]


def test_change_rate_priority_is_the_utility():
    p = ChangeRatePolicy()
    visits = [Visit(D, True), Visit(2 * D, False)]
    assert p.priority(visits, None) == math.inf
    assert p.priority(visits, 3 * D) == expected_staleness(estimate_rate(visits), 3 * D)
    assert p.priority(visits, -5.0) == 0.0


# -- under a trusted lastmod feed ------------------------------------------------------------


def test_under_feed_scales_only_the_change_rate_prior():
    base = ChangeRatePolicy()
    fed = base.under_feed(0.9)
    assert fed.prior_changes == pytest.approx(0.05) and fed.prior_seconds == base.prior_seconds
    assert fed.target_staleness_s == base.target_staleness_s and fed.name == "change-rate"
    assert fed.rate([]) == pytest.approx(base.rate([]) / 10)
    assert base.under_feed(0.0) == base
    # Policies that learn nothing are the same policy under a feed.
    for p in (HalveDoublePolicy(), UniformPolicy(), UniformPolicy(6 * H)):
        assert p.under_feed(0.9) is p


@pytest.mark.parametrize("trust", [-0.1, 1.0, 1.5, math.nan])
def test_under_feed_rejects_a_trust_outside_0_1(trust):
    with pytest.raises(ValueError):
        ChangeRatePolicy().under_feed(trust)


def test_a_quiet_page_under_a_trusted_feed_waits_longer_but_not_past_the_ceiling():
    """Table: two unchanged visits 3 d apart. The feed's trust sets how much of the
    prior's pull remains (host_lastmod_trust: 2/3 with no record, 0.95 after 36 of 37
    advances confirmed)."""
    hist = [Visit(3 * D, False), Visit(3 * D, False)]
    days = {
        t: ChangeRatePolicy().under_feed(t).next_interval(hist, None, False) / timedelta(days=1)
        for t in (0.0, 2 / 3, 0.95, 0.999)
    }
    assert days[0.0] == pytest.approx(ChangeRatePolicy().next_interval(hist, None, False) / timedelta(days=1))
    assert days[0.0] < days[2 / 3] < days[0.95] < days[0.999] <= 60
    assert 3 < days[0.0] < 4.5 and 13 < days[0.95] < 30


@given(histories, st.floats(min_value=0.0, max_value=0.999), st.booleans())
def test_a_feed_never_raises_a_rate_or_shortens_an_interval(visits, trust, changed):
    base, fed = ChangeRatePolicy(), ChangeRatePolicy().under_feed(trust)
    assert fed.rate(visits) <= base.rate(visits) * (1 + 1e-9)
    assert fed.next_interval(visits, None, changed) >= base.next_interval(visits, None, changed) - timedelta(seconds=1)


def test_a_missed_change_counts_in_full_under_a_feed():
    """A change the feed did not announce, found by a revisit, raises the page's rate
    far above the feed's prior: such a page earns short intervals back from its data."""
    fed = ChangeRatePolicy().under_feed(0.95)
    quiet = [Visit(3 * D, False)] * 3
    missed = [*quiet, Visit(3 * D, True)]
    announced = [*quiet, Visit(3 * D, True, announced=True)]
    assert fed.rate(missed) > 20 * fed.rate(quiet)
    assert fed.rate(announced) < fed.rate(quiet)
    assert fed.next_interval(missed, None, True) < fed.next_interval(announced, None, True) / 3


def test_select_visits_scores_a_candidate_by_its_own_policy():
    """Two due pages with the same history and wait: one a trusted feed covers (its
    weaker prior, a lower utility) goes after the one nobody announces changes for."""
    hist = (Visit(3 * D, False),)
    base = ChangeRatePolicy()
    fed = Candidate("https://a/fed", hist, 5 * D, due=True, forced=False, policy=base.under_feed(0.9))
    plain = Candidate("https://a/plain", hist, 5 * D, due=True, forced=False)
    assert select_visits([fed, plain], base, 1) == ["https://a/plain"]
    assert select_visits([fed, plain], base, None) == ["https://a/plain", "https://a/fed"]
    # Without its own policy, the tie is broken by URL.
    assert select_visits([replace(fed, policy=None), plain], base, 1) == ["https://a/fed"]


def test_change_rate_rejects_bad_parameters():
    with pytest.raises(ValueError):
        ChangeRatePolicy(target_staleness_s=0)
    with pytest.raises(ValueError):
        ChangeRatePolicy(prior_seconds=0)


def test_registry():
    assert set(POLICIES) == {"deploys", "change-rate", "halve-double", "uniform"}
    assert DEFAULT_POLICY == "deploys"
    for name, cls in POLICIES.items():
        p = make_policy(name)
        assert isinstance(p, cls) and p.name == name and isinstance(p, Policy)
    with pytest.raises(ConfigError, match="halve-double"):
        make_policy("round-robin")


@pytest.mark.parametrize("interval", [timedelta(hours=6), timedelta(hours=12), timedelta(days=60)])
def test_make_policy_gives_uniform_its_interval(interval):
    p = make_policy("uniform", interval=interval)
    assert isinstance(p, UniformPolicy) and p.next_interval([], None, None) == interval


@pytest.mark.parametrize(
    "name,interval,match",
    [
        ("change-rate", timedelta(days=1), "uniform only"),  # would be silently ignored
        ("halve-double", timedelta(days=1), "uniform only"),
        ("uniform", timedelta(hours=5), r"5 h is outside \[6 h, 60 d\]"),  # below the 6 h floor
        ("uniform", timedelta(days=61), "outside"),
        ("uniform", timedelta(0), "outside"),
    ],
)
def test_make_policy_refuses_an_interval_it_cannot_honour(name, interval, match):
    with pytest.raises(ConfigError, match=match):
        make_policy(name, interval=interval)


# ----------------------------------------------------------------- select_visits


@st.composite
def candidate_sets(draw):
    n = draw(st.integers(0, 30))
    out = []
    for i in range(n):
        since = draw(st.one_of(st.none(), st.floats(0, 90 * D), st.just(MAX_S)))
        out.append(
            Candidate(
                url=f"https://ex.test/p{i:02d}",
                visits=tuple(draw(st.lists(visits_st, max_size=5))),
                since_last_visit_s=since,
                due=draw(st.booleans()),
                forced=draw(st.booleans()) if draw(st.integers(0, 4)) == 0 else False,
                repair=draw(st.booleans()) if draw(st.integers(0, 5)) == 0 else False,
            )
        )
    return out


policies = st.sampled_from([HalveDoublePolicy(), ChangeRatePolicy()])


def _tiers(cands):
    """(repairs, new, forced, starved, due) as `select_visits` documents them."""
    repairs = sorted(c.url for c in cands if c.repair)
    rest = [c for c in cands if not c.repair]
    new = sorted(c.url for c in rest if c.since_last_visit_s is None)
    known = [c for c in rest if c.since_last_visit_s is not None]
    forced = sorted(c.url for c in known if c.forced)
    starved = {c.url for c in known if not c.forced and c.due and c.since_last_visit_s >= MAX_S}
    due = {c.url for c in known if not c.forced and c.due} - starved
    return repairs, new, forced, starved, due


@settings(max_examples=150, deadline=None)
@given(candidate_sets(), policies, st.one_of(st.none(), st.integers(0, 35)), st.randoms())
def test_selection_rules(cands, policy, budget, rnd):
    got = select_visits(cands, policy, budget)
    by_url = {c.url: c for c in cands}
    assert len(got) == len(set(got)) and set(got) <= set(by_url)
    repairs, new, forced, starved, due = _tiers(cands)
    cap = math.inf if budget is None else budget

    # repairs lead, all of them, whatever the budget
    assert got[: len(repairs)] == repairs
    # then the new pages, by URL: as many as the budget leaves, the forced ones always
    r = len(repairs)
    new_got = [u for u in got if u in set(new)]
    assert got[r : r + len(new_got)] == new_got == sorted(new_got)
    assert {u for u in new if by_url[u].forced} <= set(new_got)
    for u in set(new) - set(new_got):  # a cut new page: the repairs and new pages before it filled the budget
        assert r + sum(1 for v in new_got if v < u) >= cap
    # then every forced known page by URL, then every starved page: never dropped
    k = r + len(new_got)
    assert got[k : k + len(forced)] == forced
    m = k + len(forced)
    assert set(got[m : m + len(starved)]) == starved
    # then due pages by priority, filling what is left of the budget
    chosen = got[m + len(starved) :]
    assert set(chosen) <= due
    assert len(got) == max(m + len(starved), min(cap, m + len(starved) + len(due)))
    pri = {u: policy.priority(by_url[u].visits, by_url[u].since_last_visit_s) for u in due}
    assert all(pri[a] >= pri[b] for a, b in zip(chosen, chosen[1:]))
    if chosen:
        assert max((pri[u] for u in due - set(chosen)), default=-math.inf) <= pri[chosen[-1]]
    # deterministic whatever the input order
    shuffled = list(cands)
    rnd.shuffle(shuffled)
    assert select_visits(shuffled, policy, budget) == got


@settings(max_examples=200, deadline=None)
@given(candidate_sets(), policies, st.one_of(st.none(), st.integers(0, 35)))
def test_new_pages_are_never_cut_for_a_known_page(cands, policy, budget):
    """In any selection: while a new page is cut, the budget holds only repairs and new
    pages (forced and starved pages may still go, past it) and no ordinary due page is
    chosen; repairs, forced and starved pages are always chosen; only they take the pass
    past the budget."""
    got = select_visits(cands, policy, budget)
    repairs, new, forced, starved, due = _tiers(cands)
    chosen = set(got)
    if set(new) - chosen:
        assert all(u in set(repairs) | set(new) for u in got[:budget])
        assert not (chosen & due)
    assert set(repairs) | set(forced) | starved <= chosen
    assert {c.url for c in cands if c.forced and not c.repair} <= chosen
    if budget is not None:
        # a page that may not exceed the budget (unforced new, due) is chosen only within it
        by_url = {c.url: c for c in cands}
        capped = {u for u in new if not by_url[u].forced} | due
        assert all(i < budget for i, u in enumerate(got) if u in capped)


def c(url, since, *, due=True, forced=False, repair=False, visits=()):
    return Candidate(url, tuple(visits), since, due, forced, repair)


def test_selection_example():
    cands = [
        c("due-old", 10 * D),
        c("due-young", 1 * D),
        c("not-due", 30 * D, due=False),
        c("new-b", None, due=False),
        c("new-a", None),
        c("forced", 1.0, due=False, forced=True),
        c("repair", 2 * D, due=False, repair=True),
        c("starved", MAX_S + 1),
        c("backing-off", MAX_S + 1, due=False),  # failing page past 60 d: its backoff wins
    ]
    p = HalveDoublePolicy()
    order = ["repair", "new-a", "new-b", "forced", "starved", "due-old", "due-young"]
    assert select_visits(cands, p, None) == order
    # the budget counts every visit; repairs, forced and starved pages may exceed it
    assert select_visits(cands, p, 6) == order[:6]
    assert select_visits(cands, p, 5) == order[:5]
    assert select_visits(cands, p, 4) == order[:5]
    assert select_visits(cands, p, 3) == order[:5]  # new pages fill the budget first
    assert select_visits(cands, p, 2) == ["repair", "new-a", "forced", "starved"]  # new-b waits
    assert select_visits(cands, p, 1) == ["repair", "forced", "starved"]
    assert select_visits(cands, p, 0) == ["repair", "forced", "starved"]  # never dropped
    assert select_visits([], p, 3) == []


@pytest.mark.parametrize(
    "cands, budget, expected",
    [
        # a lastmod-forced page no longer takes a new page's place
        ([c("lm", 1 * D, forced=True), c("new", None)], 1, ["new", "lm"]),
        # repairs are never postponed, even for new pages
        ([c("rep", 1 * D, repair=True), c("new", None)], 1, ["rep"]),
        ([c("rep", 1 * D, repair=True), c("new", None)], 2, ["rep", "new"]),
        # a repair of a page never visited (its first write failed) is a repair, not a new page
        ([c("rep-new", None, repair=True), c("new", None)], 1, ["rep-new"]),
        # --full on a page never visited: new, never cut
        ([c("new-b", None, forced=True), c("new-a", None)], 1, ["new-a", "new-b"]),
        # starved pages go after new pages, even past the budget
        ([c("old", MAX_S + 5), c("new", None)], 1, ["new", "old"]),
        ([c("old", MAX_S + 5), c("due", 5 * D)], 1, ["old"]),
        # due pages only in what is left
        ([c("due", 5 * D), c("lm", 1.0, forced=True)], 1, ["lm"]),
        ([c("due", 5 * D), c("lm", 1.0, forced=True)], 2, ["lm", "due"]),
    ],
)
def test_selection_table(cands, budget, expected):
    assert select_visits(cands, HalveDoublePolicy(), budget) == expected


def test_selection_prefers_what_saves_most_staleness():
    """Three days after their last visits: a page seen changing about weekly goes first;
    one seen changing at every 6 h visit comes next, its utility capped near 1/λ (it is
    stale again soon whatever we do); a page never seen changing comes last."""
    weekly = [Visit(2 * D, i % 3 == 0) for i in range(30)]
    static = [Visit(7 * D, False)] * 30
    hourly = [Visit(6 * H, True)] * 30
    cands = [c("static", 3 * D, visits=static), c("weekly", 3 * D, visits=weekly), c("hourly", 3 * D, visits=hourly)]
    assert select_visits(cands, ChangeRatePolicy(), None) == ["weekly", "hourly", "static"]
    assert select_visits(cands, ChangeRatePolicy(), 1) == ["weekly"]
    # halve-double cannot tell them apart: ties go by URL
    assert select_visits(cands, HalveDoublePolicy(), None) == ["hourly", "static", "weekly"]


def test_selection_rejects_bad_input():
    with pytest.raises(ValueError):
        select_visits([c("a", 1.0), c("a", 2.0)], HalveDoublePolicy(), None)
    with pytest.raises(ValueError):
        select_visits([], HalveDoublePolicy(), -1)


# ------------------------------------------------------------------- lastmod trust


def test_lastmod_trust_examples():
    assert lastmod_trust(0, 0) == 0.5 and not lastmod_makes_due(0.5)  # must be earned
    assert lastmod_trust(1, 1) == pytest.approx(2 / 3) and lastmod_makes_due(2 / 3)
    assert lastmod_trust(0, 1) == pytest.approx(1 / 3) and not lastmod_makes_due(1 / 3)
    assert lastmod_trust(0, 100) < 0.01 and lastmod_trust(100, 100) > 0.99
    assert lastmod_trust(3, 4, prior_confirmed=0, prior_advances=1) == 0.6
    assert lastmod_makes_due(0.6, threshold=0.7) is False


@given(st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 100))
def test_lastmod_trust_bounds_and_monotonicity(a, b, extra):
    confirmed, advances = sorted((a, b))
    trust = lastmod_trust(confirmed, advances)
    assert 0 < trust < 1
    assert lastmod_trust(confirmed + extra, advances + extra) >= trust  # confirmed advances
    assert lastmod_trust(confirmed, advances + extra) <= trust  # unconfirmed advances


@pytest.mark.parametrize(
    "args, kw",
    [
        ((2, 1), {}),
        ((-1, 1), {}),
        ((0, 0), {"prior_confirmed": 3, "prior_advances": 2}),
        ((0, 0), {"prior_advances": 0, "prior_confirmed": 0}),
    ],
)
def test_lastmod_trust_rejects_bad_counts(args, kw):
    with pytest.raises(ValueError):
        lastmod_trust(*args, **kw)


# -------------------------------------------------------------------- simulation


@cache
def _cached_rate(visits: tuple[Visit, ...]) -> float:
    return estimate_rate(visits)


class _CachedChangeRate(ChangeRatePolicy):
    """The default policy, memoising the estimate per history (the simulation asks for
    the same page's priority every pass)."""

    def rate(self, visits):
        return _cached_rate(tuple(visits))


def simulate(policy: Policy, budget: int | None, *, days: int = 180, seed: int = 7) -> dict:
    """A site of 100 pages (80 never change, 15 change weekly, 5 hourly), Poisson
    changes, a pass every 6 h for `days`, at most `budget` fetches a pass.

    Returns the time-averaged share of pages whose index is stale (a page is stale from
    its first change after a visit until the next visit; before its first visit it is
    not indexed, which counts as stale), per class too, and the fetches made.
    """
    rng = random.Random(seed)
    horizon, step = days * D, 6 * H
    classes = [("static", 0.0, 80), ("weekly", 1 / (7 * D), 15), ("hourly", 1 / H, 5)]
    kinds = [name for name, _, n in classes for _ in range(n)]
    changes = []
    for _, rate, n in classes:
        for _ in range(n):
            ts, t = [], 0.0
            while rate > 0 and (t := t + rng.expovariate(rate)) <= horizon:
                ts.append(t)
            changes.append(ts)
    n = len(changes)
    last: list[float | None] = [None] * n
    due_at = [0.0] * n
    interval: list[timedelta | None] = [None] * n
    hist: list[tuple[Visit, ...]] = [()] * n
    stale = [0.0] * n
    fetches = 0

    def first_change_after(i: int, t: float) -> float:
        j = bisect.bisect_right(changes[i], t)
        return changes[i][j] if j < len(changes[i]) else math.inf

    now = 0.0
    while now < horizon:
        cands = [
            Candidate(f"p{i:03d}", hist[i], None if last[i] is None else now - last[i], now >= due_at[i], False)
            for i in range(n)
        ]
        for url in select_visits(cands, policy, budget):
            i = int(url[1:])
            fetches += 1
            prev = last[i]
            if prev is None:
                stale[i] += now
                changed = None
            else:
                first = first_change_after(i, prev)
                changed = first <= now
                stale[i] += now - first if changed else 0.0
                hist[i] = tuple(add_visit(hist[i], Visit(now - prev, changed)))
            interval[i] = policy.next_interval(hist[i], interval[i], changed)
            last[i], due_at[i] = now, now + interval[i].total_seconds()
        now += step
    for i in range(n):
        prev = last[i]
        stale[i] += horizon if prev is None else max(0.0, horizon - first_change_after(i, prev))
    share = [s / horizon for s in stale]
    out: dict = {"stale": sum(share) / n, "fetches": fetches}
    for name, _, _ in classes:
        xs = [s for s, k in zip(share, kinds) if k == name]
        out[name] = sum(xs) / len(xs)
    return out


def test_change_rate_is_less_stale_than_halve_double_at_equal_budgets():
    """Same fetch budget a pass, both spending all of it: the learned policy moves fetches
    from hourly pages (stale again within the hour whatever we do) to weekly ones."""
    for budget in (3, 4):
        hd = simulate(HalveDoublePolicy(), budget)
        cr = simulate(_CachedChangeRate(), budget)
        assert budget * 720 >= cr["fetches"] >= 0.99 * budget * 720  # both spend it all
        assert budget * 720 >= hd["fetches"] >= 0.99 * budget * 720
        assert cr["stale"] < 0.85 * hd["stale"]
        assert cr["weekly"] < 0.7 * hd["weekly"]

    # And uncapped halve-double vs change-rate capped below its fetch count.
    hd = simulate(HalveDoublePolicy(), None)
    cr = simulate(_CachedChangeRate(), 6)
    assert cr["fetches"] <= hd["fetches"]
    assert cr["stale"] < 0.8 * hd["stale"]


# ------------------------------------------------------------------------- uniform


@settings(max_examples=100, deadline=None)
@given(
    histories, st.one_of(st.none(), st.timedeltas(max_value=timedelta(days=500))), st.one_of(st.none(), st.booleans())
)
def test_uniform_interval_ignores_history_and_changes(visits, current, changed):
    assert UniformPolicy().next_interval(visits, current, changed) == timedelta(days=3)
    assert UniformPolicy(interval_s=D).next_interval(visits, current, changed) == timedelta(days=1)


def test_uniform_priority_is_waiting_time_and_interval_is_checked():
    p = make_policy("uniform")
    assert isinstance(p, UniformPolicy) and isinstance(p, Policy)
    assert p.priority([], None) == math.inf
    assert p.priority([Visit(H, True)] * 10, 5 * H) == p.priority([], 5 * H) == 5 * H
    assert p.priority([], -3.0) == 0.0
    cands = [Candidate(f"u{i}", (), since, True, False) for i, since in enumerate([D, 3 * D, 2 * D])]
    assert select_visits(cands, p, 2) == ["u1", "u2"]
    for bad in (H, 61 * D, math.nan, math.inf):
        with pytest.raises(ValueError):
            UniformPolicy(interval_s=bad)


def test_change_rate_is_less_stale_than_uniform_at_equal_budgets():
    """Same per-pass budget, both spending it all: uniform spreads it evenly, change-rate
    moves it to the pages whose visit saves the most staleness."""
    un = simulate(UniformPolicy(interval_s=6 * H), 4)
    cr = simulate(_CachedChangeRate(), 4)
    assert 4 * 720 >= un["fetches"] >= 0.99 * 4 * 720
    assert cr["stale"] < 0.85 * un["stale"]


# ---------------------------------------------------------------------- bulk edits


@pytest.mark.parametrize(
    "k, mu, expected",
    [
        (0, 3.0, 1.0),
        (-1, 3.0, 1.0),
        (1, 0.0, 0.0),
        (0, 0.0, 1.0),
        (1, 0.5, 1 - math.exp(-0.5)),
        (2, 0.5, 1 - math.exp(-0.5) * 1.5),
        (3, 0.5, 1 - math.exp(-0.5) * (1 + 0.5 + 0.125)),
        (3, 10.0, 1 - math.exp(-10) * (1 + 10 + 50)),
        (
            50,
            1.0,
            math.exp(-1)
            / math.factorial(50)
            * (1 + 1 / 51 + 1 / (51 * 52) + 1 / (51 * 52 * 53) + 1 / (51 * 52 * 53 * 54)),
        ),  # far tail
    ],
)
def test_poisson_tail_examples(k, mu, expected):
    assert poisson_tail(k, mu) == pytest.approx(expected, rel=1e-7, abs=1e-300)


@given(st.integers(0, 60), st.floats(0, 40))
def test_poisson_tail_is_the_pmf_sum(k, mu):
    pmf = [math.exp(-mu + i * math.log(mu) - math.lgamma(i + 1)) if mu > 0 else float(i == 0) for i in range(k)]
    assert poisson_tail(k, mu) == pytest.approx(max(0.0, 1 - math.fsum(pmf)), abs=1e-12)
    assert 0.0 <= poisson_tail(k, mu) <= 1.0
    assert poisson_tail(k + 1, mu) <= poisson_tail(k, mu)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 0.6), min_size=1, max_size=40), st.data())
def test_poisson_tail_is_conservative_for_the_exact_law(ps, data):
    """Above mean + 1, the Poisson tail is at least the exact Poisson-binomial one, so the
    test declares a bulk edit no more often than it would with the exact law."""
    mu = math.fsum(ps)
    k = data.draw(st.integers(math.ceil(mu + 1), len(ps) + 1))
    dist = [1.0]  # exact law of the number of changes, by convolution
    for p in ps:
        dist = [a * (1 - p) + b * p for a, b in zip(dist + [0.0], [0.0] + dist)]
    exact = math.fsum(dist[k:])
    assert poisson_tail(k, mu) >= exact - 1e-12


def test_change_probability():
    assert change_probability(0.0, 5.0) == 0.0
    assert change_probability(1 / D, D) == pytest.approx(1 - math.exp(-1))
    with pytest.raises(ValueError):
        change_probability(-1.0, 1.0)


def ev(at_d, visits, changes, expected):
    return PassEvidence(at_d * D, visits, changes, expected)


@pytest.mark.parametrize(
    "before, new, now_d, detected, share",
    [
        # changes as the rates predict: nothing
        ((), ev(10, 10, 1, 1.0), 10, False, None),
        # a pass finding 4 of 10 pages changed where 0.5 were expected: P(X >= 4) = 0.0018
        ((), ev(10, 10, 4, 0.5), 10, True, 0.35),
        # the same over two passes of one window
        ((ev(9.75, 5, 2, 0.25),), ev(10, 5, 2, 0.25), 10, True, 0.35),
        # ... but not when the first pass left the window
        ((ev(7.9, 5, 2, 0.25),), ev(10, 5, 2, 0.25), 10, False, None),
        # too few changes, however unlikely: 2 of 2 with 0.01 expected
        ((), ev(10, 2, 2, 0.01), 10, False, None),
        # many changes but as many expected (hot pages)
        ((), ev(10, 20, 12, 11.0), 10, False, None),
        # 3 changes where 1.3 were expected: p = 0.14, not a bulk edit
        ((), ev(10, 10, 3, 1.3), 10, False, None),
    ],
)
def test_bulk_detection_table(before, new, now_d, detected, share):
    got = update_bulk_state(BulkState(tuple(before)), new, now_d * D)
    if detected:
        assert got.edit == BulkEdit(now_d * D, now_d * D + BULK_HOLD_S, pytest.approx(share))
        assert got.evidence == ()  # consumed
    else:
        assert got.edit is None
        assert got.evidence == tuple(e for e in (*before, new) if now_d * D - e.at_s < BULK_WINDOW_S)


def test_bulk_edit_lasts_its_hold_then_is_dropped():
    st0 = update_bulk_state(BulkState(), ev(10, 10, 5, 0.5), 10 * D)
    edit = st0.edit
    end = 10 * D + BULK_HOLD_S
    assert edit is not None and edit.active(10 * D) and edit.active(end - 1) and not edit.active(end)
    quiet = ev(12, 5, 0, 0.5)
    st1 = update_bulk_state(st0, quiet, 12 * D)
    assert st1.edit == edit and st1.evidence == (quiet,)  # carried on, evidence kept
    assert update_bulk_state(st1, None, end).edit is None
    # a new detection while one is under way replaces it: later start, longer hold
    st2 = update_bulk_state(st1, ev(13, 10, 6, 0.5), 13 * D)
    assert st2.edit.since_s == 13 * D and st2.edit.until_s == 13 * D + BULK_HOLD_S and st2.evidence == ()


def test_bulk_edit_suspects_and_bonus():
    e = BulkEdit(since_s=10 * D, until_s=17 * D, share=0.3)
    assert e.suspect(2 * D, 11 * D) and e.bonus(2 * D, 11 * D) == pytest.approx(0.3 * 8 * D)
    assert not e.suspect(10 * D, 11 * D) and e.bonus(10 * D, 11 * D) == 0.0  # seen at detection
    assert not e.suspect(None, 11 * D) and e.bonus(None, 11 * D) == 0.0  # new pages are new pages
    assert not e.suspect(2 * D, 17 * D) and e.bonus(2 * D, 17 * D) == 0.0  # over


@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), max_size=50), st.floats(0, 1e9))
def test_pass_evidence_counts(obs, at):
    e = pass_evidence(at, obs)
    assert (e.at_s, e.visits, e.changes) == (at, len(obs), sum(ch for _, ch in obs))
    assert e.expected == pytest.approx(math.fsum(p for p, _ in obs))


evidence_st = st.builds(
    lambda at, n, frac, exp: PassEvidence(at * H, n, round(n * frac), n * exp),
    st.integers(0, 24 * 30),
    st.integers(0, 30),
    st.floats(0, 1),
    st.floats(0, 1),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(evidence_st, max_size=12), st.integers(0, 24 * 30))
def test_bulk_state_properties(evidence, now_h):
    state = BulkState()
    for e in sorted(evidence, key=lambda e: e.at_s):
        state = update_bulk_state(state, e, e.at_s)
        assert all(0 <= e.at_s - x.at_s < BULK_WINDOW_S for x in state.evidence)
        if state.edit is not None:
            assert 0 < state.edit.share <= 1 and state.edit.until_s - state.edit.since_s == BULK_HOLD_S
        # no more changes than the rates predict never declares an edit
        if sum(x.changes for x in state.evidence) <= math.fsum(x.expected for x in state.evidence):
            assert update_bulk_state(state, None, e.at_s + 1e-3).edit == (
                state.edit if state.edit is not None and state.edit.active(e.at_s) else None
            )
    assert bulk_state_from_json(bulk_state_to_json(state)) == BulkState(
        tuple(PassEvidence(x.at_s, x.visits, x.changes, round(x.expected, 6)) for x in state.evidence),
        None
        if state.edit is None
        else BulkEdit(state.edit.since_s, state.edit.until_s, round(state.edit.share, 6), state.edit.sections),
    )


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        "x",
        {"evidence": "nope"},
        {"evidence": [[1, 2]]},
        {"evidence": [], "since_s": 1.0},
        {"since_s": 1, "until_s": 2, "share": 7},
    ],
)
def test_unreadable_bulk_state_is_empty(raw):
    got = bulk_state_from_json(raw)
    assert got.edit is None and (got.evidence == () or raw == {"since_s": 1, "until_s": 2, "share": 7})


def test_selection_adds_the_bonus_to_the_priority():
    cands = [
        c("plain", 5 * D),
        c(
            "suspect",
            4 * D,
        ),
        c("hot", 1 * D),
    ]
    p = HalveDoublePolicy()  # priority = seconds since the last visit
    assert select_visits(cands, p, 1) == ["plain"]
    boosted = [c("plain", 5 * D), Candidate("suspect", (), 4 * D, True, False, bonus_s=2 * D), c("hot", 1 * D)]
    assert select_visits(boosted, p, 1) == ["suspect"]
    assert select_visits(boosted, p, None) == ["suspect", "plain", "hot"]


@pytest.mark.parametrize(
    "url, section",
    [
        ("https://d.test/tutorial/body/", "tutorial"),
        ("https://d.test/tutorial/body/nested/deeper.html", "tutorial"),
        ("https://d.test/tutorial/", ""),  # a section's own index sits at the top level
        ("https://d.test/features/", ""),
        ("https://d.test/index.html", ""),
        ("https://d.test/", ""),
        ("https://d.test", ""),
        ("https://d.test/a/b?x=/c/d#e/f", "a"),
    ],
)
def test_url_section(url, section):
    assert url_section(url) == section


def test_bulk_edit_learns_its_share_per_section():
    e = BulkEdit(since_s=10 * D, until_s=17 * D, share=0.3)
    assert e.share_for("tutorial") == 0.3
    e2 = e.with_visits(
        [
            ("tutorial", True),
            ("tutorial", True),
            ("reference", False),
            ("reference", False),
            ("reference", False),
            ("tutorial", False),
        ]
    )
    assert e2.sections == (("reference", 3, 0), ("tutorial", 3, 2))
    assert e2.share_for("tutorial") == pytest.approx((2 + 2 * 0.3) / (3 + 2))
    assert e2.share_for("reference") == pytest.approx((0 + 2 * 0.3) / (3 + 2))
    assert e2.share_for("other") == 0.3
    assert e2.bonus(2 * D, 11 * D, "tutorial") > e2.bonus(2 * D, 11 * D, "other") > e2.bonus(2 * D, 11 * D, "reference")
    assert e2.with_visits([("reference", True)]).sections == (("reference", 4, 1), ("tutorial", 3, 2))
    state = BulkState((), e2)
    assert bulk_state_from_json(bulk_state_to_json(state)) == state


@given(st.lists(st.tuples(st.sampled_from(["", "a", "b"]), st.booleans()), max_size=40), st.floats(0, 1))
def test_section_shares_stay_probabilities(seen, share):
    e = BulkEdit(0.0, D, share).with_visits(seen)
    for name in ("", "a", "b", "c"):
        assert 0.0 <= e.share_for(name) <= 1.0
    assert sum(v for _, v, _ in e.sections) == len(seen)
