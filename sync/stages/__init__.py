"""The stages of a sync pass, one module each, in the order a page's data flows through them.

`preflight` (the collection and the model against the state), `plan` (sitemap diff,
schedule, budget -> visits and removals), `visit` (fetch -> extract -> decide), `embed`
(reuse, de-duplication, batching, the model call's overlap), `write` (a page's replace in
its crash-safe order), `settle` (guard, moves, purges). `sync.engine` conducts them: each
stage is a mixin of its pass, sharing the pass's config, clock, report, state and store.

A stage may import the pure core and the edges of `sync` (decision, policy, scheduler,
sitemaps, state, store, ...) and the stages before it, never `sync.engine` or the commands.
"""

from __future__ import annotations

from .embed import EmbedStage
from .plan import (
    ChangeEvent,
    Plan,
    PlanStage,
    SitemapRead,
    emptied_sitemap_errors,
    plan_events,
    record_sitemap,
    within_budget,
)
from .preflight import PreflightStage
from .settle import SettleStage
from .visit import VisitStage
from .write import WriteStage, build_points

__all__ = [
    "PreflightStage",
    "PlanStage",
    "VisitStage",
    "EmbedStage",
    "WriteStage",
    "SettleStage",
    "ChangeEvent",
    "Plan",
    "SitemapRead",
    "emptied_sitemap_errors",
    "plan_events",
    "record_sitemap",
    "within_budget",
    "build_points",
]
