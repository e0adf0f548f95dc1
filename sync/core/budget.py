"""The failure budget of a pass (`--max-failed-share`): when failed pages make it exit 1.

A nightly job should not page anyone for one flaky page among thousands: a pass whose
failed pages are at most a given share of the pages it visited is a success. Whatever
else makes a pass fail (a sitemap that could not be read, purges the mass-deletion guard
held back, pages left by the token budget) still fails it: those are not flaky pages but a
pass that could not see, or would not trust, the site.
"""

from __future__ import annotations

__all__ = ["failed_share", "within_failure_budget"]


def failed_share(pages_failed: int, pages_visited: int) -> float:
    """The share of visited pages that failed; 1.0 when pages failed but none counts as
    visited (a failure is never free)."""
    if pages_failed <= 0:
        return 0.0
    return min(1.0, pages_failed / pages_visited) if pages_visited > 0 else 1.0


def within_failure_budget(
    *, pages_failed: int, pages_visited: int, otherwise_ok: bool, max_failed_share: float
) -> bool:
    """True when the pass counts as a success: it is ok but for its failed pages
    (`otherwise_ok`), and no more than `max_failed_share` of the visited pages failed
    (0: none may)."""
    return otherwise_ok and failed_share(pages_failed, pages_visited) <= max_failed_share
