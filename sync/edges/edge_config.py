"""A Qdrant Edge shard's `edge_config.json`: what it says (vector size, keyword vector) without
opening the shard, and the config a shard is created or loaded with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .keywords import SPARSE_VECTOR

__all__ = ["CONFIG_FILE", "config_vector_size", "config_has_keywords", "load_config", "create_config"]

CONFIG_FILE = "edge_config.json"


def config_vector_size(shard_dir: Path) -> int | None:
    """The shard's dense vector size (None: no shard, or an unreadable config)."""
    try:
        cfg = json.loads((shard_dir / CONFIG_FILE).read_text())
        return int(cfg["vectors"][""]["size"])
    except (OSError, KeyError, ValueError, TypeError):
        return None


def config_has_keywords(shard_dir: Path) -> bool:
    """The shard has the keyword (sparse) vector; False when it has none, is missing or unreadable."""
    try:
        cfg = json.loads((shard_dir / CONFIG_FILE).read_text())
        return SPARSE_VECTOR in (cfg.get("sparse_vectors") or {})
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def load_config(qe: Any, shard_dir: Path, search_threads: int | None) -> Any:
    """The config to load the shard with: None (as persisted) unless its search pool
    size differs from `search_threads`; then the persisted vector params plus that size
    (Qdrant Edge checks them against the segments and rewrites edge_config.json)."""
    try:
        cfg = json.loads((shard_dir / CONFIG_FILE).read_text())
        vec = cfg["vectors"][""]
        size, distance = int(vec["size"]), getattr(qe.Distance, str(vec["distance"]))
    except (OSError, KeyError, ValueError, TypeError, AttributeError):
        return None
    if search_threads is None or cfg.get("max_search_threads") == search_threads:
        return None  # None: whatever the shard has
    return qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=size, distance=distance), max_search_threads=search_threads)


def create_config(qe: Any, dimension: int, search_threads: int | None) -> Any:
    """A new shard's config: cosine dense vectors of `dimension`, the BM25 keyword vector (IDF)."""
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine),
        sparse_vectors={SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        max_search_threads=search_threads,
    )
