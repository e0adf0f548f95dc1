"""When a crawl page no complete crawl reaches may leave (`sync.core.unlinked`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.unlinked import CLEAR, CONFIRM_CAP, KEEP, MARK, PURGE, WAIT, purge_reason, unlinked_step

NOW = datetime(2031, 3, 31, 6, tzinfo=timezone.utc)
DAY = timedelta(days=1)
HUB = "https://h/docs/hub.html"

CASES = [
    # reached, complete, since, interval, dropped_by -> action
    (True, True, None, DAY, None, KEEP),
    (True, True, NOW - DAY, DAY, None, CLEAR),
    (True, False, NOW - DAY, DAY, None, CLEAR),
    (False, False, None, DAY, HUB, KEEP),
    (False, False, NOW - 10 * DAY, DAY, None, KEEP),  # an incomplete crawl confirms nothing
    (False, True, None, DAY, HUB, MARK),
    (False, True, NOW - timedelta(hours=1), DAY, None, WAIT),
    (False, True, NOW - DAY, DAY, None, PURGE),
    (False, True, NOW - 3 * DAY, 10 * DAY, None, PURGE),  # the wait is capped
    (False, True, NOW - 2 * DAY, 10 * DAY, None, WAIT),
    (False, True, NOW - 3 * DAY, None, None, PURGE),
    (False, True, NOW + DAY, DAY, None, MARK),  # a mark from a later clock counts from now
]


@pytest.mark.parametrize("reached,complete,since,interval,dropped,action", CASES)
def test_steps(reached, complete, since, interval, dropped, action):
    step = unlinked_step(reached=reached, complete=complete, since=since, by=None, interval=interval, now=NOW,
                         dropped_by=dropped)
    assert step.action == action
    if action == MARK:
        assert step.since == NOW and step.by == dropped


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(0, 96)), max_size=12))
def test_a_purge_needs_two_complete_crawls_a_revisit_interval_apart(passes):
    """Whatever the sequence of crawls, a page is purged only after a complete crawl missed
    it at `since` and a later complete one, at least min(interval, cap) after, still does,
    with no crawl reaching it in between."""
    now, since, by = NOW, None, None
    interval = timedelta(hours=30)
    missed: list[datetime] = []  # complete crawls that missed it since it was last reached
    for reached, complete, hours in passes:
        now += timedelta(hours=hours)
        step = unlinked_step(reached=reached, complete=complete, since=since, by=by, interval=interval, now=now,
                             dropped_by=HUB)
        if reached:
            missed = []
        elif complete:
            missed.append(now)
        if step.action == PURGE:
            assert len(missed) >= 2 and now - missed[0] >= min(interval, CONFIRM_CAP)
            return
        since, by = step.since, step.by


def test_the_reason_names_the_page_and_the_dates():
    text = purge_reason(NOW - DAY, HUB, NOW)
    assert HUB in text and "2031-03-30T06:00:00Z" in text and "2031-03-31T06:00:00Z" in text
    assert "no page the crawl reached links it" in purge_reason(NOW - DAY, None, NOW)
