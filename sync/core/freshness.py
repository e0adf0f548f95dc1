"""How fresh the collection is: the figures `status` reports and `--metrics` exports."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from .page import GONE, PageState

__all__ = ["freshness"]


def freshness(pages: Iterable[PageState], due: int, now: datetime) -> dict[str, Any]:
    """Live pages tracked, pages due at `now` (`due`, as the state counts them) and the
    oldest visit among live pages: when, and its age in seconds at `now` (None when no
    live page was ever visited). A page tracked but never fetched is not a visit."""
    live = [p for p in pages if p.status != GONE]
    visits = [p.last_fetched_at for p in live if p.last_fetched_at is not None]
    oldest = min(visits, default=None)
    return {
        "pages_tracked": len(live),
        "pages_due": due,
        "oldest_visit_at": oldest.isoformat() if oldest else None,
        "oldest_visit_age_s": max(0.0, (now - oldest).total_seconds()) if oldest else None,
    }
