"""pagesync: keep a Qdrant collection in sync with a website.

The library entry points are `run_pass` (one sync pass) and `open_collection` (search what
it wrote, from an app); everything else here is the pieces they are built from, each usable
and testable alone. The packages are layers, each importing only
from the ones above it in this list:

- `sync.errors`: the one exception tree.
- `sync.core`: pure rules and data (ids, hashing, sitemap diff, policy, decisions, scope).
- `sync.edges`: the I/O seams (HTTP fetcher, vector stores, page states, caches).
- `sync.stages`: the steps of a pass (preflight, plan, visit, embed, write, settle).
- `sync.engine`: the conductor of one pass.
- `sync.commands`: what the CLI offers (run, audit, status, reindex, export/import, read).
- `sync.integrations`: retrievers for LangChain and LlamaIndex over `open_collection`, each
  loading its framework only when imported (extras `pagesync[langchain]`, `pagesync[llamaindex]`).

Names are imported on first use (PEP 562): `import sync.commands.cli` loads the CLI alone, and a
pass loads what it uses, not the audit, the Qdrant state or every store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .commands.audit import AuditReport, audit_collection, run_audit
    from .commands.read import Collection, Hit, open_collection
    from .core.decision import Action, Decision, Outcome, decide
    from .engine import PassConfig, arun_pass, run_pass
    from .core.planning import ChangeEvent, plan_events
    from .stages.write import build_points
    from .errors import (
        CollectionLostError,
        CollectionMismatchError,
        ConfigError,
        EmbedderError,
        FetchError,
        PagesyncError,
        SitemapError,
        StateError,
        StateLeaseLostError,
        StateLockedError,
        StoreError,
    )
    from .edges.fetcher import Fetcher, FetchResult, Validators, conditional_headers, make_client
    from .core.hashing import content_hash, fold_whitespace, pipeline_fingerprint
    from .edges.httpcache import FetchCache, ReadOnlyCache
    from .core.ids import canonical_url, chunk_id, point_id
    from .core.policies import POLICIES, make_policy
    from .core.report import Report
    from .core.scope import Scope
    from .core.site_rules import SiteRules, SiteRuleSet, url_wanted
    from .core.scheduler import failure_backoff, next_interval
    from .core.sitemaps import diff_sitemap, parse_sitemap
    from .edges.qdrant_state import QdrantState
    from .core.page import PageState
    from .edges.state import StateDB
    from .edges.state_protocol import State
    from .edges.client_store import ClientStore
    from .edges.edge_store import EdgeStore
    from .edges.store import PageWrite, Store, StoredPoint

# exported name -> the submodule that defines it (also the curated __all__; the
# TYPE_CHECKING imports above say the same for type checkers, and tests/project/test_imports.py
# checks the two agree)
_EXPORTS = {
    "AuditReport": "commands.audit",
    "audit_collection": "commands.audit",
    "run_audit": "commands.audit",
    "Collection": "commands.read",
    "Hit": "commands.read",
    "open_collection": "commands.read",
    "Action": "core.decision",
    "Decision": "core.decision",
    "Outcome": "core.decision",
    "decide": "core.decision",
    "ChangeEvent": "core.planning",
    "PassConfig": "engine",
    "arun_pass": "engine",
    "build_points": "stages.write",
    "plan_events": "core.planning",
    "run_pass": "engine",
    "CollectionLostError": "errors",
    "CollectionMismatchError": "errors",
    "ConfigError": "errors",
    "EmbedderError": "errors",
    "FetchError": "errors",
    "PagesyncError": "errors",
    "SitemapError": "errors",
    "StateError": "errors",
    "StateLeaseLostError": "errors",
    "StateLockedError": "errors",
    "StoreError": "errors",
    "Fetcher": "edges.fetcher",
    "FetchResult": "edges.fetcher",
    "Validators": "edges.fetcher",
    "conditional_headers": "edges.fetcher",
    "make_client": "edges.fetcher",
    "content_hash": "core.hashing",
    "fold_whitespace": "core.hashing",
    "pipeline_fingerprint": "core.hashing",
    "FetchCache": "edges.httpcache",
    "ReadOnlyCache": "edges.httpcache",
    "canonical_url": "core.ids",
    "chunk_id": "core.ids",
    "point_id": "core.ids",
    "POLICIES": "core.policies",
    "make_policy": "core.policies",
    "Report": "core.report",
    "Scope": "core.scope",
    "SiteRules": "core.site_rules",
    "SiteRuleSet": "core.site_rules",
    "url_wanted": "core.site_rules",
    "failure_backoff": "core.scheduler",
    "next_interval": "core.scheduler",
    "diff_sitemap": "core.sitemaps",
    "parse_sitemap": "core.sitemaps",
    "QdrantState": "edges.qdrant_state",
    "PageState": "core.page",
    "StateDB": "edges.state",
    "State": "edges.state_protocol",
    "ClientStore": "edges.client_store",
    "EdgeStore": "edges.edge_store",
    "PageWrite": "edges.store",
    "Store": "edges.store",
    "StoredPoint": "edges.store",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
