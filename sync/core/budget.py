"""The failure budget of a pass (`--max-failed-share`): when failed pages make it exit 1.

A nightly job should not page anyone for one flaky page among thousands: a pass whose
failed pages are at most a given share of the pages it visited is a success. A sitemap
that failed or a purge the mass-deletion guard held back always fails it: those are not
flaky pages but a pass that could not see, or would not trust, the site.
"""

from __future__ import annotations

__all__ = ["failed_share", "within_budget"]


def failed_share(pages_failed: int, pages_visited: int) -> float:
    """The share of visited pages that failed; 1.0 when pages failed but none counts as
    visited (a failure is never free)."""
    if pages_failed <= 0:
        return 0.0
    return min(1.0, pages_failed / pages_visited) if pages_visited > 0 else 1.0


def within_budget(*, pages_failed: int, pages_visited: int, sitemap_errors: int, mass_delete_blocked: int,
                  max_failed_share: float) -> bool:
    """True when the pass counts as a success: no sitemap error, nothing held back by the
    guard, and no more than `max_failed_share` of the visited pages failed (0: none may)."""
    if sitemap_errors or mass_delete_blocked:
        return False
    return failed_share(pages_failed, pages_visited) <= max_failed_share
