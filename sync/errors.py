"""One exception tree for pagesync.

Library code raises only these; httpx and qdrant errors are mapped at the boundary
(fetcher, store) so callers and the CLI never need to know which library failed.
"""

from __future__ import annotations

__all__ = [
    "PagesyncError",
    "ConfigError",
    "StateLockedError",
    "StateError",
    "StateLeaseLostError",
    "StateUnusableError",
    "StoreError",
    "StoreHeldError",
    "StoreReadOnlyError",
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "CollectionLostError",
    "StoreUnavailableError",
    "FetchError",
    "EmbedderError",
    "EmbedderUnavailableError",
    "EmbedBatchError",
    "SitemapError",
    "NotASitemapError",
    "StoreFullError",
]


class PagesyncError(Exception):
    """Base of every error pagesync raises on purpose."""

    exit_code = 1


class ConfigError(PagesyncError):
    """Bad usage or configuration: nothing was written (exit 2)."""

    exit_code = 2


class StateLockedError(ConfigError):
    """Another pass holds the page-state lock."""


class StateError(PagesyncError):
    """The page-state database could not be read or written."""


class StateLeaseLostError(StateError):
    """A pass's lease on the Qdrant state was taken over mid-pass (it stalled past the
    lease's expiry, or a racing pass overwrote it): the pass stops writing at once."""


class StateUnusableError(StateError, ConfigError):
    """The page state cannot be used at all: its path cannot hold a database, the file is
    not a database or is corrupt, or (the Qdrant state) the server does not answer. An
    environment problem, not a page failure: exit 2 (and a pass stops before writing)."""


class StoreError(PagesyncError):
    """The vector store (embedded or server) refused or failed an operation."""


class StoreUnavailableError(StoreError, ConfigError):
    """The vector store cannot be reached or opened: a server that does not answer or
    refuses the API key, an embedded shard held by another process, a --qdrant-path that
    cannot hold a shard. Exit 2 when it stops a command; mid-pass, a write it fails is a
    failed page like any other StoreError."""


class StoreFullError(StoreError):
    """The disk under the embedded store is (about to be) full. A pass stops at the first
    one (exit 1: it did not finish its pages) rather than fail every page that follows;
    what it wrote is consistent and the next pass, with space freed, resumes."""


class StoreHeldError(StoreUnavailableError):
    """The embedded shard is held by another process (a pass running): read-only reports
    such as `status` go on without it."""


class StoreReadOnlyError(StoreUnavailableError):
    """The embedded shard is not writable for this process (permissions, a read-only
    mount): Qdrant Edge opens a shard read-write even to read it, so nothing can use it
    in place. `status` goes on without it, as with a held shard."""


class CollectionMismatchError(ConfigError):
    """The collection exists with a vector size or distance the embedder cannot fill."""


class CollectionNotFoundError(ConfigError):
    """A command that reads a collection was pointed at one that does not exist."""


class CollectionLostError(ConfigError):
    """A pass into a collection that is missing or empty while the page state records
    indexed pages (a mistyped name, or a lost collection), without `rebuild`: nothing was
    created or written."""


class FetchError(PagesyncError):
    """A page or sitemap could not be fetched (timeout, connection error, 5xx, ...)."""


class SitemapError(FetchError):
    """A sitemap was fetched but could not be parsed."""


class NotASitemapError(SitemapError):
    """What a sitemap URL answered is no sitemap at all (an HTML page): on a first run, a
    --sitemap pointing there is a configuration error; on a tracked site, a sitemap error
    like any other (nothing is purged)."""


class EmbedderError(PagesyncError):
    """The embedder could not be loaded or failed on a batch."""


class EmbedBatchError(EmbedderError):
    """Part of one embed call failed (a remote embedder's request that kept failing):
    `vectors` holds every text's vector, None where its request failed, and `errors` the
    failed texts' messages by index. The pass writes the pages whose texts all have a
    vector and fails only the others (their old points kept, retried next pass)."""

    def __init__(self, message: str, vectors: list, errors: dict[int, str]):
        super().__init__(message)
        self.vectors, self.errors = vectors, errors


class EmbedderUnavailableError(EmbedderError, ConfigError):
    """The embedder cannot run here at all (its package or model is not installed): found
    before any request, exit 2."""
