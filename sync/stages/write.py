"""Write: a page's replace in its crash-safe order, and the state and report rows of every outcome.

`WriteStage._write` carries out steps 2-4 of the pass's write order (`sync.engine`): mark
the pages `pending_hash`, replace their points in the store and wait for its confirmation,
then record the new hash, validators and schedule. `build_points` lays out a page's points
as the contract says. Failures and skips are recorded here too (`_fail`, `_skip`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Sequence

from ..core.decision import Action, Decision
from ..errors import PagesyncError, StoreFullError
from ..core.ids import chunk_id, point_id
from ..core.payload import METADATA_KEY, point_metadata
from ..core.scheduler import NEW_PAGE_INTERVAL, failure_backoff
from ..edges.state import LIVE, PageState
from ..edges.store import PageWrite, StoredPoint

if TYPE_CHECKING:
    from .embed import _Pending


# The report counter each outcome adds one to (every Action has one).
_COUNTERS = {
    Action.SKIP_NOT_MODIFIED: "pages_not_modified",
    Action.SKIP_UNCHANGED: "pages_unchanged",
    Action.ADD: "pages_added",
    Action.REPLACE: "pages_changed",
    Action.PURGE: "pages_removed",
    Action.FAIL: "pages_failed",
    Action.SKIP_POLICY: "pages_skipped",
}

# The outcomes after which the collection holds the page's current text.
_LANDED = frozenset({Action.SKIP_NOT_MODIFIED, Action.SKIP_UNCHANGED, Action.ADD, Action.REPLACE})


def build_points(
    url: str, chunks: Sequence[str], vectors: Sequence[Sequence[float]], *, hash_: str, title: str, fetched_at: str,
    embedder_id: str, headings: Sequence[Sequence[str]] | None = None
) -> list[StoredPoint]:
    """A page's points, exactly as the contract lays out ids and payload (its `metadata`
    object included: `sync.core.payload`). `headings`: each chunk's heading path, the one
    its vector was embedded under (none: embedded as the text alone)."""
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
        }
        payload[METADATA_KEY] = point_metadata(payload)  # what LangChain reads as a Document's metadata
        out.append(StoredPoint(point_id(cid), payload, list(vec)))
    return out


class WriteStage:
    """The pass's writes to the state and the store, and its report lines (a mixin of the pass)."""

    def _init_write(self) -> None:
        """Skipped pages waiting for their state row (written in bulk), and the urls whose
        text the collection holds as of this pass (`landed`: written, or found unchanged)."""
        self.skips: list[PageState] = []
        self.landed: set[str] = set()

    def _record(self, page: PageState, decision: Decision, chunks: int | None = None,
                reused: int | None = None) -> None:
        r = self.report
        a = decision.action
        if a in _LANDED:
            self.landed.add(page.url)
        counter = _COUNTERS[a]
        setattr(r, counter, getattr(r, counter) + 1)
        if a in (Action.SKIP_NOT_MODIFIED, Action.SKIP_UNCHANGED):
            self.chunks_skipped += page.chunk_count  # tokens_saved_by_skip (`EmbedStage._count_tokens`)
        if decision.writes or a in (Action.FAIL, Action.SKIP_POLICY):
            entry = {"url": page.url, "action": a.value, "reason": decision.reason}
            if chunks is not None:
                entry["chunks"] = chunks
            if reused is not None:
                entry["reused"] = reused
            r.changes.append(entry)
        self.on_progress(page.url, a.value)

    def _fail(self, page: PageState, message: str, retry_after: float | None = None) -> None:
        page.failures += 1
        page.last_error = message
        wait = failure_backoff(page.failures)
        if retry_after is not None:  # the server said when to come back: no sooner
            wait = max(wait, timedelta(seconds=retry_after))
        page.due_at = self.now + wait
        self.report.error(page.url, message)
        self._record(page, Decision(Action.FAIL, message))
        self._save([page])

    def _skip(self, page: PageState, reason: str, last_error: str | None) -> None:
        """Not ours to read (robots.txt, scope, size, type, too many chunks): keep its points
        and its validators (they stay those of the stored text), look again later."""
        page.last_error = last_error
        page.due_at = self.now + (page.interval or NEW_PAGE_INTERVAL)
        self.report.skip(page.url, reason)
        self._record(page, Decision(Action.SKIP_POLICY, reason))
        self._save([page])

    def _save(self, pages: Sequence[PageState]) -> None:
        if not self.cfg.dry_run:
            self.state.put_many(pages)

    async def _write(self, items: Sequence[_Pending]) -> None:
        writes = []
        for item in items:
            item.page.pending_hash = item.hash_
            writes.append(PageWrite(item.page.url, build_points(
                item.page.url, item.chunks, item.vectors or [], hash_=item.hash_, title=item.title,
                fetched_at=self.now_iso, embedder_id=self.embedder.model_id, headings=item.headings)))
        self._save([i.page for i in items])
        try:
            # The collection is made at the first write (`_ready_collection`): a pass that
            # writes nothing creates none. After the pending marks: a crash between leaves them.
            await asyncio.to_thread(self._ready_collection)
            deleted = await asyncio.to_thread(self.store.replace_pages, writes)
        except PagesyncError as exc:
            for item in items:  # pending mark stays: the next pass revisits these pages
                item.page.failures += 1
                item.page.last_error = str(exc)
                self.report.error(item.page.url, str(exc))
                self._record(item.page, Decision(Action.FAIL, f"store write failed: {exc}"))
            self._save([i.page for i in items])
            if isinstance(exc, StoreFullError):
                raise  # every later write would fail alike: the pass stops, one line (exit 1)
            return
        self.report.chunks_deleted += deleted
        self.report.chunks_written += sum(len(w.points) for w in writes)
        # Only now, with the store's confirmation, does the state take the new hash.
        for item in items:
            p = item.page
            first = item.decision.action is Action.ADD or p.content_hash is None
            # Under a new pipeline the old hash says nothing about the text: no change seen.
            fingerprint = self._fingerprint_for(p.url)
            same_pipeline = p.fingerprint == fingerprint
            self._reschedule(p, changed=None if first else same_pipeline and p.content_hash != item.hash_)
            p.status, p.content_hash, p.fingerprint, p.pending_hash = LIVE, item.hash_, fingerprint, None
            p.moved_to = None
            p.chunk_count, p.title, p.text_chars = len(item.chunks), item.title, item.chars
            p.etag, p.last_modified = item.result.validators.etag, item.result.validators.last_modified
            p.last_changed_at = self.now
            p.failures, p.last_error = 0, None
            self._record(p, item.decision, len(item.chunks), item.reused)
        self._save([i.page for i in items])
        self._keep_texts(items)

    def _flush_skips(self) -> None:
        self._save(self.skips)
        self.skips = []

    # -- page texts: kept in the state for `pagesync reindex` (an optional extra of a State) --
    _held_texts: dict[str, str] | None = None  # url -> extracted text of a page on its way to a write

    def _hold_text(self, url: str, markdown: str) -> None:
        if self.cfg.dry_run or not hasattr(self.state, "put_texts"):
            return
        if self._held_texts is None:
            self._held_texts = {}
        self._held_texts[url] = markdown

    def _keep_texts(self, items: Sequence[_Pending]) -> None:
        """The written pages' texts, once the store confirmed them."""
        held = self._held_texts or {}
        texts = [(i.page.url, i.hash_, held.pop(i.page.url)) for i in items if i.page.url in held]
        if texts:
            self.state.put_texts(texts)
