"""Unlinked: when a crawl page that a complete crawl no longer reaches may leave.

One crawl that misses a page is no evidence: a hub read during a bad deploy may have lost
its links for an hour. A page leaves only when a complete crawl did not reach it, a first
time (`unlinked_since` is set, and the page that stopped linking it is named), and a second
complete crawl at least one revisit interval later (at most `CONFIRM_CAP`) agrees. A crawl
that reaches it again clears the mark; an incomplete crawl neither confirms nor clears it.

Pure: the caller gives the crawl's verdict, the page's mark and interval, and `now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["CONFIRM_CAP", "UnlinkedStep", "unlinked_step", "purge_reason"]

# The longest wait between the crawl that first missed a page and the one that confirms it.
CONFIRM_CAP = timedelta(days=3)

CLEAR, MARK, WAIT, PURGE, KEEP = "clear", "mark", "wait", "purge", "keep"


@dataclass(frozen=True)
class UnlinkedStep:
    """What to do with one crawl page this pass: `action` (clear the mark, mark it unlinked
    now, wait for a confirming crawl, purge it, keep everything as is), and the mark after."""

    action: str
    since: datetime | None
    by: str | None


def unlinked_step(*, reached: bool, complete: bool, since: datetime | None, by: str | None,
                  interval: timedelta | None, now: datetime, dropped_by: str | None = None) -> UnlinkedStep:
    """The step for a crawl page: `reached` by this crawl, `complete` (the crawl saw the
    whole site), its mark (`since`, `by`), its revisit `interval`; `dropped_by` is the page
    read healthy this pass that stopped linking it, if one did."""
    if reached:
        return UnlinkedStep(CLEAR if since is not None else KEEP, None, None)
    if not complete:
        return UnlinkedStep(KEEP, since, by)
    if since is None or since > now:  # a mark from a later clock (a replay) counts from now
        return UnlinkedStep(MARK, now, dropped_by or by)
    wait = min(interval, CONFIRM_CAP) if interval is not None else CONFIRM_CAP
    if now - since >= wait:
        return UnlinkedStep(PURGE, since, by or dropped_by)
    return UnlinkedStep(WAIT, since, by or dropped_by)


def purge_reason(since: datetime, by: str | None, now: datetime) -> str:
    """The report's reason for a page leaving unlinked: which page stopped linking it, since when."""
    when = f"{since:%Y-%m-%dT%H:%M:%SZ}"
    who = f"{by} stopped linking it" if by else "no page the crawl reached links it"
    return (f"no longer linked: {who} (unlinked since {when}; a second complete crawl at "
            f"{now:%Y-%m-%dT%H:%M:%SZ} agrees)")
