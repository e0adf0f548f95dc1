"""Checks a command makes before it reads or writes anything, so that a wrong collection
name or embedder is exit 2 with nothing written (CONTRACT.md), not a half-done repair or a
report of zero points.

- `require_collection`: a collection that does not exist is a mistake (a mistyped
  `--collection`, another `--qdrant-path`) unless nothing has been indexed yet: the page
  state exists and records no indexed page (a first pass that wrote nothing).
- `choose_embedder`: the embedder a command that embeds for an existing collection uses:
  the one asked for, else the one the collection's points name in their `embedder`
  payload (when pagesync has it), else the default; checked against the collection's
  vector size before anything is written.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from ..errors import CollectionMismatchError, CollectionNotFoundError
from ..edges.state_protocol import State
from ..edges.store import Store

__all__ = ["require_collection", "stored_embedder", "choose_embedder", "check_embedder_fits", "check_runs"]

log = logging.getLogger("pagesync")
_SAMPLE = 256  # points read to learn the collection's embedder


def _where(store: Store) -> str:
    return str(getattr(store, "location", "the store"))


def require_collection(store: Store, state: State | None = None) -> None:
    """CollectionNotFoundError unless the collection exists or `state` records no indexed page."""
    if store.exists():
        return
    if state is not None and not any(p.indexed for p in state.all_pages()):
        return  # nothing indexed yet: an empty collection is the truth
    raise CollectionNotFoundError(f"collection {store.collection!r} not found in {_where(store)} "
                                  f"(check --collection and --qdrant-path / --qdrant-url)")


def stored_embedder(store: Store) -> str | None:
    """The one `embedder` payload among the collection's first points, or None (no points
    name one, or several do). Points naming none (foreign ones) do not count."""
    names = {p.payload.get("embedder") for p in itertools.islice(
        store.scroll(batch=_SAMPLE, payload_fields=["embedder"]), _SAMPLE)}
    names = {n for n in names if isinstance(n, str)}
    return next(iter(names)) if len(names) == 1 else None


def check_embedder_fits(store: Store, embedder: Any) -> None:
    """CollectionMismatchError when the collection exists with another vector size."""
    size_of = getattr(store, "vector_size", None)
    size = size_of() if size_of is not None else None
    if size is not None and size != embedder.dimension:
        raise CollectionMismatchError(
            f"collection {store.collection!r} holds {size}-dimensional vectors but the embedder "
            f"{embedder.model_id!r} makes {embedder.dimension}; give --embedder with the one it was built with")


def check_runs(embedder: Any) -> None:
    """The embedder's own `check()`, when it has one: a model that is not installed, a
    remote server that does not answer or refuses the key, is exit 2 before anything else."""
    check = getattr(embedder, "check", None)
    if callable(check):
        check()


def choose_embedder(name: str | None, store: Store, *, why: str, dimensions: int | None = None,
                    concurrency: int | None = None) -> Any:
    """The embedder for a command that embeds for this existing collection (see module doc),
    checked to run here (`check()`: a remote server's key) and to fit it. `why` names the
    command in the info line; `dimensions` and `concurrency` are a remote embedder's."""
    from embedders import DEFAULT_NAMES, make_embedder, name_for_model_id

    if name is None and store.exists():
        model_id = stored_embedder(store)
        guessed = name_for_model_id(model_id)
        if guessed is not None and guessed not in DEFAULT_NAMES:  # the default needs no word
            log.info("%s: using embedder %r, the one the collection's points name (--embedder to choose)",
                     why, model_id)
            name = guessed
    emb = make_embedder(name, dimensions=dimensions, concurrency=concurrency)
    check_runs(emb)
    check_embedder_fits(store, emb)
    return emb
