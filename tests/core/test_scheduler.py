"""Revisit policy: next_interval, failure_backoff, is_due."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.core.scheduler import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    NEW_PAGE_INTERVAL,
    clamp_interval,
    failure_backoff,
    is_due,
    next_interval,
)

H = timedelta(hours=1)
D = timedelta(days=1)


def test_constants_match_the_documented_policy():
    assert MIN_INTERVAL == 6 * H
    assert MAX_INTERVAL == 60 * D
    assert NEW_PAGE_INTERVAL == 3 * D


@pytest.mark.parametrize(
    "current, changed, expected",
    [
        (None, False, 3 * D),  # never visited
        (None, True, 3 * D),
        (3 * D, True, 36 * H),  # halve on change
        (3 * D, False, 6 * D),  # double on no change
        (2 * D, True, 1 * D),
        (2 * D, False, 4 * D),
        (12 * H, True, 6 * H),  # reaches the floor exactly
        (6 * H, True, 6 * H),  # clamped at the floor
        (8 * H, True, 6 * H),  # 4 h -> 6 h
        (6 * H, False, 12 * H),
        (30 * D, False, 60 * D),  # reaches the ceiling exactly
        (60 * D, False, 60 * D),  # clamped at the ceiling
        (45 * D, False, 60 * D),  # 90 d -> 60 d
        (60 * D, True, 30 * D),
        (1 * H, False, 6 * H),  # out-of-range stored values are pulled back in
        (400 * D, True, 60 * D),
        (timedelta(0), False, 6 * H),
    ],
)
def test_next_interval_table(current, changed, expected):
    assert next_interval(current, changed) == expected


def test_repeated_changes_walk_down_to_the_floor_and_stay():
    iv = None
    seen = []
    for _ in range(12):
        iv = next_interval(iv, True)
        seen.append(iv)
    assert seen[0] == 3 * D
    assert seen[1:5] == [36 * H, 18 * H, 9 * H, 6 * H]
    assert all(v == 6 * H for v in seen[4:])


def test_repeated_no_change_walks_up_to_the_ceiling_and_stays():
    iv = None
    for _ in range(20):
        iv = next_interval(iv, False)
    assert iv == 60 * D
    assert next_interval(3 * D, False) == 6 * D
    assert next_interval(24 * D, False) == 48 * D


_intervals = st.one_of(
    st.none(),
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=10_000)),
    st.timedeltas(min_value=-timedelta(days=30), max_value=timedelta(0)),
)


@settings(max_examples=200, deadline=None)
@given(_intervals, st.booleans())
def test_next_interval_always_within_bounds(current, changed):
    nxt = next_interval(current, changed)
    assert MIN_INTERVAL <= nxt <= MAX_INTERVAL


@settings(max_examples=200, deadline=None)
@given(st.timedeltas(min_value=MIN_INTERVAL, max_value=MAX_INTERVAL))
def test_change_never_lengthens_and_no_change_never_shortens(current):
    assert next_interval(current, True) <= current <= next_interval(current, False)
    assert next_interval(current, True) == clamp_interval(current / 2)
    assert next_interval(current, False) == clamp_interval(current * 2)


@pytest.mark.parametrize(
    "n, expected",
    [
        (-3, 1 * H),
        (0, 1 * H),
        (1, 1 * H),
        (2, 2 * H),
        (3, 4 * H),
        (4, 8 * H),
        (5, 16 * H),
        (6, 24 * H),
        (7, 24 * H),
        (10, 24 * H),
        (11, 24 * H),
        (1000, 24 * H),
        (10**9, 24 * H),
    ],
)
def test_failure_backoff_table(n, expected):
    assert failure_backoff(n) == expected


@settings(max_examples=200, deadline=None)
@given(st.integers(-10, 10**6), st.integers(0, 50))
def test_failure_backoff_monotone_and_capped(n, step):
    a, b = failure_backoff(n), failure_backoff(n + step)
    assert a <= b
    assert 1 * H <= a <= 1 * D
    assert 1 * H <= b <= 1 * D


def test_failure_backoff_sequence_is_non_decreasing():
    seq = [failure_backoff(n) for n in range(0, 40)]
    assert seq == sorted(seq)
    assert seq[-1] == 1 * D


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "due_at, expected",
    [
        (None, True),
        (NOW, True),
        (NOW - timedelta(microseconds=1), True),
        (NOW - 30 * D, True),
        (NOW + timedelta(microseconds=1), False),
        (NOW + 6 * H, False),
        # the same instant in another zone
        (datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))), True),
        (datetime(2026, 3, 1, 14, 1, tzinfo=timezone(timedelta(hours=2))), False),
    ],
)
def test_is_due(due_at, expected):
    assert is_due(due_at, NOW) is expected
