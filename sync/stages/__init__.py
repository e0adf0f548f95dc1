"""The stages of a sync pass, one module each, in the order a page's data flows through them.

`chunks` (the splitter for the embedder's tokens: chunk sizes up to what the model reads),
`preflight` (the collection and the model against the state), `plan` (sitemap diff,
schedule, budget -> visits and removals; `bulk_edits` watches for site-wide edits beside it), `visit` (fetch -> extract -> decide), `embed`
(reuse, de-duplication, batching, the model call's overlap), `write` (a page's replace in
its crash-safe order), `settle` (guard, moves, purges). `sync.engine` conducts them: each
stage is a mixin of its pass, owns the state it sets up in its `_init_<stage>`, and shares
the pass's config, clock, report, state, store and embedder.

Ways in and out, stage by stage (the conductor calls the first of each):

- preflight `_preflight()`: marks the pages to rebuild or rewrite (`rebuild`, `marked`);
  `_ready_collection()` makes the collection at the first write (write calls it);
- plan `_read_sitemaps() -> SitemapRead`, `_plan(SitemapRead) -> Plan`; `_reschedule` sets a
  visited page's next due time for the stages after it;
- visit `_visit(pages)`: each page to a skip or failure (write), a purge (settle), a held
  change (settle's `suspects`) or `_enqueue(_Pending, markdown)` (embed);
- crawl `_crawl()` (with --crawl): follows the links each visit read (`_crawl_note`), visits
  the pages never read through `_visit`, queues the pages no longer linked for the purge;
- embed `_flush()` / `_drain()`: batches with their vectors to `_write(items)` (write);
- settle `_queue_removals`, `_queue_orphans`, `_judge_guard`, `_settle_suspects`, `_apply_purges`.

A stage may import the pure core (`sync.core`: decision, policy, scheduler, sitemaps, ...),
the edges (`sync.edges`: fetcher, state, store, ...) and the stages before it, never
`sync.engine` or `sync.commands`.
Names are imported on first use: `sync.stages.plan`'s pure functions load no fetcher.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    from .settle import SettleStage, guard_refusal
    from .visit import VisitStage
    from .write import WriteStage, build_points

# exported name -> the stage module that defines it (also the curated __all__)
_EXPORTS = {
    "PreflightStage": "preflight",
    "PlanStage": "plan",
    "ChangeEvent": "plan",
    "Plan": "plan",
    "SitemapRead": "plan",
    "emptied_sitemap_errors": "plan",
    "plan_events": "plan",
    "record_sitemap": "plan",
    "within_budget": "plan",
    "VisitStage": "visit",
    "EmbedStage": "embed",
    "WriteStage": "write",
    "build_points": "write",
    "SettleStage": "settle",
    "guard_refusal": "settle",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
