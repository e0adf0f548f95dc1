"""Visit: fetch -> extract -> decide, for every page the plan chose.

Workers fetch per host (`HostQueue`: no worker waits out one host's delay while another's
pages wait) into a bounded queue the pass consumes in order (`_visit`). Each answer is
decided (`_process`, `sync.core.decision.decide`): a skip is recorded, a 404/410, a page with no
text or a 301/308 (`_moved`: its target tracked in its place) is queued for the purge, and a
change goes on to the embed stage. A change that looks like a broken deploy is held for
the guard (`may_be_broken`). Conditional GETs use the page's validators unless its text must
be read whatever the server says (`_validators`). With a crawl, each page read first tells
the crawl stage its links (`sync.stages.crawl`, `_crawl_note`): the crawl rides on these visits.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Sequence

from chunking import EXTRACTOR_ID, extract_page
from chunking.split import Chunk

from ..core.hashing import content_hash
from ..core.decision import Action, Decision, Outcome, decide, may_be_broken, needs_unconditional_fetch
from ..edges.fetcher import FetchResult, HostQueue, Validators
from ..core.ids import canonical_url
from ..core.site_rules import page_fingerprint
from ..core.points_check import MISSING_MARK, REBUILD_MARK, rewrite_reason
from ..edges.state import GONE, NEW, PageState
from .embed import _Pending

log = logging.getLogger("pagesync")


class VisitStage:
    """The pass's fetches and per-page decisions (a mixin of the pass): fetch, extract with
    `chunking.extract_page`, hash with `content_hash`, decide."""

    def _init_visit(self) -> None:
        """The urls visited this pass (a 301/308 target is not fetched twice), and the
        pipeline fingerprint of each --select in use."""
        self.visiting: set[str] = set()
        self.fingerprints: dict[str | None, str] = {None: self.fingerprint}

    def _chunks_of(self, markdown: str, title: str) -> list[Chunk]:
        """The page's chunks with their heading paths; a splitter that only `split`s (an
        older one, a test's) gives chunks without a path, embedded as their text alone."""
        chunks = getattr(self.splitter, "chunks", None)
        if chunks is not None:
            return chunks(markdown, title)
        return [Chunk(text) for text in self.splitter.split(markdown)]

    def _fingerprint_for(self, url: str) -> str:
        """The pipeline fingerprint of `url`'s points: the pass's, with the selector its site
        extracts with (`extractor_variant`). A page extracted under another selector is
        re-read and rewritten (`decide`); its unchanged texts keep their vectors."""
        select = self.cfg.site_rules.rules_for(url).select
        fp = self.fingerprints.get(select)
        if fp is None:
            fp = self.fingerprints[select] = page_fingerprint(self.embedder.model_id, EXTRACTOR_ID,
                                                              self.splitter.settings, select)
        return fp

    async def _visit(self, pages: Sequence[PageState]) -> None:
        if not pages:
            return
        # Per host: a worker takes the first page whose host can send now, so no worker
        # sits in one host's Crawl-delay, Retry-After or per-host bound while another's wait.
        todo = HostQueue(self.fetcher, pages, url=lambda p: p.url)
        # Bounded: fetched bodies wait here while the model works, so memory stays flat.
        done: asyncio.Queue[tuple[PageState, FetchResult] | None] = asyncio.Queue(maxsize=max(8, self.cfg.workers * 2))
        n_workers = min(self.cfg.workers, len(pages))

        async def worker() -> None:
            while (page := await todo.get()) is not None:
                # No await between get() and fetch_page(): see HostQueue.get.
                result = await self.fetcher.fetch_page(page.url, self._validators(page), self._moved_validators)
                await done.put((page, result))
            await done.put(None)

        workers = [asyncio.create_task(worker()) for _ in range(n_workers)]
        finished = 0
        try:
            while finished < n_workers:
                item = await done.get()
                if item is None:
                    finished += 1
                    continue
                page, result = item
                await self._handle(page, result)
                if len(self.to_embed) >= self.cfg.embed_batch or self.queued_chunks >= self.max_queued_chunks:
                    await self._flush()  # returns while the model works on the batch
                    if self.budget_stopped:  # --max-embed-tokens: the pages not visited stay due
                        break
            await self._flush()
            await self._drain()
        finally:
            for w in workers:
                w.cancel()
            if self.inflight is not None:  # an error left a batch in flight: nothing of it was written
                _, _, call = self.inflight
                self.inflight, self.inflight_keys = None, {}
                if call is not None:
                    call.cancel()
        self._flush_skips()

    async def _moved(self, page: PageState, target: str, result: FetchResult) -> None:
        """301/308: the old URL is purged and the target tracked in its place.

        The old URL stays gone with `moved_to` set and, while a sitemap lists it, on the
        schedule like a 404 (a redirect answered again is no change: its interval grows;
        one that stopped is indexed again). The target was vetted by the scope at every
        hop. If it is visited this pass anyway (it is in the sitemap too), that visit
        indexes it; otherwise this answer does.
        """
        if page.moved_to is not None and page.moved_to != target:
            self.unmoved.add(page.moved_to)
        self._queue_purge(page, left_sitemap=False, reason=f"moved permanently to {target}", moved_to=target)
        # Purges come at the end of the pass: the old URL's points are still there to reuse.
        await self._remember_vectors(page)
        if target in self.visiting or self._unwanted(target) is not None:
            # Visited anyway; or a page the site rules keep out, not tracked (the Fetcher
            # did not follow the move: `result` is the 301/308 itself).
            return
        self.visiting.add(target)
        known = self.state.get(target)
        # A crawl's page moves as a crawl page (it leaves when no longer linked); any other as a --url.
        source = "crawl" if page.source == "crawl" else "url"
        tpage = known or PageState(url=target, status=NEW, first_seen_at=self.now, source=source)
        if known is None or known.status == GONE:
            tpage.source = source
        if result.outcome is Outcome.NOT_MODIFIED and not tpage.indexed:
            # The old page's validators matched the target, but we hold no text under the
            # target's key: read it once more, unconditionally.
            again = await self.fetcher.fetch_page(target, None)
            self.report.bytes_downloaded += again.bytes_downloaded
            await self._process(tpage, again)
            return
        moved = FetchResult(target, result.outcome, status=result.status, body=result.body,
                            content_type=result.content_type, charset=result.charset, validators=result.validators,
                            final_url=result.final_url)
        await self._process(tpage, moved)

    def _moved_validators(self, target: str) -> Validators | None:
        """The validators to ask a 301/308 target with: its own, if it is indexed."""
        known = self.state.get(canonical_url(target))
        return self._validators(known) if known is not None else None

    def _mark(self, page: PageState) -> str | None:
        """The page's pending mark: the state's, or the one preflight gave it this pass (a
        dry run writes no mark, yet must visit and tell the page as a pass would)."""
        if page.pending_hash is not None:
            return page.pending_hash
        return MISSING_MARK if page.url in self.marked else None

    def _validators(self, page: PageState) -> Validators | None:
        if (self.cfg.repair or page.url in self.rebuild or not page.indexed or self._mark(page) is not None
                or page.url in self.crawl_unread):
            return None
        if needs_unconditional_fetch(page.fingerprint, self._fingerprint_for(page.url)):
            return None
        return Validators(page.etag, page.last_modified)

    async def _handle(self, page: PageState, result: FetchResult) -> None:
        r = self.report
        r.pages_visited += 1
        if result.answered:
            r.pages_fetched += 1
        r.bytes_downloaded += result.bytes_downloaded
        await self._process(page, result)

    async def _process(self, page: PageState, result: FetchResult) -> None:
        """Decide one fetched page and carry out skips and purges; changes go to the embed queue."""
        if self.crawl_on and await self._crawl_note(page, result):
            return  # a crawl page not to be indexed (noindex, a canonical elsewhere): queued for the purge
        # A 301/308 answered as such (its target is not followed: `Fetcher.unwanted`) is a move.
        unfollowed_move = result.status in (301, 308) and result.moved_permanently
        if result.outcome is Outcome.ERROR and not unfollowed_move:
            self._fail(page, result.error or "fetch failed", result.retry_after)
            return
        if result.outcome is Outcome.SKIPPED:
            self._skip(page, result.error or "skipped", result.error)
            return
        if result.outcome is Outcome.GONE:
            page.last_fetched_at = self.now
            if page.moved_to is not None:
                self.unmoved.add(page.moved_to)
            self._queue_purge(page, left_sitemap=False, reason=f"gone ({result.status})")
            return
        if result.moved_permanently:
            target = canonical_url(result.redirects[-1][1])
            if target != page.url:
                await self._moved(page, target, result)
                return
        if page.moved_to is not None:  # the redirect is undone: its target may be no one's now
            self.unmoved.add(page.moved_to)
        new_hash = title = None
        chunks: list[str] = []
        if result.outcome is Outcome.OK:
            self._deploy_generator(page.url, result.body)  # a generator tag says where the feed is
            select = self.cfg.site_rules.rules_for(page.url).select
            given = {"select": select} if select is not None else {}  # an extractor without the option still fits
            try:
                extracted = await asyncio.to_thread(extract_page, result.body, result.content_type, page.url,
                                                    charset=result.charset, **given)
            except Exception as exc:  # a page the extractor chokes on fails alone
                self._fail(page, f"extraction failed: {exc}")
                return
            new_hash, title = content_hash(extracted.markdown), extracted.title
        decision = decide(result.outcome, new_hash=new_hash, stored_hash=page.content_hash,
                          stored_fingerprint=page.fingerprint, fingerprint=self._fingerprint_for(page.url),
                          indexed=page.indexed,
                          text_empty=result.outcome is Outcome.OK and not extracted.markdown)
        if decision.action is Action.PURGE:  # its text extracted to nothing: queued like a 404
            page.last_fetched_at = self.now
            self._queue_purge(page, left_sitemap=False, reason="no text extracted (an empty page, or a template "
                                                                  "or rendering change the extractor cannot read)")
            return
        if decision.action is Action.FAIL:
            page.etag = page.last_modified = None  # stale validators: next visit unconditional
            self._fail(page, decision.reason)
            return
        if self.cfg.repair and decision.action is Action.SKIP_UNCHANGED:
            decision = Decision(Action.REPLACE, "repair")
        elif page.url in self.rebuild and decision.action is Action.SKIP_UNCHANGED:
            decision = Decision(Action.REPLACE, rewrite_reason(REBUILD_MARK))
        elif self._mark(page) is not None and decision.action is Action.SKIP_UNCHANGED:
            # A pending mark: what the collection holds for this page is not known (a write
            # or purge cut short, a rebuild not reached yet, points lost): rewritten.
            decision = Decision(Action.REPLACE, rewrite_reason(self._mark(page)))
        elif decision.action is Action.SKIP_UNCHANGED and (title or "") != (page.title or ""):
            # Every point carries the title, which the hash (of the markdown) does not cover:
            # a page whose title alone changed is rewritten, each chunk's vector reused.
            decision = Decision(Action.REPLACE, "title changed")
        if not decision.writes:
            page.etag, page.last_modified = result.validators.etag, result.validators.last_modified
            self._reschedule(page, changed=False)
            page.failures, page.last_error = 0, None
            self._record(page, decision)
            self.skips.append(page)
            if len(self.skips) >= 256:
                self._flush_skips()
            return
        # Chunking happens only for a real change.
        pieces = self._chunks_of(extracted.markdown, title or "")
        chunks = [c.text for c in pieces]
        cap = self.cfg.max_chunks_per_page
        if cap is not None and len(chunks) > cap:
            reason = (f"{len(chunks)} chunks, over the cap of {cap} per page (--max-chunks-per-page); "
                      "its points are kept as they were")
            log.warning("skipped %s: %s", page.url, reason)
            self._skip(page, reason, reason)
            return
        item = _Pending(page, decision, result, new_hash, title or "", chunks, headings=[c.headings for c in pieces],
                        chars=len(extracted.markdown))
        limit = getattr(self.splitter, "max_tokens", None)
        if limit is not None:
            self.report.chunks_over_model_input += sum(1 for c in pieces if c.tokens is not None and c.tokens > limit)
        if (decision.action is Action.REPLACE and decision.reason == "content changed"
                and may_be_broken(page.chunk_count, len(chunks), len(extracted.markdown))):
            # A collapse or a short text: written (or held) once the guard has seen the pass.
            self.suspects[page.url] = (item, extracted.markdown)
            return
        await self._enqueue(item, extracted.markdown)
