"""Canonical URLs, chunk ids and point ids: pure functions, the contract's identity rules."""

from __future__ import annotations

import hashlib
import uuid
from urllib.parse import urlsplit, urlunsplit

__all__ = ["canonical_url", "url_digest", "chunk_id", "point_id", "POINT_ID_NAMESPACE"]

_DEFAULT_PORTS = {"http": 80, "https": 443}

# Point ids are uuid5(POINT_ID_NAMESPACE, chunk_id): a pure function of the chunk id, so
# the same chunk always lands on the same point whichever machine writes it.
POINT_ID_NAMESPACE = uuid.NAMESPACE_URL


def canonical_url(url: str) -> str:
    """Scheme and host lowercased, default port dropped, fragment dropped; path and query as given.

    Raises ValueError for a URL that cannot name a page (bad IPv6 literal, bad port).
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = parts.port  # raises ValueError for a port outside 0-65535: no silent re-mapping
    netloc = host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc = f"{host}:{port}"
    if parts.username or parts.password:
        userinfo = parts.username or ""
        if parts.password:
            userinfo += f":{parts.password}"
        netloc = f"{userinfo}@{netloc}"
    return urlunsplit((scheme, netloc, parts.path, parts.query, ""))


def url_digest(url: str) -> str:
    """Lowercase hex SHA-256 of the (already canonical) URL."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


def chunk_id(url: str, index: int) -> str:
    """`sha256(url)_cN`, N the 0-based chunk index."""
    if index < 0:
        raise ValueError("chunk index must be >= 0")
    return f"{url_digest(url)}_c{index}"


def point_id(chunk: str) -> str:
    """The Qdrant point id (a UUID string) derived from a chunk id alone."""
    return str(uuid.uuid5(POINT_ID_NAMESPACE, chunk))
