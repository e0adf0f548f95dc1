"""Preflight: before anything is fetched, the collection and the model against the state.

A model that cannot run, a collection of another vector size or another model, or a
collection missing or empty while the state records indexed pages (a mistyped name as
likely as a lost collection) stop the pass here (exit 2), before anything is created.
With --rebuild a lost collection is rebuilt (`_start_rebuild`); a collection that lost
some points has the pages that lack them marked pending and rewritten (`check_points`).
A collection is created at the pass's first write (`ready_collection`), so a pass that
writes nothing creates none; one that holds no points decides no model (it is replaced).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from embedders.base import Embedder

from ..errors import CollectionMismatchError
from ..core.model_change import model_change_refusal
from ..core.plural import plural
from ..core.points_check import (
    MISSING_MARK,
    REBUILD_MARK,
    lost_refusal,
    mark_for_rewrite,
    points_per_url,
    recorded_chunks,
    short_pages,
)
from ..core.page import PageState
from ..edges.state_protocol import State
from ..edges.store import Store
from ..edges.stored_model import can_drop, check_creatable, drop_empty_collection, stored_embedder, stored_size
from .outcomes import Outcomes

__all__ = ["CollectionCheck", "Preflight"]

log = logging.getLogger("pagesync")


@dataclass(frozen=True)
class CollectionCheck:
    """What preflight found: the collection was missing or empty (`store_was_empty`), the
    pages it is rebuilding (`rebuilding`: indexed pages whose points it lost, read and
    rewritten whatever their hash says) and those short of points (`short`: rewritten).
    `points_checked`: the store's point count was checked against the state already."""

    store_was_empty: bool = False
    rebuilding: frozenset[str] = frozenset()
    short: frozenset[str] = frozenset()
    points_checked: bool = False


