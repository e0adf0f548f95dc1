"""Write: a page's replace in its crash-safe order.

`Writer.write` carries out steps 2-4 of the pass's write order (`sync.engine`): mark the
pages `pending_hash`, replace their points in the store and wait for its confirmation, then
record the new hash, validators and schedule. `build_points` lays out a page's points as
the contract says.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Sequence

from chunking import GUIDE

from ..core.decision import Action, Decision
from ..core.ids import chunk_id, point_id
from ..core.page import LIVE, PageState
from ..core.payload import METADATA_KEY, point_metadata
from ..edges.state_protocol import State, TextKeeper
from ..edges.store import PageWrite, Store, StoredPoint
from ..errors import PagesyncError, StoreFullError
from .outcomes import Outcomes
from .pending import PendingPage

__all__ = ["Writer", "build_points"]


def build_points(
    url: str,
    chunks: Sequence[str],
    vectors: Sequence[Sequence[float]],
    *,
    hash_: str,
    title: str,
    fetched_at: str,
    embedder_id: str,
    headings: Sequence[Sequence[str]] | None = None,
    page_kind: str = GUIDE,
) -> list[StoredPoint]:
    """A page's points, exactly as the contract lays out ids and payload (its `metadata`
    object included: `sync.core.payload`). `headings`: each chunk's heading path, the one
    its vector was embedded under (none: embedded as the text alone); `page_kind`: a guide
    or an API reference (`chunking.extract.PAGE_KINDS`)."""
    out = []
    paths = list(headings) if headings is not None else [() for _ in chunks]
    for i, (text, vec, path) in enumerate(zip(chunks, vectors, paths, strict=True)):
        cid = chunk_id(url, i)
        payload = {
            "url": url,
            "chunk_id": cid,
            "chunk_index": i,
            "content_hash": hash_,
            "text": text,
            "title": title,
            "fetched_at": fetched_at,
            "embedder": embedder_id,
            "headings": list(path),
            "page_kind": page_kind,
        }
        payload[METADATA_KEY] = point_metadata(payload)  # what LangChain reads as a Document's metadata
        out.append(StoredPoint(point_id(cid), payload, list(vec)))
    return out


class Writer:
    """Replaces pages in the store as units and records them (steps 2-4 of the write order).

    `ready_collection` is called before the first store write (the collection is made
    then: a pass that writes nothing creates none); `reschedule(page, changed)` sets a
    written page's next visit; `fingerprint_for(url)` is the pipeline fingerprint its
    points are recorded under. `keep_texts`: page texts go to the state for `reindex`.
    """

    def __init__(
        self,
        store: Store,
        state: State,
        outcomes: Outcomes,
        *,
        embedder_id: str,
        fetched_at: str,
        ready_collection: Callable[[], None],
        reschedule: Callable[[PageState, bool | None], None],
        fingerprint_for: Callable[[str], str],
        keep_texts: bool,
    ):
        self.store, self.state, self.outcomes = store, state, outcomes
        self.embedder_id, self.fetched_at = embedder_id, fetched_at
        self.ready_collection, self.reschedule, self.fingerprint_for = ready_collection, reschedule, fingerprint_for
        # A state that keeps texts (`TextKeeper`), unless this pass keeps nothing (a dry run).
        self._texts = state if keep_texts and isinstance(state, TextKeeper) else None
        self._held: dict[str, str] = {}  # url -> extracted text of a page on its way to a write

    def hold(self, item: PendingPage) -> None:
        """Keep a queued page's text until its write is confirmed (then it goes to the state)."""
        if self._texts is not None:
            self._held[item.page.url] = item.markdown

    def would_write(self, items: Sequence[PendingPage]) -> None:
        """A dry run: count and list what `write` would have done (nothing is written)."""
        for item in items:
            self.outcomes.record(item.page, item.decision, len(item.chunks), item.reused)

    def fail(self, page: PageState, message: str) -> None:
        """A page whose vectors could not be had: its old points and state stay, retried later."""
        self.outcomes.fail(page, message)

    async def write(self, items: Sequence[PendingPage]) -> None:
        """Mark `items` pending, replace their points, then record their new hash."""
        outcomes, report = self.outcomes, self.outcomes.report
        writes = []
        for item in items:
            item.page.pending_hash = item.hash_
            writes.append(
                PageWrite(
                    item.page.url,
                    build_points(
                        item.page.url,
                        item.chunks,
                        item.vectors_ready(),
                        hash_=item.hash_,
                        title=item.title,
                        fetched_at=self.fetched_at,
                        embedder_id=self.embedder_id,
                        headings=item.headings,
                        page_kind=item.page_kind,
                    ),
                )
            )
        outcomes.save([i.page for i in items])
        try:
            # After the pending marks: a crash between leaves them, and the next pass repairs.
            await asyncio.to_thread(self.ready_collection)
            deleted = await asyncio.to_thread(self.store.replace_pages, writes)
        except PagesyncError as exc:
            for item in items:  # pending mark stays: the next pass revisits these pages
                item.page.failures += 1
                item.page.last_error = str(exc)
                report.error(item.page.url, str(exc))
                outcomes.record(item.page, Decision(Action.FAIL, f"store write failed: {exc}"))
            outcomes.save([i.page for i in items])
            if isinstance(exc, StoreFullError):
                raise  # every later write would fail alike: the pass stops, one line (exit 1)
            return
        report.chunks_deleted += deleted
        report.chunks_written += sum(len(w.points) for w in writes)
        # Only now, with the store's confirmation, does the state take the new hash.
        for item in items:
            p = item.page
            first = item.decision.action is Action.ADD or p.content_hash is None
            # Under a new pipeline the old hash says nothing about the text: no change seen.
            fingerprint = self.fingerprint_for(p.url)
            same_pipeline = p.fingerprint == fingerprint
            self.reschedule(p, None if first else same_pipeline and p.content_hash != item.hash_)
            p.status, p.content_hash, p.fingerprint, p.pending_hash = LIVE, item.hash_, fingerprint, None
            p.moved_to = None
            p.chunk_count, p.title, p.text_chars = len(item.chunks), item.title, len(item.markdown)
            p.page_kind = item.page_kind
            p.etag, p.last_modified = item.result.validators.etag, item.result.validators.last_modified
            p.last_changed_at = outcomes.now
            p.failures, p.last_error = 0, None
            outcomes.record(p, item.decision, len(item.chunks), item.reused)
        outcomes.save([i.page for i in items])
        self._keep_texts(items)

    def _keep_texts(self, items: Sequence[PendingPage]) -> None:
        """The written pages' texts, once the store confirmed them."""
        texts = [(i.page.url, i.hash_, self._held.pop(i.page.url)) for i in items if i.page.url in self._held]
        if texts and self._texts is not None:
            self._texts.put_texts(texts)
