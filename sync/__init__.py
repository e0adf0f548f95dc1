"""pagesync: keep a Qdrant collection in sync with a website.

The library entry point is `run_pass`; everything else here is the pieces it is built
from, each usable and testable alone.
"""

from .audit import AuditReport, audit_collection, run_audit
from .decision import Action, Decision, Outcome, decide
from .engine import ChangeEvent, PassConfig, arun_pass, build_points, plan_events, run_pass
from .errors import (
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

__all__ = [
    "run_pass", "arun_pass", "PassConfig", "Report", "ChangeEvent", "plan_events", "build_points",
    "audit_collection", "run_audit", "AuditReport", "make_policy", "POLICIES", "Scope",
    "Action", "Decision", "Outcome", "decide",
    "Fetcher", "FetchResult", "Validators", "conditional_headers", "make_client", "FetchCache", "ReadOnlyCache",
    "content_hash", "fold_whitespace", "pipeline_fingerprint",
    "canonical_url", "chunk_id", "point_id",
    "next_interval", "failure_backoff",
    "diff_sitemap", "parse_sitemap",
    "PageState", "StateDB", "State", "QdrantState",
    "Store", "EdgeStore", "ClientStore", "PageWrite", "StoredPoint",
    "PagesyncError", "ConfigError", "StateLockedError", "StateError", "StateLeaseLostError", "StoreError",
    "CollectionMismatchError", "FetchError", "SitemapError", "EmbedderError",
]
