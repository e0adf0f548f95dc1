"""Outcomes: what a pass records of each page it settles, in the state and in the report.

Every stage that ends a page's part in the pass (a skip, a failure, a write, a purge) says
so here: the report counts it and lists it, the progress hook hears it, and the page's row
is written to the state (never in a dry run). Skips are written in bulk (`unchanged`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Callable, Sequence

from ..core.decision import Action, Decision
from ..core.page import PageState
from ..core.report import Report
from ..core.scheduler import NEW_PAGE_INTERVAL, failure_backoff
from ..edges.state_protocol import State

__all__ = ["Outcomes"]

# The report counter each outcome adds one to (every Action has one).
_COUNTERS = {
    Action.SKIP_NOT_MODIFIED: "pages_not_modified",
    Action.SKIP_UNCHANGED: "pages_unchanged",
    Action.ADD: "pages_added",
    Action.REPLACE: "pages_changed",
    Action.PURGE: "pages_removed",
    Action.FAIL: "pages_failed",
    Action.SKIP_POLICY: "pages_skipped",
}

# The outcomes after which the collection holds the page's current text.
_LANDED = frozenset({Action.SKIP_NOT_MODIFIED, Action.SKIP_UNCHANGED, Action.ADD, Action.REPLACE})

_SKIPS_PER_WRITE = 256  # unchanged pages' rows written together


class Outcomes:
    """The pass's page outcomes: report lines and counters, state rows, progress."""

    def __init__(
        self,
        state: State,
        report: Report,
        *,
        now: datetime,
        dry_run: bool,
        on_progress: Callable[[str, str], None] | None = None,
    ):
        self.state, self.report, self.now, self.dry_run = state, report, now, dry_run
        self.on_progress = on_progress or (lambda url, action: None)
        self.landed: set[str] = set()  # urls whose text the collection holds as of this pass
        self.chunks_skipped = 0  # chunks of pages skipped unchanged (304, same hash): tokens saved
        self._skips: list[PageState] = []

    def save(self, pages: Sequence[PageState]) -> None:
        """Write these rows to the state (a dry run keeps nothing)."""
        if not self.dry_run and pages:
            self.state.put_many(pages)

    def record(self, page: PageState, decision: Decision, chunks: int | None = None, reused: int | None = None) -> None:
        """Count and list one page's outcome (its row is the caller's to save)."""
        r = self.report
        a = decision.action
        if a in _LANDED:
            self.landed.add(page.url)
        counter = _COUNTERS[a]
        setattr(r, counter, getattr(r, counter) + 1)
        if a in (Action.SKIP_NOT_MODIFIED, Action.SKIP_UNCHANGED):
            self.chunks_skipped += page.chunk_count
        if decision.writes or a in (Action.FAIL, Action.SKIP_POLICY):
            entry: dict[str, object] = {"url": page.url, "action": a.value, "reason": decision.reason}
            if chunks is not None:
                entry["chunks"] = chunks
            if reused is not None:
                entry["reused"] = reused
            r.changes.append(entry)
        self.on_progress(page.url, a.value)

    def fail(self, page: PageState, message: str, retry_after: float | None = None) -> None:
        """A failed visit or write: old points and hash kept, back after the failure backoff
        (or when the server said, if later)."""
        page.failures += 1
        page.last_error = message
        wait = failure_backoff(page.failures)
        if retry_after is not None:
            wait = max(wait, timedelta(seconds=retry_after))
        page.due_at = self.now + wait
        self.report.error(page.url, message)
        self.record(page, Decision(Action.FAIL, message))
        self.save([page])

    def skip(self, page: PageState, reason: str, last_error: str | None) -> None:
        """Not ours to read (robots.txt, scope, size, type, too many chunks): keep its points
        and its validators (they stay those of the stored text), look again later."""
        page.last_error = last_error
        page.due_at = self.now + (page.interval or NEW_PAGE_INTERVAL)
        self.report.skip(page.url, reason)
        self.record(page, Decision(Action.SKIP_POLICY, reason))
        self.save([page])

    def unchanged(self, page: PageState, decision: Decision) -> None:
        """A page found as it was (304, same hash), already rescheduled: its row goes in bulk."""
        self.record(page, decision)
        self._skips.append(page)
        if len(self._skips) >= _SKIPS_PER_WRITE:
            self.flush_skips()

    def flush_skips(self) -> None:
        self.save(self._skips)
        self._skips = []
