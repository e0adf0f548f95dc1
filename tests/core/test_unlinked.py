"""When a crawl page no crawl reaches may leave (`sync.core.unlinked`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.unlinked import (
    BOUNDED,
    BOUNDED_MISSES,
    CLEAR,
    COMPLETE,
    CONFIRM_CAP,
    INCOMPLETE,
    KEEP,
    MARK,
    PURGE,
    WAIT,
    purge_reason,
    unlinked_step,
)

NOW = datetime(2031, 3, 31, 6, tzinfo=timezone.utc)
DAY = timedelta(days=1)
HUB = "https://h/docs/hub.html"

CASES = [
    # reached, crawl, since, misses, interval, dropped_by, behind_cut -> action, misses after
    (True, COMPLETE, None, 0, DAY, None, False, KEEP, 0),
    (True, COMPLETE, NOW - DAY, 1, DAY, None, False, CLEAR, 0),
    (True, INCOMPLETE, NOW - DAY, 2, DAY, None, False, CLEAR, 0),
    (True, BOUNDED, NOW - DAY, 2, DAY, None, False, CLEAR, 0),
    (False, INCOMPLETE, None, 0, DAY, HUB, False, KEEP, 0),
    (False, INCOMPLETE, NOW - 10 * DAY, 1, DAY, None, False, KEEP, 1),  # an incomplete crawl confirms nothing
    (False, COMPLETE, None, 0, DAY, HUB, False, MARK, 1),
    (False, BOUNDED, None, 0, DAY, HUB, False, MARK, 1),
    (False, COMPLETE, NOW - timedelta(hours=1), 1, DAY, None, False, WAIT, 2),
    (False, COMPLETE, NOW - DAY, 1, DAY, None, False, PURGE, 2),
    (False, COMPLETE, NOW - 3 * DAY, 1, 10 * DAY, None, False, PURGE, 2),  # the wait is capped
    (False, COMPLETE, NOW - 2 * DAY, 1, 10 * DAY, None, False, WAIT, 2),
    (False, COMPLETE, NOW - 3 * DAY, 1, None, None, False, PURGE, 2),
    (False, COMPLETE, NOW + DAY, 3, DAY, None, False, MARK, 1),  # a mark from a later clock counts from now
    # a bounded crawl (it could not hold all it found) needs BOUNDED_MISSES crawls over the wait
    (False, BOUNDED, NOW - 10 * DAY, 1, DAY, None, False, WAIT, 2),
    (False, BOUNDED, NOW - 10 * DAY, BOUNDED_MISSES - 1, DAY, None, False, PURGE, BOUNDED_MISSES),
    (False, BOUNDED, NOW - timedelta(hours=2), 5, DAY, None, False, WAIT, 6),  # many crawls, too soon
    (False, COMPLETE, NOW - 2 * DAY, 1, DAY, None, False, PURGE, 2),  # a complete crawl after a bounded mark
    # the page that stopped linking it is of a series cut at a cap: it may be listed past the cut
    (False, COMPLETE, NOW - 10 * DAY, 1, DAY, None, True, WAIT, 1),
    (False, BOUNDED, NOW - 10 * DAY, 7, DAY, None, True, WAIT, 7),
    (False, COMPLETE, None, 0, DAY, HUB, True, MARK, 1),  # marked all the same: it names the page
]


@pytest.mark.parametrize("reached,crawl,since,misses,interval,dropped,cut,action,after", CASES)
def test_steps(reached, crawl, since, misses, interval, dropped, cut, action, after):
    step = unlinked_step(
        reached=reached,
        crawl=crawl,
        since=since,
        by=None,
        misses=misses,
        interval=interval,
        now=NOW,
        dropped_by=dropped,
        behind_cut=cut,
    )
    assert (step.action, step.misses) == (action, after)
    if action == MARK:
        assert step.since == NOW and step.by == dropped
    if action in (CLEAR, KEEP) and reached:
        assert step.since is None and step.by is None


PASS = st.tuples(st.booleans(), st.sampled_from([COMPLETE, BOUNDED, INCOMPLETE]), st.integers(0, 96), st.booleans())


@given(st.lists(PASS, max_size=14), st.integers(1, 200))
def test_a_purge_needs_crawls_that_agree_over_a_revisit_interval(passes, interval_hours):
    """Whatever the sequence of crawls, a page is purged only when no crawl reached it since
    a complete or bounded crawl first missed it, at least min(interval, cap) before; and a
    complete crawl confirms it, or BOUNDED_MISSES complete or bounded crawls missed it; and
    the page that stopped linking it is of no series this crawl cut."""
    now, since, by, misses = NOW, None, None, 0
    interval = timedelta(hours=interval_hours)
    missed: list[tuple[datetime, str]] = []  # complete or bounded crawls that missed it since last reached
    for reached, crawl, hours, cut in passes:
        now += timedelta(hours=hours)
        step = unlinked_step(
            reached=reached,
            crawl=crawl,
            since=since,
            by=by,
            misses=misses,
            interval=interval,
            now=now,
            dropped_by=HUB,
            behind_cut=cut,
        )
        if reached:
            missed = []
        elif crawl != INCOMPLETE and not (cut and missed):
            missed.append((now, crawl))
        if step.action == PURGE:
            assert not reached and crawl != INCOMPLETE and not cut
            assert len(missed) >= 2 and now - missed[0][0] >= min(interval, CONFIRM_CAP)
            assert crawl == COMPLETE or len(missed) >= BOUNDED_MISSES
            return
        since, by, misses = step.since, step.by, step.misses


@given(st.integers(0, 30), st.integers(1, 72))
def test_bounded_crawls_that_keep_missing_a_page_purge_it(hours_apart, interval_hours):
    """Growth is bounded: a page every bounded crawl misses leaves, however the crawls are spaced."""
    interval = timedelta(hours=interval_hours)
    now, since, by, misses = NOW, None, None, 0
    for n in range(1, 200):
        now += timedelta(hours=hours_apart or 1)
        step = unlinked_step(
            reached=False, crawl=BOUNDED, since=since, by=by, misses=misses, interval=interval, now=now, dropped_by=HUB
        )
        if step.action == PURGE:
            assert n >= BOUNDED_MISSES and step.by == HUB
            return
        since, by, misses = step.since, step.by, step.misses
    raise AssertionError("never purged")


def test_the_reason_names_the_page_and_the_dates():
    text = purge_reason(NOW - DAY, HUB, NOW)
    assert HUB in text and "2031-03-30T06:00:00Z" in text and "2031-03-31T06:00:00Z" in text
    assert "a second complete crawl" in text
    assert "no page the crawl reached links it" in purge_reason(NOW - DAY, None, NOW)
    assert "2 later crawls, the last at 2031-03-31T06:00:00Z agrees" in purge_reason(NOW - DAY, HUB, NOW, 3)
