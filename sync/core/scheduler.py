"""Revisit policy: pure functions of the page's history and the pass's clock.

Halve-double: a page's revisit interval halves when its text changed, doubles when
it did not, clamped to [6 h, 60 d]; new pages start at 3 d. Failures retry sooner with
exponential backoff, without touching the learned interval.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = [
    "MIN_INTERVAL",
    "MAX_INTERVAL",
    "NEW_PAGE_INTERVAL",
    "clamp_interval",
    "next_interval",
    "failure_backoff",
    "is_due",
]

MIN_INTERVAL = timedelta(hours=6)
MAX_INTERVAL = timedelta(days=60)
NEW_PAGE_INTERVAL = timedelta(days=3)
_FAILURE_BASE = timedelta(hours=1)
_FAILURE_CAP = timedelta(days=1)


def clamp_interval(interval: timedelta) -> timedelta:
    return max(MIN_INTERVAL, min(MAX_INTERVAL, interval))


def next_interval(current: timedelta | None, changed: bool) -> timedelta:
    """Halve on change, double on no change, clamp; `None` (never visited) starts at 3 d."""
    if current is None:
        return NEW_PAGE_INTERVAL
    return clamp_interval(current / 2 if changed else current * 2)


def failure_backoff(consecutive_failures: int) -> timedelta:
    """Delay before retrying a page that failed `consecutive_failures` times in a row (>= 1).

    1 h, 2 h, 4 h, ... capped at 1 d: transient errors are retried soon, a dead host is
    not hammered.
    """
    n = max(1, consecutive_failures)
    if n > 10:
        return _FAILURE_CAP
    return min(_FAILURE_CAP, _FAILURE_BASE * (2 ** (n - 1)))


def is_due(due_at: datetime | None, now: datetime) -> bool:
    """A page with no due time (never visited) is always due."""
    return due_at is None or due_at <= now
