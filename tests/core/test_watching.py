"""The watcher's decisions: when it reads the sitemaps, when it runs a pass, how long it backs
off after a failed pass and how long it sleeps, as tables over `now`."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.watching import (
    BACKOFF_BASE,
    BACKOFF_MAX,
    Step,
    WatchState,
    after_pass,
    after_probe,
    backoff,
    decide,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
POLL = timedelta(minutes=5)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "state, now, step",
    [
        # The first step reads the sitemaps, whatever is owed.
        (WatchState(), at(0), Step(probe=True, reason="poll")),
        # Then the start's pass.
        (WatchState(last_probe=at(0)), at(0), Step(run=True, reason="start")),
        # Nothing owed, nothing due: sleep until the next poll.
        (WatchState(owed=None, last_probe=at(0)), at(10), Step(sleep=timedelta(seconds=290), reason="idle")),
        # A page due before the next poll: sleep until it.
        (
            WatchState(owed=None, last_probe=at(0), next_due=at(100)),
            at(10),
            Step(sleep=timedelta(seconds=90), reason="idle"),
        ),
        # A page due after the next poll: the poll comes first.
        (
            WatchState(owed=None, last_probe=at(0), next_due=at(900)),
            at(10),
            Step(sleep=timedelta(seconds=290), reason="idle"),
        ),
        # The due time has come: a pass.
        (WatchState(owed=None, last_probe=at(0), next_due=at(100)), at(100), Step(run=True, reason="due")),
        # A deploy seen: a pass at once.
        (WatchState(owed="deploy", last_probe=at(0)), at(0), Step(run=True, reason="deploy")),
        # The poll's time has come while a page is due: read the sitemaps first, one pass serves both.
        (WatchState(owed=None, last_probe=at(0), next_due=at(300)), at(300), Step(probe=True, reason="poll")),
        # A failed pass: no retry before its backoff has run out, but the sleep ends at the retry...
        (
            WatchState(owed="retry", last_probe=at(0), failures=1, retry_at=at(30)),
            at(5),
            Step(sleep=timedelta(seconds=25), reason="retry"),
        ),
        # ...or at the poll, when that comes first...
        (
            WatchState(owed="retry", last_probe=at(0), failures=9, retry_at=at(3600)),
            at(5),
            Step(sleep=timedelta(seconds=295), reason="retry"),
        ),
        # ...and the retry runs once it has.
        (
            WatchState(owed="retry", last_probe=at(0), failures=1, retry_at=at(30)),
            at(30),
            Step(run=True, reason="retry"),
        ),
        # A due time in the past does not shorten a backoff.
        (
            WatchState(owed="retry", last_probe=at(0), next_due=at(1), failures=1, retry_at=at(30)),
            at(5),
            Step(sleep=timedelta(seconds=25), reason="retry"),
        ),
    ],
)
def test_decide(state, now, step):
    assert decide(now, state, POLL) == step


@pytest.mark.parametrize(
    "failures, poll, wait",
    [
        (0, POLL, timedelta(0)),
        (1, POLL, BACKOFF_BASE),
        (2, POLL, 2 * BACKOFF_BASE),
        (3, POLL, 4 * BACKOFF_BASE),
        (8, POLL, BACKOFF_MAX),  # 30 s * 128 = 64 min: capped at an hour
        (1000, POLL, BACKOFF_MAX),
        (1, timedelta(seconds=1), timedelta(seconds=1)),  # a short poll retries soon
        (3, timedelta(seconds=1), timedelta(seconds=4)),
        (1, timedelta(hours=3), BACKOFF_BASE),
        (100, timedelta(hours=3), timedelta(hours=3)),  # a poll longer than the cap is the cap
    ],
)
def test_backoff(failures, poll, wait):
    assert backoff(failures, poll) == wait


@pytest.mark.parametrize(
    "state, seen, owed",
    [
        (WatchState(owed=None), False, None),
        (WatchState(owed=None), True, "deploy"),
        (WatchState(owed="retry"), True, "retry"),  # already owed: the retry serves the deploy too
    ],
)
def test_after_probe(state, seen, owed):
    out = after_probe(state, at(7), seen)
    assert (out.owed, out.last_probe) == (owed, at(7))


def test_a_pass_that_ran_clears_the_debt_and_the_backoff():
    failing = WatchState(owed="retry", failures=3, retry_at=at(500), next_due=at(1))
    out = after_pass(failing, at(600), True, at(900), POLL)
    assert (out.owed, out.failures, out.retry_at, out.next_due) == (None, 0, None, at(900))


def test_a_failed_pass_is_owed_again_after_a_longer_backoff():
    out = after_pass(WatchState(owed="deploy", next_due=at(50)), at(100), False, None, POLL)
    assert (out.owed, out.failures, out.retry_at, out.next_due) == ("retry", 1, at(100) + BACKOFF_BASE, at(50))
    again = after_pass(out, at(200), False, None, POLL)
    assert (again.failures, again.retry_at) == (2, at(200) + 2 * BACKOFF_BASE)


states = st.builds(
    WatchState,
    owed=st.sampled_from([None, "start", "deploy", "retry"]),
    last_probe=st.none() | st.integers(0, 10_000).map(at),
    next_due=st.none() | st.integers(0, 10_000).map(at),
    failures=st.integers(0, 50),
    retry_at=st.none() | st.integers(0, 10_000).map(at),
)


@given(states, st.integers(0, 10_000).map(at), st.integers(1, 7200).map(lambda s: timedelta(seconds=s)))
def test_every_step_does_one_thing_and_never_sleeps_past_a_poll(state, now, poll):
    """Exactly one of probe, pass and sleep; a sleep is never 0 (no busy loop) nor past a poll."""
    step = decide(now, state, poll)
    assert step.probe + step.run + (step.sleep > timedelta(0)) == 1
    assert step.sleep <= poll


@given(states, st.integers(0, 10_000).map(at), st.integers(1, 7200).map(lambda s: timedelta(seconds=s)))
def test_the_loop_reaches_a_pass_or_a_sleep_after_one_probe(state, now, poll):
    """A probe is followed, at the same `now`, by a pass or a sleep: never a second probe."""
    step = decide(now, state, poll)
    if step.probe:
        step = decide(now, after_probe(state, now, False), poll)
    assert not step.probe
