"""What model a collection's vectors came from, asked of the store itself: the `embedder`
payload its points carry, and its vector size. For the checks that refuse to mix models
(`sync.core.model_change`) when no record says."""

from __future__ import annotations

import itertools

from .store import Store

__all__ = ["stored_embedder", "stored_size", "SAMPLE"]

SAMPLE = 256  # points read to learn the collection's embedder


def stored_embedder(store: Store) -> str | None:
    """The one `embedder` payload among the collection's first points, or None (no points
    name one, or several do). Points naming none (foreign ones) do not count."""
    names = {p.payload.get("embedder") for p in itertools.islice(
        store.scroll(batch=SAMPLE, payload_fields=["embedder"]), SAMPLE)}
    names = {n for n in names if isinstance(n, str)}
    return next(iter(names)) if len(names) == 1 else None


def stored_size(store: Store) -> int | None:
    """The collection's vector size, when the store can tell without loading it (None: no
    collection, or a store that cannot say)."""
    size_of = getattr(store, "vector_size", None)
    return size_of() if size_of is not None else None
