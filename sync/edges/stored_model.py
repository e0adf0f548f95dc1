"""What model a collection's vectors came from, asked of the store itself: the `embedder`
payload its points carry, and its vector size. For the checks that refuse to mix models
(`sync.core.model_change`) when no record says; and the drop of a collection that holds no
points, made for another vector size (it decides no model)."""

from __future__ import annotations

import itertools
import os
import tempfile

from ..errors import StoreUnavailableError
from .client_store import ClientStore
from .edge_store import EdgeStore
from .store import Store

__all__ = ["stored_embedder", "stored_size", "drop_empty_collection", "can_drop", "check_creatable", "SAMPLE"]

SAMPLE = 256  # points read to learn the collection's embedder


def stored_embedder(store: Store) -> str | None:
    """The one `embedder` payload among the collection's first points, or None (no points
    name one, or several do). Points naming none (foreign ones) do not count."""
    names = {
        p.payload.get("embedder")
        for p in itertools.islice(store.scroll(batch=SAMPLE, payload_fields=["embedder"]), SAMPLE)
    }
    names = {n for n in names if isinstance(n, str)}
    return next(iter(names)) if len(names) == 1 else None


def stored_size(store: Store) -> int | None:
    """The collection's vector size, when the store can tell without loading it (None: no
    collection, or a store that cannot say)."""
    size_of = getattr(store, "vector_size", None)
    return size_of() if size_of is not None else None


def can_drop(store: Store) -> bool:
    """Whether `drop_empty_collection` can replace this store's collection: an embedded
    one (through its alias too), or a server's that is no alias (Qdrant cannot give a new
    collection an alias's name)."""
    if isinstance(store, EdgeStore):
        return True
    if isinstance(store, ClientStore):
        with store._guard("listing aliases"):
            aliases = {a.alias_name for a in store.client.get_aliases().aliases}
        return store.collection not in aliases
    return False


def drop_empty_collection(store: Store) -> None:
    """Delete the collection the caller found holding no points (`can_drop` said it may),
    so that `ensure_collection` makes it anew with another vector size."""
    if isinstance(store, EdgeStore):
        from .catalog import EdgeCatalog

        name = store.dir.name  # the alias's target, resolved before the shard is let go
        store.close()  # the shard and its lock: the directory is renamed away
        EdgeCatalog(store.root).drop(name)
    elif isinstance(store, ClientStore):
        with store._guard("delete collection"):
            store.client.delete_collection(store.collection)


def check_creatable(store: Store) -> None:
    """StoreUnavailableError (exit 2) when an embedded collection that does not exist yet could
    not be created where --qdrant-path points (a plain file, a path that cannot hold a
    directory), found before the pass fetches anything although it creates the collection
    only at its first write. A directory is made and removed there to learn it (root passes
    every permission check, not every mkdir). A server's store says so on its first request."""
    if not isinstance(store, EdgeStore) or store.exists():
        return
    path = store.dir
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise StoreUnavailableError(f"embedded store ({path}): cannot hold a collection: {probe} is not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".pagesync-probe-", dir=probe))
    except OSError as exc:
        raise StoreUnavailableError(
            f"embedded store ({path}): cannot hold a collection: {exc.strerror or exc} in {probe}"
        ) from None
