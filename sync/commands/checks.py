"""Checks a command makes before it reads or writes anything, so that a wrong collection
name or embedder is exit 2 with nothing written (docs/commands/index.md), not a half-done repair or a
report of zero points.

- `require_collection`: a collection that does not exist is a mistake (a mistyped
  `--collection`, another `--qdrant-path`) unless nothing has been indexed yet: the page
  state exists and records no indexed page (a first pass that wrote nothing).
- `choose_embedder`: the embedder a command that embeds for an existing collection uses:
  the one asked for, else the one the collection's points name in their `embedder`
  payload (exit 2 when pagesync cannot make that one), else the default; checked against
  the collection's vector size and the points' model before anything is written.
- `collection_embedder`: the embedder `run` uses when none is named: the collection's own
  (the last pass's into it, else its points'), as `search` picks it; exit 2 when that one
  cannot run here. The model is checked against the collection in the pass's preflight.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import CollectionMismatchError, CollectionNotFoundError, ConfigError, EmbedderError
from ..edges.state_protocol import State
from ..edges.store import Store
from ..edges.stored_model import stored_embedder, stored_size

__all__ = [
    "require_collection",
    "stored_embedder",
    "choose_embedder",
    "check_embedder_fits",
    "check_runs",
    "collection_embedder",
]

log = logging.getLogger("pagesync")


def _where(store: Store) -> str:
    return str(getattr(store, "location", "the store"))


def require_collection(store: Store, state: State | None = None) -> None:
    """CollectionNotFoundError unless the collection exists or `state` records no indexed page."""
    if store.exists():
        return
    if state is not None and not any(p.indexed for p in state.all_pages()):
        return  # nothing indexed yet: an empty collection is the truth
    raise CollectionNotFoundError(
        f"collection {store.collection!r} not found in {_where(store)} "
        f"(check --collection and --qdrant-path / --qdrant-url)"
    )


def check_embedder_fits(store: Store, embedder: Any, *, model_id: str | None = None) -> None:
    """CollectionMismatchError when the collection exists with another vector size, or its
    points name another model (`model_id`, when the caller has read it)."""
    from embedders import name_for_model_id

    size = stored_size(store)
    of = f" of {model_id!r}" if model_id else ""
    if size is not None and size != embedder.dimension:
        what = f"holds {size}-dimensional vectors{of} but the embedder {embedder.model_id!r} makes {embedder.dimension}"
    elif model_id is not None and model_id != embedder.model_id:
        what = f"holds vectors{of} but the embedder {embedder.model_id!r} is another model"
    else:
        return
    hint = name_for_model_id(model_id)
    raise CollectionMismatchError(
        f"collection {store.collection!r} {what}; give --embedder {hint or 'with the one it was built with'}"
    )


def check_runs(embedder: Any) -> None:
    """The embedder's own `check()`, when it has one: a model that is not installed, a
    remote server that does not answer or refuses the key, is exit 2 before anything else."""
    check = getattr(embedder, "check", None)
    if callable(check):
        check()


def choose_embedder(
    name: str | None, store: Store, *, why: str, dimensions: int | None = None, concurrency: int | None = None
) -> Any:
    """The embedder for a command that embeds for this existing collection (see module doc),
    checked to run here (`check()`: a remote server's key) and to fit it (vector size, and the
    model the points name). `why` names the command in the info line; `dimensions` and
    `concurrency` are a remote embedder's."""
    from embedders import DEFAULT_NAMES, make_embedder, name_for_model_id

    model_id = stored_embedder(store) if store.exists() else None
    if name is None and model_id is not None:
        guessed = name_for_model_id(model_id)
        if guessed is None:  # e.g. a model from a folder: its id does not say where the folder is
            raise CollectionMismatchError(
                f"collection {store.collection!r} holds vectors of {model_id!r}, which pagesync cannot find by that "
                f"name: give --embedder (st:PATH for a model in a folder)"
            )
        if guessed not in DEFAULT_NAMES:  # the default needs no word
            log.info(
                "%s: using embedder %r, the one the collection's points name (--embedder to choose)", why, model_id
            )
            name = guessed
    emb = make_embedder(name, dimensions=dimensions, concurrency=concurrency)
    try:
        check_runs(emb)
        check_embedder_fits(store, emb, model_id=model_id)
    except BaseException:
        close = getattr(emb, "close", None)  # a remote embedder's client: not left open by a refusal
        if callable(close):
            close()
        raise
    return emb


def collection_embedder(
    store: Store, last_run: dict | None, *, dimensions: int | None = None, concurrency: int | None = None
) -> Any:
    """The embedder of a `run` given no --embedder (nor the `embedder` key), checked to run:
    the model of the last pass recorded into this collection (`last_run`, the state's; a
    reindex records its new one), else the one its points name (an embedded shard is loaded
    for it), else the default. ConfigError (exit 2) when pagesync cannot make that model
    here, saying which it is and how to name one."""
    from embedders import DEFAULT_NAMES, make_embedder, name_for_model_id

    last = last_run or {}
    model_id = last.get("embedder") if last.get("collection") in (None, store.collection) else None
    if not isinstance(model_id, str) or not model_id:
        model_id = stored_embedder(store) if store.exists() else None
    name = None
    if model_id is not None:
        name = name_for_model_id(model_id)
        if name is None:  # e.g. a model from a folder: its id does not say where the folder is
            raise ConfigError(
                f"collection {store.collection!r} holds vectors of {model_id!r}, which pagesync cannot "
                f"find by that name: give --embedder (st:PATH for a model in a folder), or set "
                f"`embedder` in pagesync.toml"
            )
        if name not in DEFAULT_NAMES:  # the default needs no word
            log.info("run: using embedder %r, the collection's (--embedder to choose)", model_id)
    try:
        emb = make_embedder(name, dimensions=dimensions, concurrency=concurrency)
        check_runs(emb)
    except (ConfigError, EmbedderError) as exc:
        if model_id is None:
            raise
        raise ConfigError(
            f"collection {store.collection!r} holds vectors of {model_id!r}, which cannot run here "
            f"({exc}): give --embedder {name} once it can, or set `embedder` in pagesync.toml; "
            f"another model goes through `pagesync reindex --embedder NEW`"
        ) from None
    return emb
