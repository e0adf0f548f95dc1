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
    "StoreError",
    "CollectionMismatchError",
    "FetchError",
    "EmbedderError",
    "SitemapError",
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


class StoreError(PagesyncError):
    """The vector store (embedded or server) refused or failed an operation."""


class CollectionMismatchError(ConfigError):
    """The collection exists with a vector size or distance the embedder cannot fill."""


class FetchError(PagesyncError):
    """A page or sitemap could not be fetched (timeout, connection error, 5xx, ...)."""


class SitemapError(FetchError):
    """A sitemap was fetched but could not be parsed."""


class EmbedderError(PagesyncError):
    """The embedder could not be loaded or failed on a batch."""
