"""pagesync: keep a Qdrant collection in sync with a website.

The library entry point is `run_pass`; everything else here is the pieces it is built
from, each usable and testable alone.

Names are imported on first use (PEP 562): `import sync.cli` loads the CLI alone, and a
pass loads what it uses, not the audit, the Qdrant state or every store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .audit import AuditReport, audit_collection, run_audit
    from .decision import Action, Decision, Outcome, decide
    from .engine import ChangeEvent, PassConfig, arun_pass, build_points, plan_events, run_pass
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
    from .fetcher import Fetcher, FetchResult, Validators, conditional_headers, make_client
    from .hashing import content_hash, fold_whitespace, pipeline_fingerprint
    from .httpcache import FetchCache, ReadOnlyCache
    from .ids import canonical_url, chunk_id, point_id
    from .policy import POLICIES, make_policy
    from .report import Report
    from .scope import Scope
    from .scheduler import failure_backoff, next_interval
    from .sitemaps import diff_sitemap, parse_sitemap
    from .qdrant_state import QdrantState
    from .state import PageState, StateDB
    from .state_protocol import State
    from .store import ClientStore, EdgeStore, PageWrite, Store, StoredPoint

# exported name -> the submodule that defines it (also the curated __all__; the
# TYPE_CHECKING imports above say the same for type checkers, and tests/test_imports.py
# checks the two agree)
_EXPORTS = {
    "AuditReport": "audit",
    "audit_collection": "audit",
    "run_audit": "audit",
    "Action": "decision",
    "Decision": "decision",
    "Outcome": "decision",
    "decide": "decision",
    "ChangeEvent": "engine",
    "PassConfig": "engine",
    "arun_pass": "engine",
    "build_points": "engine",
    "plan_events": "engine",
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
    "Fetcher": "fetcher",
    "FetchResult": "fetcher",
    "Validators": "fetcher",
    "conditional_headers": "fetcher",
    "make_client": "fetcher",
    "content_hash": "hashing",
    "fold_whitespace": "hashing",
    "pipeline_fingerprint": "hashing",
    "FetchCache": "httpcache",
    "ReadOnlyCache": "httpcache",
    "canonical_url": "ids",
    "chunk_id": "ids",
    "point_id": "ids",
    "POLICIES": "policy",
    "make_policy": "policy",
    "Report": "report",
    "Scope": "scope",
    "failure_backoff": "scheduler",
    "next_interval": "scheduler",
    "diff_sitemap": "sitemaps",
    "parse_sitemap": "sitemaps",
    "QdrantState": "qdrant_state",
    "PageState": "state",
    "StateDB": "state",
    "State": "state_protocol",
    "ClientStore": "store",
    "EdgeStore": "store",
    "PageWrite": "store",
    "Store": "store",
    "StoredPoint": "store",
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
