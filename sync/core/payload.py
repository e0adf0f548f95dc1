"""A point's `metadata` payload object: the fields a framework reads as a document's metadata.

LangChain's `QdrantVectorStore` returns a point's `metadata_payload_key` object (default
`metadata`) as a Document's metadata and reads nothing else but the text, so each point
carries a copy of its own `url`, `title`, `chunk_id`, `chunk_index`, `fetched_at` and
`headings` (the chunk's page title and heading path) there.
The copy is derived from the point's top-level payload alone: a pass writes it with the
point, and the audit checks (and `--fix` restores) it from the same fields, with no fetch
and no embedding.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["METADATA_KEY", "METADATA_FIELDS", "point_metadata", "metadata_is_current"]

METADATA_KEY = "metadata"
# The top-level payload fields the `metadata` object mirrors, in the contract's order.
METADATA_FIELDS = ("url", "title", "chunk_id", "chunk_index", "fetched_at", "headings")


def point_metadata(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The `metadata` object a point with this payload carries: each of `METADATA_FIELDS`
    the payload has, with its value (a field the payload lacks is left out, not null)."""
    return {k: payload[k] for k in METADATA_FIELDS if k in payload}


def metadata_is_current(payload: Mapping[str, Any]) -> bool:
    """Whether the payload's `metadata` object is exactly `point_metadata(payload)`."""
    return payload.get(METADATA_KEY) == point_metadata(payload)
