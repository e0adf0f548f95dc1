"""The vector store seam: the `Store` protocol and the records both backends share.

- `EdgeStore` (`sync.edges.edge_store`): the embedded default, Qdrant Edge (the Qdrant engine
  in-process, one shard directory per collection). Delete-by-url goes through a keyword
  payload index, so replacing a page costs the same at 10k or 1M points.
- `ClientStore` (`sync.edges.client_store`): qdrant-client, for a real Qdrant server
  (`--qdrant-url`); its `:memory:` mode stands in for the server API in tests when no server
  is reachable.

Replacing a page is `delete every point with this url` then `upsert the new points`,
in that order, confirmed before returning (server: one `batch_update_points` request
with `wait=True`; edge: every `update` is in the shard's write-ahead log when it returns,
which is what makes it durable; segments are flushed on close).
`vectors_for_url` reads one page's stored vectors (keyed by embedder and exact chunk
text) so that a changed page re-embeds only the chunks whose text is new;
`reuse_keys_for_urls` reads the same keys for many pages without their vectors, so a pass
can learn which texts pages leaving it hold and read vectors only where a new page needs
them.
Every point also carries a BM25 keyword vector (`sync.edges.keywords`), computed from
its payload when it is written (so a page's keyword vectors are replaced with it, as one
unit), in a collection that has the sparse vector; an older collection without it is
written dense only until `add_keywords` (audit --fix) gives it one.
Every backend error is raised as `StoreError` (`sync.edges.store_errors`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Sequence

from ..errors import ConfigError
from .keywords import Sparse

__all__ = [
    "StoredPoint",
    "PageWrite",
    "Store",
    "INDEXED_FIELDS",
    "SEARCH_MODES",
    "KEYWORD_FIELDS",
    "PREFETCH_MIN",
    "RRF_K",
    "BOTH_FIRST",
    "REUSE_FIELDS",
    "KEY_FIELDS",
    "URLS_PER_READ",
    "prefetch_size",
    "check_collection_name",
]

INDEXED_FIELDS = ("url", "content_hash")
_COLLECTION_RE = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")


SEARCH_MODES = ("hybrid", "dense", "keyword")
KEYWORD_FIELDS = ("text", "title", "headings")  # what `keyword_text` reads
PREFETCH_MIN = 50  # candidates each side of a hybrid search brings to the fusion (at least)
RRF_K = 60  # reciprocal rank fusion's constant (Qdrant's default)
# The fused score of a hit both searches rank first: Qdrant's fusion (Edge, local and server
# alike) scores a hit 1/(k + rank) in each list, its rank counted from 0.
BOTH_FIRST = 2 / RRF_K


@dataclass
class StoredPoint:
    """One point as the store holds it: id, payload, dense vector and keyword vector."""

    id: str
    payload: dict[str, Any]
    vector: list[float] | None = None
    sparse: Sparse | None = None  # the keyword vector; None: computed from the payload on write


@dataclass
class PageWrite:
    """All of one page's new points: the unit a replace writes."""

    url: str
    points: list[StoredPoint] = field(default_factory=list)


class Store(Protocol):
    """The vector store a pass writes to: one collection, pages replaced as a unit."""

    collection: str

    def ensure_collection(self, dimension: int) -> None:
        """Create the collection (cosine, payload indexes) or check an existing one fits."""

    def exists(self) -> bool: ...

    def replace_pages(self, pages: Sequence[PageWrite]) -> int:
        """For each page: delete all its points, insert the new ones. Returns points deleted."""

    def delete_pages(self, urls: Sequence[str]) -> int:
        """Delete every point of these urls. Returns points deleted."""

    def upsert(self, points: Sequence[StoredPoint]) -> None: ...

    def scroll(
        self, *, with_vectors: bool = False, batch: int = 256, payload_fields: Sequence[str] | None = None
    ) -> Iterator[StoredPoint]:
        """Every point, in pages of `batch`; only `payload_fields` of the payload when given."""

    def scroll_payloads(
        self, fields: Sequence[str], *, batch: int = 1024
    ) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        """Every point's id and `fields` of its payload, no vectors: one list of
        `(id, payload)` per page of `batch` points. The lean read for whole-collection
        scans (the audit): no `StoredPoint` and no payload copy per point. A point
        without those fields has an empty payload dict. No collection: nothing."""

    def delete_points(self, ids: Sequence[str]) -> None:
        """Delete points by id (audit repairs)."""

    def set_payloads(self, items: Sequence[tuple[Any, dict[str, Any]]]) -> None:
        """For each `(point id, fields)`: set those payload fields on that point, its other
        fields and its vector kept (audit repairs of a point's `metadata`: nothing embedded)."""

    def vectors_for_url(self, url: str, *, embedder: str | None = None) -> dict[str, list[float]]:
        """The vectors of one url's points, keyed by `reuse_key(payload embedder, payload text)`.

        Only that url's points are read (through the url index), with just the `text` and
        `embedder` payload fields; with `embedder`, only points that embedder made. Points
        without a text or an embedder name are left out. No collection: empty, nothing created.
        """

    def reuse_keys_for_urls(self, urls: Sequence[str], *, embedder: str | None = None) -> Iterator[tuple[str, str]]:
        """`(reuse key, url)` of every point of these urls, no vectors (optional: read with
        hasattr by the engine). Through the url index, `text`, `embedder` and `url` payload
        fields only; with `embedder`, only that embedder's points; points without a text or
        an embedder name are left out. No collection: nothing, nothing created.
        """

    def count(self, url: str | None = None) -> int: ...

    # Optional (read with getattr by sync.commands.checks): `vector_size() -> int | None`, the
    # collection's vector size (None: no collection), and `location`, where it lives.

    def search(
        self, vector: Sequence[float] | None, limit: int = 5, *, keywords: Sparse | None = None, mode: str = "dense"
    ) -> list[tuple[float, dict[str, Any]]]:
        """The `limit` nearest points: `dense` by `vector`, `keyword` by `keywords` (BM25),
        `hybrid` both fused by reciprocal rank. Keyword modes need `has_keywords()`."""

    def has_keywords(self) -> bool:
        """The collection has the keyword (sparse) vector; False when it has none or is missing."""

    def keywords_missing(self) -> int:
        """Points without a keyword vector (every point when the collection lacks it)."""

    def add_keywords(self) -> int:
        """Give the collection the keyword vector and every point lacking one its vector, from
        its stored payload (nothing fetched or embedded; dense vectors kept). Returns points set."""

    def close(self) -> None: ...


REUSE_FIELDS = ("text", "embedder", "headings")
KEY_FIELDS = ("url", "text", "embedder", "headings")
URLS_PER_READ = 256  # urls in one `reuse_keys_for_urls` filter (one request each on a server)


def prefetch_size(limit: int) -> int:
    """Candidates each side of a hybrid search of `limit` hits brings to the fusion."""
    return max(PREFETCH_MIN, 4 * limit)


def check_collection_name(collection: str) -> None:
    """`ConfigError` for a name neither backend accepts (letters, digits, _ . - only)."""
    if not _COLLECTION_RE.match(collection):
        raise ConfigError(f"invalid collection name {collection!r} (letters, digits, _ . - only)")
