"""The stages of a sync pass, one module each, as objects with explicit inputs and outputs.

`sync.engine` builds them from the pass's config and calls them in the order a page's data
flows; each takes what it uses in its constructor and hands its output on:

- `preflight.Preflight.run()` -> `CollectionCheck` (the collection was empty; pages to
  rebuild, pages short of points); `ready_collection()` makes the collection at the first write;
- `plan.Planner.read_sitemaps()` -> `SitemapRead`; `plan(SitemapRead)` -> `Plan` (visits, removals);
  `deploys.Deploys` and `bulk_edits.BulkEdits` add visits inside it;
- `schedule.Scheduler` (a service): the policy per page and each visit's next due time;
- `visit.Visitor.visit(pages)`: each answer to `outcomes.Outcomes` (skips, failures), the
  `settle.Ledger` (purges, held changes) or the `embed.EmbedQueue` (changes, as `PendingPage`);
- `crawl.Crawl`: told of every visit, then walks the links through the visitor, with what each
  page links to in `crawl_links.LinkMemory`;
- `embed.EmbedQueue` -> embedded batches to `write.Writer.write` (the crash-safe replace),
  its tokens counted and bounded by `token_spend.TokenSpend`;
- `settle.Settler`: the guard's verdict over the ledger, the held changes, then the purges.

A stage may import the pure core (`sync.core`), the edges (`sync.edges`) and the stages it
hands to, never `sync.engine` or `sync.commands`. Names are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bulk_edits import BulkEdits
    from .crawl import Crawl
    from .deploys import Deploys
    from .embed import EmbedQueue
    from .fingerprints import Fingerprints
    from .outcomes import Outcomes
    from .pending import PendingPage
    from .plan import Planner
    from .preflight import CollectionCheck, Preflight
    from .schedule import Scheduler
    from .settle import Ledger, Settler, guard_refusal
    from .visit import Visitor
    from .write import Writer, build_points

# exported name -> the stage module that defines it (also the curated __all__)
_EXPORTS = {
    "Preflight": "preflight",
    "CollectionCheck": "preflight",
    "Planner": "plan",
    "Deploys": "deploys",
    "BulkEdits": "bulk_edits",
    "Scheduler": "schedule",
    "Fingerprints": "fingerprints",
    "Outcomes": "outcomes",
    "Visitor": "visit",
    "Crawl": "crawl",
    "PendingPage": "pending",
    "EmbedQueue": "embed",
    "Writer": "write",
    "build_points": "write",
    "Ledger": "settle",
    "Settler": "settle",
    "guard_refusal": "settle",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
