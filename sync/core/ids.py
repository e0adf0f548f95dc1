"""Canonical URLs, chunk ids and point ids: pure functions, the contract's identity rules."""

from __future__ import annotations

import hashlib
import uuid
from urllib.parse import urlsplit, urlunsplit

__all__ = ["canonical_url", "url_problem", "url_digest", "chunk_id", "point_id", "POINT_ID_NAMESPACE"]

_DEFAULT_PORTS = {"http": 80, "https": 443}

# Point ids are uuid5(POINT_ID_NAMESPACE, chunk_id): a pure function of the chunk id, so
# the same chunk always lands on the same point whichever machine writes it.
POINT_ID_NAMESPACE = uuid.NAMESPACE_URL


def url_problem(url: object) -> str | None:
    """Why `url` cannot be a source of a pass (--sitemap, --url, --crawl): not an http(s)
    URL, or one `canonical_url` cannot read (a bad port, an unclosed IPv6 bracket); None
    when it can be."""
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        return "must be an http(s) URL"
    try:
        canonical_url(url)
    except ValueError as exc:
        return f"is not a URL ({exc})"
    return None


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


_NS_BYTES = POINT_ID_NAMESPACE.bytes
# uuid.UUID(bytes=..., version=5)'s bit fiddling on the hash's first 16 bytes: variant RFC 4122, version 5.
_KEEP = ~((0xC000 << 48) | (0xF000 << 64))
_SET = (0x8000 << 48) | (5 << 76)


def point_id(chunk: str) -> str:
    """The Qdrant point id (a UUID string) derived from a chunk id alone.

    `str(uuid.uuid5(POINT_ID_NAMESPACE, chunk))`, computed without the UUID objects (a
    third of the cost: the audit checks one per stored point); tests/core/test_ids.py holds
    the two equal."""
    n = (int.from_bytes(hashlib.sha1(_NS_BYTES + chunk.encode("utf-8")).digest()[:16], "big") & _KEEP) | _SET
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
