"""The watcher's decisions (`pagesync watch`): when to read the sitemaps again, when to run a
pass, how long to back off after a failed one and how long to sleep. Pure: the loop
(`sync.commands.watch`) gives the clock and applies what is decided."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

__all__ = ["WatchState", "Step", "BACKOFF_BASE", "BACKOFF_MAX", "backoff", "decide", "after_probe", "after_pass"]

# A failed pass is retried after BACKOFF_BASE, then twice as long each time, up to
# BACKOFF_MAX (or the poll, when that is longer): a store or site that is down for hours
# is not hammered, one that is back is used again within minutes.
BACKOFF_BASE = timedelta(seconds=30)
BACKOFF_MAX = timedelta(hours=1)


@dataclass(frozen=True)
class WatchState:
    """What the watcher knows between steps. `owed`: why a pass is owed (a deploy seen, the
    start, a failed pass to retry), or None; `next_due`: the earliest due time the page state
    gave after the last pass (None: nothing scheduled); `failures`: failed passes in a row."""

    owed: str | None = "start"
    last_probe: datetime | None = None
    next_due: datetime | None = None
    failures: int = 0
    retry_at: datetime | None = None


@dataclass(frozen=True)
class Step:
    """What to do now: read the sitemaps (`probe`), run a pass (`run`, for `reason`), or
    neither and sleep `sleep` (then decide again)."""

    probe: bool = False
    run: bool = False
    reason: str = ""
    sleep: timedelta = timedelta(0)


def backoff(failures: int, poll: timedelta) -> timedelta:
    """The wait before retrying after `failures` (>= 1) failed passes in a row: doubling from
    the base (at most the poll, so a short poll retries soon), capped at max(poll, 1 h)."""
    base = min(BACKOFF_BASE, poll)
    cap = max(BACKOFF_MAX, poll)
    if failures < 1:
        return timedelta(0)
    # 2**n past the cap's ratio would only overflow: a long failing streak waits the cap.
    return cap if failures > 40 else min(cap, base * 2 ** (failures - 1))


def decide(now: datetime, st: WatchState, poll: timedelta) -> Step:
    """The next step at `now`. A probe first when a poll's time has passed (so a deploy is
    seen before a due pass runs, and one pass serves both); then a pass when one is owed or
    a page is due, unless a failed pass's backoff has not yet run out; else sleep until the
    earliest of the next probe, the next due time and the retry, never longer than a poll."""
    next_probe = st.last_probe + poll if st.last_probe is not None else now
    if now >= next_probe:
        return Step(probe=True, reason="poll")
    reason = st.owed or ("due" if st.next_due is not None and now >= st.next_due else None)
    waiting = st.retry_at is not None and now < st.retry_at
    if reason and not waiting:
        return Step(run=True, reason=reason)
    wake = [next_probe]
    if st.next_due is not None and not reason:
        wake.append(st.next_due)
    if reason and st.retry_at is not None:
        wake.append(st.retry_at)
    until = max(timedelta(0), min(wake) - now)
    return Step(sleep=min(until, poll), reason="retry" if reason else "idle")


def after_probe(st: WatchState, now: datetime, deploy_seen: bool) -> WatchState:
    """The sitemaps were read at `now`; a changed one (a deploy) owes a pass."""
    owed = st.owed or ("deploy" if deploy_seen else None)
    return replace(st, last_probe=now, owed=owed)


def after_pass(st: WatchState, now: datetime, ok: bool, next_due: datetime | None, poll: timedelta) -> WatchState:
    """A pass ended at `now`. Done: nothing owed, the state's next due time kept, no backoff.
    Failed: the pass is owed again (a retry), after `backoff`; the last due time stays."""
    if ok:
        return replace(st, owed=None, next_due=next_due, failures=0, retry_at=None)
    failures = st.failures + 1
    return replace(st, owed="retry", failures=failures, retry_at=now + backoff(failures, poll))