class Preflight:
    """The pass's checks of the collection and the model before the first request, and the
    collection's creation at the first write (`ready_collection`). `rebuild`: a lost
    collection may be rebuilt (--rebuild); `last_report`: the last recorded pass's."""

    def __init__(
        self,
        store: Store,
        state: State,
        embedder: Embedder,
        outcomes: Outcomes,
        *,
        rebuild: bool,
        repair: bool,
        last_report: dict,
    ):
        self.store, self.state, self.embedder, self.outcomes = store, state, embedder, outcomes
        self.report, self.dry_run = outcomes.report, outcomes.dry_run
        self.allow_rebuild, self.repair, self.last_report = rebuild, repair, last_report
        self.store_was_empty = False  # the collection was missing or empty when the pass began
        self.points_checked = False  # the store's point count was checked against the state (`check_points`)
        # Indexed pages whose points the collection lost (missing or empty at the pass's
        # start): fetched unconditionally and rewritten this pass (`_start_rebuild`).
        self.rebuilding: frozenset[str] = frozenset()
        self.short: frozenset[str] = frozenset()  # pages `check_points` found short at the start: visited this pass
        # The collection fits the embedder and exists (else `ready_collection` makes it at the
        # first write); `replace_empty`: it exists with no points, made for another model.
        self.collection_ready = False
        self.replace_empty = False

    def run(self) -> CollectionCheck:
        """Before anything is fetched: the model can run, the collection is the one the state
        describes (not lost, or rebuilt with --rebuild; its vector size and model match), and
        its points are all there (a short page is rewritten this pass)."""
        self._check_embedder_runs()  # before any request: a model that cannot load is exit 2
        # Before ensure_collection, which would create a missing collection.
        lost = not self.repair and self._collection_empty()
        self.store_was_empty = lost
        lost_pages = self._lost_pages() if lost else []
        if lost_pages and not self.allow_rebuild and not self._rebuild_under_way(lost_pages):
            # A mistyped name or a lost collection: refused before anything is created.
            raise lost_refusal(self.store.collection, str(getattr(self.store, "location", "the store")), lost_pages)
        # Before anything is fetched or written: another model (or vector size) is exit 2.
        self._check_embedder()
        if lost_pages and not self.dry_run:
            self.ready_collection()  # a rebuild makes its collection first: a cut-short one goes on with it
        elif self.store.exists() and not self.replace_empty:
            self.store.ensure_collection(self.embedder.dimension)  # checks it; creates nothing
            self.collection_ready = True
        elif not self.dry_run:
            check_creatable(self.store)  # a --qdrant-path that cannot hold one: exit 2 before any request
        if lost_pages:
            self._start_rebuild(lost_pages)
        elif not self.repair:
            self.check_points(at_start=True)
        return CollectionCheck(self.store_was_empty, self.rebuilding, self.short, self.points_checked)

    def _check_embedder_runs(self) -> None:
        """An embedder that can tell it cannot run here (`check()`: its package or model is
        not installed) says so before the first request, not after every page was fetched."""
        check = getattr(self.embedder, "check", None)
        if callable(check):
            check()

    def _check_embedder(self) -> None:
        """Refuse a pass whose model is not the one the collection's vectors came from
        (`sync.core.model_change`): another vector size, or another model of the same size,
        --full or not. The model is the last pass's into this collection, as the state
        records it; without such a record (a new state beside an existing collection) the
        one its points name. A collection without points decides nothing: a pass that
        writes replaces it (`replace_empty`)."""
        from embedders import name_for_model_id

        emb, last = self.embedder, self.last_report
        was = last.get("embedder") if last.get("collection") in (None, self.store.collection) else None
        if not isinstance(was, str) or not was:
            was = None
            if not self.store_was_empty and self.store.exists():
                was = stored_embedder(self.store)  # rare: reads a few points' payload
        size = stored_size(self.store)  # None without a collection
        name = getattr(emb, "spec", None) or name_for_model_id(emb.model_id) or emb.model_id
        refusal = model_change_refusal(
            self.store.collection,
            was=was,
            was_size=size,
            model_id=emb.model_id,
            dimension=emb.dimension,
            name=name,
            was_name=name_for_model_id(was),
        )
        if refusal is None:
            return
        # Counted only now, to refuse: an embedded shard is loaded for it.
        if self.store.exists() and self.store.count() > 0:
            raise CollectionMismatchError(refusal)
        self.replace_empty = size is not None and size != emb.dimension
        if self.replace_empty and not can_drop(self.store):
            raise CollectionMismatchError(
                f"{refusal} (it holds no points, but is an alias pagesync cannot "
                f"make anew: delete it, or give another --collection)"
            )
        if self.store.exists():
            log.info(
                "collection %r holds no points: %s",
                self.store.collection,
                "the pass's first write makes it anew for this embedder" if self.replace_empty else "no model to keep",
            )

    def ready_collection(self) -> None:
        """Before the pass's first write: the collection exists for this embedder (created
        now; an empty one made for another vector size is dropped and made anew)."""
        if self.collection_ready:
            return
        if self.replace_empty:
            drop_empty_collection(self.store)
            self.replace_empty = False
        self.store.ensure_collection(self.embedder.dimension)
        self.collection_ready = True

    def _collection_empty(self) -> bool:
        """Whether the collection is missing or holds no points, cheaply: existence and a
        count, never a scan. A store may answer through an optional `is_empty()` (True,
        False, or None for "not known without loading it": the embedded store does not
        load a shard for this); without one, `exists()` and `count()`."""
        hint = getattr(self.store, "is_empty", None)
        if hint is not None:
            return hint() is True
        return not self.store.exists() or self.store.count() == 0

    def _lost_pages(self) -> list[PageState]:
        """The collection is missing or empty: the indexed pages with chunks the state
        records are the points it lost (or, under a mistyped name, never held)."""
        return [p for p in self.state.all_pages() if p.indexed and p.chunk_count > 0]

    def _rebuild_under_way(self, lost: list[PageState]) -> bool:
        """A rebuild cut short before its first write: the collection it created exists,
        empty, and every lost page still has its rebuild mark. The next pass goes on with it."""
        return self.store.exists() and all(p.pending_hash == REBUILD_MARK for p in lost)

    def _start_rebuild(self, lost: list[PageState]) -> None:
        """Rebuild a lost collection (PassConfig.rebuild): every lost page is fetched without
        validators (a 304 must not hide it) and rewritten whatever its hash says, past
        --max-fetches like repairs. They are marked pending in one state write before the
        first store write, so a pass killed halfway leaves the unwritten ones due and
        rewritten by the next pass (`sync.core.points_check`)."""
        self.rebuilding = frozenset(p.url for p in lost)
        self.points_checked = True  # the whole collection is rewritten: nothing to count
        chunks = sum(p.chunk_count for p in lost)
        self.report.collection_lost = True
        self.report.pages_rebuilt = len(lost)
        log.warning(
            "collection %r is missing or empty but the state records %s of %s: %s them this pass",
            self.store.collection,
            plural(chunks, "chunk"),
            plural(len(lost), "page"),
            "would re-index" if self.dry_run else "re-indexing",
        )
        self.outcomes.save(mark_for_rewrite(lost, REBUILD_MARK))

    def check_points(self, *, at_start: bool) -> None:
        """The store's exact point count against the chunks the state records for its
        settled pages: a collection that lost points (deleted by hand or by another program,
        a restored backup) is reported, and the pages that lack points are marked pending
        so they are rewritten unconditionally: this pass when checked at its start (a
        server answers a count cheaply), else the next one (an embedded shard is counted
        only once the pass has opened it). Points beyond the record (pending writes,
        foreign points) are the audit's matter, not this check's."""
        count_of = getattr(self.store, "count_if_open", None)
        stored = count_of() if count_of is not None else self.store.count()
        if stored is None:
            return
        self.points_checked = True
        summed = getattr(self.state, "recorded_chunks", None)
        recorded = summed() if summed is not None else recorded_chunks(self.state.all_pages())
        if stored >= recorded:
            return
        missing = short_pages(self.state.all_pages(), points_per_url(self.store), stored, recorded)
        if not missing.pages:
            return
        self.report.points_missing = missing.points
        self.report.pages_points_missing = len(missing.pages)
        when = "rewriting them this pass" if at_start else "the next pass rewrites them"
        if self.dry_run:
            when = "a pass would rewrite them"
        log.warning(
            "collection %r holds %s but the state records %s: %s of %s are missing; %s",
            self.store.collection,
            plural(stored, "point"),
            plural(recorded, "chunk"),
            plural(missing.points, "point"),
            plural(len(missing.pages), "page"),
            when,
        )
        self.outcomes.save(mark_for_rewrite(missing.pages, MISSING_MARK))
        if at_start:
            self.short = frozenset(p.url for p in missing.pages)
