"""Unlinked: when a crawl page that a crawl no longer reaches may leave.

One crawl that misses a page is no evidence: a hub read during a bad deploy may have lost
its links for an hour. A page leaves only when a crawl that read the site healthy did not
reach it a first time (`unlinked_since` is set, and the page that stopped linking it is
named), and later crawls agree:
- a crawl is COMPLETE (it read every page it reached, held all it found) or BOUNDED (it
  read every page it reached healthy, but could not hold all it found: over --max-pages, a
  page's links cut at their bound) or INCOMPLETE (a page failed, a start page unread);
- a COMPLETE crawl at least one revisit interval (at most `CONFIRM_CAP`) after the mark
  confirms it; BOUNDED crawls confirm it once `BOUNDED_MISSES` of them in a row missed it
  over that same wait (the links the crawl could not hold may be the page's);
- the page that stopped linking it is one of a series the crawl cut at a link-trap cap (a
  pager's `?page=33`): the page may have moved on past the cut, so it is kept (marked);
- a crawl that reaches it clears the mark; an INCOMPLETE one neither confirms nor clears it.

Pure: the caller gives the crawl's verdict, the page's mark and interval, and `now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = [
    "CONFIRM_CAP",
    "BOUNDED_MISSES",
    "COMPLETE",
    "BOUNDED",
    "INCOMPLETE",
    "UnlinkedStep",
    "unlinked_step",
    "purge_reason",
]

# The longest wait between the crawl that first missed a page and the one that confirms it.
CONFIRM_CAP = timedelta(days=3)
# Crawls in a row, COMPLETE or BOUNDED, that must miss a page (the marking one included) before
# BOUNDED ones alone may purge it.
BOUNDED_MISSES = 3

COMPLETE, BOUNDED, INCOMPLETE = "complete", "bounded", "incomplete"
CLEAR, MARK, WAIT, PURGE, KEEP = "clear", "mark", "wait", "purge", "keep"


@dataclass(frozen=True)
class UnlinkedStep:
    """What to do with one crawl page this pass: `action` (clear the mark, mark it unlinked
    now, wait for a confirming crawl, purge it, keep everything as is), and the mark after
    (`since`, `by`, `misses`: the crawls that missed it since it was marked)."""

    action: str
    since: datetime | None
    by: str | None
    misses: int = 0


def unlinked_step(
    *,
    reached: bool,
    crawl: str,
    since: datetime | None,
    by: str | None,
    misses: int,
    interval: timedelta | None,
    now: datetime,
    dropped_by: str | None = None,
    behind_cut: bool = False,
) -> UnlinkedStep:
    """The step for a crawl page: `reached` by this crawl, the crawl's verdict (`COMPLETE`,
    `BOUNDED`, `INCOMPLETE`), its mark (`since`, `by`, `misses`), its revisit `interval`;
    `dropped_by` is the page read healthy this pass that stopped linking it, if one did;
    `behind_cut`: the page that stopped linking it (`by`, else `dropped_by`) is of a series
    this crawl cut at a cap."""
    if reached:
        return UnlinkedStep(CLEAR if since is not None else KEEP, None, None)
    if crawl == INCOMPLETE:
        return UnlinkedStep(KEEP, since, by, misses)
    if since is None or since > now:  # a mark from a later clock (a replay) counts from now
        return UnlinkedStep(MARK, now, dropped_by or by, 1)
    who = by or dropped_by
    if behind_cut:
        return UnlinkedStep(WAIT, since, who, misses)  # it may be listed past the cut: no crawl confirms it
    misses += 1
    wait = min(interval, CONFIRM_CAP) if interval is not None else CONFIRM_CAP
    if now - since >= wait and (crawl == COMPLETE or misses >= BOUNDED_MISSES):
        return UnlinkedStep(PURGE, since, who, misses)
    return UnlinkedStep(WAIT, since, who, misses)


def purge_reason(since: datetime, by: str | None, now: datetime, misses: int = 2) -> str:
    """The report's reason for a page leaving unlinked: which page stopped linking it, since
    when, and the crawls that agree."""
    when = f"{since:%Y-%m-%dT%H:%M:%SZ}"
    who = f"{by} stopped linking it" if by else "no page the crawl reached links it"
    later = "a second complete crawl" if misses <= 2 else f"{misses - 1} later crawls, the last"
    return f"no longer linked: {who} (unlinked since {when}; {later} at {now:%Y-%m-%dT%H:%M:%SZ} agrees)"
