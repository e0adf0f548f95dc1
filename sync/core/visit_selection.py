"""Which pages a pass visits, in which order: repairs, new pages, forced and starved pages,
then due pages by their policy's priority, within `--max-fetches`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .history import Visit
from .policies import Policy
from .scheduler import MAX_INTERVAL

__all__ = ["Candidate", "select_visits"]

_MAX_S = MAX_INTERVAL.total_seconds()


@dataclass(frozen=True)
class Candidate:
    """A page the pass could visit.

    `since_last_visit_s` is None for a page never visited. `due`: its scheduled time
    has come (the caller leaves it False while a failing page backs off). `forced`: a
    trusted `lastmod` advance or `--full` asks for it whatever the budget. `repair`: the
    page has a pending write (a crash or a store error between the store write and the
    state's record): it is visited first, whatever the budget. `bonus_s` (>= 0) is added
    to the policy's priority of a due page: `BulkEdit.bonus` of a page a bulk edit under
    way may have changed. `policy`, when set, scores this page instead of the pass's
    policy: `Policy.under_feed` for a page a trusted `lastmod` feed covers.
    """

    url: str
    visits: tuple[Visit, ...]
    since_last_visit_s: float | None
    due: bool
    forced: bool
    repair: bool = False
    bonus_s: float = 0.0
    policy: Policy | None = None


def select_visits(candidates: Sequence[Candidate], policy: Policy, max_fetches: int | None) -> list[str]:
    """The URLs this pass visits, in visiting order.

    1. Repairs (`repair`), by URL: always, even past the budget, so a pending write is
       never postponed. They count against the budget.
    2. New pages (never visited), by URL, so a page is indexed before anything known is
       refreshed: within what the repairs leave of `max_fetches`. A new page that is also
       `forced` is never cut.
    3. Forced pages (trusted `lastmod` advance, `--full`), by URL, then starved pages (due,
       last visit at least `MAX_INTERVAL` ago, longest-waiting first): always, even past
       the budget, so that a trusted change feed is followed at once and no page goes
       unvisited longer than the 60 d ceiling. They count against the budget after the
       new pages, so they never take a new page's place.
    4. Other due pages, highest `policy.priority` + `bonus_s` first, ties by URL: within
       what is left.

    So every visit counts against `max_fetches`, but only repairs, forced and starved
    pages may take the pass past it; a new page is cut only when the repairs (and the new
    pages before it) fill the budget, never for a forced, starved or due page.
    Pages neither repaired, forced, new nor due are not visited: the budget is a cap, not
    a quota. Duplicate URLs are a caller bug and raise `ValueError`.
    """
    if max_fetches is not None and max_fetches < 0:
        raise ValueError(f"max_fetches must be >= 0 or None, got {max_fetches}")
    seen: set[str] = set()
    repairs: list[str] = []
    new: list[Candidate] = []
    forced: list[str] = []
    starved: list[Candidate] = []
    due: list[tuple[float, str]] = []
    for c in candidates:
        if c.url in seen:
            raise ValueError(f"duplicate candidate {c.url!r}")
        seen.add(c.url)
        if c.repair:
            repairs.append(c.url)
        elif c.since_last_visit_s is None:
            new.append(c)
        elif c.forced:
            forced.append(c.url)
        elif c.due and c.since_last_visit_s >= _MAX_S:
            starved.append(c)
        elif c.due:
            due.append(((c.policy or policy).priority(c.visits, c.since_last_visit_s) + c.bonus_s, c.url))

    cap = math.inf if max_fetches is None else max_fetches
    out = sorted(repairs)
    for c in sorted(new, key=lambda c: c.url):
        if c.forced or len(out) < cap:
            out.append(c.url)
    out += sorted(forced)
    out += [c.url for c in sorted(starved, key=lambda c: (-(c.since_last_visit_s or 0.0), c.url))]
    for _, url in sorted(due, key=lambda p: (-p[0], p[1])):
        if len(out) >= cap:
            break
        out.append(url)
    return out
