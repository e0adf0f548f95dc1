"""Where a command's collection and page state are opened: the store the options name, the
state `--state` names beside it, and `store_and_state`, both for one command's body, the store
closed after the state on every way out."""

from __future__ import annotations

import logging
import math
import os
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator

from ..errors import ConfigError, StateUnusableError

__all__ = [
    "QDRANT_STATE",
    "NO_STATE",
    "STORE_WAIT_ENV",
    "STORE_WAIT_S",
    "store_wait",
    "open_store",
    "open_state",
    "store_and_state",
    "is_fresh",
]

log = logging.getLogger("pagesync")

QDRANT_STATE = "qdrant"  # the --state value that selects the Qdrant state
NO_STATE = "no page state {where}: run 'pagesync run' first"


STORE_WAIT_ENV = "PAGESYNC_STORE_WAIT"
STORE_WAIT_S = 10.0


def store_wait() -> float:
    """Seconds a command waits for an embedded store another process has open (one opener
    at a time): `PAGESYNC_STORE_WAIT`, else 10."""
    raw = os.environ.get(STORE_WAIT_ENV, "").strip()
    if not raw:
        return STORE_WAIT_S
    try:
        wait = float(raw)
    except ValueError:
        wait = math.nan
    if not (math.isfinite(wait) and wait >= 0):
        raise ConfigError(f"{STORE_WAIT_ENV}={raw!r}: expected seconds, a number >= 0")
    return wait


def open_store(
    collection: str,
    qdrant_url: str | None,
    api_key: str | None,
    qdrant_path: Path,
    lock_wait: float | None = None,
    reading: bool = False,
):
    """The store the options name. `reading`: the command only reads it, so an embedded
    shard a pass is writing is refused at once (`EdgeStore`), not waited for."""
    from ..edges.client_store import ClientStore
    from ..edges.edge_store import EdgeStore

    if qdrant_url:
        return ClientStore.connect(qdrant_url, collection, api_key=api_key)
    return EdgeStore(
        qdrant_path, collection, lock_wait=store_wait() if lock_wait is None else lock_wait, reading=reading
    )


def open_state(
    spec: str,
    store,
    *,
    missing: str | None = None,
    dry_run: bool = False,
    optional: bool = False,
    reading: bool = False,
):
    """The page state --state names: a SQLite file, or (the literal `qdrant`) the Qdrant state
    beside the store's collection, which needs a qdrant-client store (--qdrant-url).

    When none exists yet: `missing` (with `{where}`) is raised as a ConfigError if given; a
    dry run gets a throw-away in-memory state (it writes nothing, not even a state); with
    `optional`, None (a nullcontext, for `with`). `reading` (a command that only reads it):
    a SQLite state this user may read but not write is opened read-only, with a warning."""
    from ..edges.state import StateDB

    if spec == QDRANT_STATE:
        from ..edges.qdrant_state import QdrantState

        qs = QdrantState.for_store(store, create=False)  # ConfigError with the embedded store
        exists, where = qs.exists(), f"in Qdrant (collection {qs.collection!r})"
    else:
        try:
            exists, where = Path(spec).exists(), f"at {spec}"
        except OSError as exc:  # a directory this user may not enter
            from ..edges.state import unusable

            raise unusable(Path(spec), exc) from None
    if not exists:
        if missing:
            raise ConfigError(missing.format(where=where))
        if dry_run:
            return StateDB(":memory:")
        if optional:
            return nullcontext()
    if spec == QDRANT_STATE:
        qs.ensure()
        return qs
    try:
        return StateDB(spec)
    except StateUnusableError:
        from ..edges.state import access_problem

        problem = access_problem(Path(spec)) if reading else None
        if problem is None:
            raise
        st = StateDB(spec, read_only=True)  # raises the same line when it cannot be read either
        log.warning("warning: page state %s opened read-only: %s", spec, problem)
        return st


@contextmanager
def store_and_state(
    collection: str,
    qdrant_url: str | None,
    api_key: str | None,
    qdrant_path: Path,
    state: str,
    *,
    lock_wait: float | None = None,
    reading: bool = False,
    state_reading: bool = False,
    missing: str | None = None,
) -> Iterator[tuple[Any, Any]]:
    """`(store, state)` for one command's body: the store the options name (`open_store`, with
    `lock_wait` and `reading`), then the page state beside it (`open_state`, with `missing`
    and `state_reading` as its `reading`). The state is closed before the store, and the store
    whatever happens."""
    store = open_store(collection, qdrant_url, api_key, qdrant_path, lock_wait=lock_wait, reading=reading)
    try:
        with open_state(state, store, missing=missing, reading=state_reading) as st:
            yield store, st
    finally:
        store.close()


def is_fresh(state: str, store) -> bool:
    """No collection and no SQLite state yet: nothing can name a model but the default."""
    try:
        return state != QDRANT_STATE and not store.exists() and not Path(state).exists()
    except OSError:  # a state path this user may not look at: `open_state` says so
        return False
