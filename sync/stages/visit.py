"""Visit: fetch -> extract -> decide, for every page the plan chose.

Workers fetch per host (`HostQueue`: no worker waits out one host's delay while another's
pages wait) into a bounded queue the pass consumes in order (`Visitor.visit`). Each answer
is decided (`_process`, `sync.core.decision.decide`): a skip is recorded, a 404/410, a page
with no text or a 301/308 (`_moved`: its target tracked in its place) is queued in the
ledger for the purge, and a change goes on to the embed queue. A change that looks like a
broken deploy is held for the guard (`may_be_broken`). Conditional GETs use the page's
validators unless its text must be read whatever the server says (`_validators`). With a
crawl, each page read first tells the crawl its links (`CrawlObserver.note`): the crawl
rides on these visits.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Callable, Protocol, Sequence

from chunking import GUIDE, Splitter, extract_page

from ..core.decision import Action, Decision, Outcome, decide, may_be_broken, needs_unconditional_fetch
from ..core.hashing import content_hash
from ..core.ids import canonical_url
from ..core.page import GONE, NEW, PageState
from ..core.points_check import MISSING_MARK, REBUILD_MARK, rewrite_reason
from ..core.site_rules import SiteRuleSet, generator_search_page, may_be_search_page
from ..edges.fetcher import Fetcher, FetchResult, HostQueue, Validators
from ..edges.state_protocol import State
from .embed import EmbedQueue
from .fingerprints import Fingerprints
from .outcomes import Outcomes
from .pending import PendingPage
from .preflight import CollectionCheck
from .schedule import Scheduler
from .settle import Ledger

__all__ = ["CrawlObserver", "Visitor"]

log = logging.getLogger("pagesync")


class CrawlObserver(Protocol):
    """What the crawl learns from the visits (`sync.stages.crawl.Crawl`)."""

    async def note(self, page: PageState, result: FetchResult) -> bool:
        """Told first of every answer; True: a crawl page not to be indexed (queued for the purge)."""

    def reads_whole(self, url: str) -> bool:
        """A crawl page with no kept links: fetched without validators (a 304 tells it nothing)."""


class Visitor:
    """Fetch -> extract -> decide for each page it is given (`visit`), handing every outcome
    on: skips and failures to `outcomes`, purges and held changes to the `ledger`, changes
    to the embed `queue`. `visiting`: the urls visited this pass (a 301/308 target, or a
    crawl's link, is not fetched twice)."""

    def __init__(
        self,
        fetcher: Fetcher,
        state: State,
        outcomes: Outcomes,
        scheduler: Scheduler,
        ledger: Ledger,
        queue: EmbedQueue[PendingPage],
        splitter: Splitter,
        fingerprints: Fingerprints,
        check: CollectionCheck,
        *,
        site_rules: SiteRuleSet,
        unwanted: Callable[[str], str | None],
        workers: int,
        repair: bool,
        max_chunks_per_page: int | None,
        now: datetime,
        on_generator: Callable[[str, bytes], None] = lambda url, body: None,
        on_change: Callable[[str], None] = lambda url: None,
        checkpoint: Callable[[str, str | None], None] = lambda point, url: None,
    ):
        self.fetcher, self.state, self.outcomes, self.report = fetcher, state, outcomes, outcomes.report
        self.scheduler, self.ledger, self.queue = scheduler, ledger, queue
        self.splitter, self.fingerprints, self.check = splitter, fingerprints, check
        self.site_rules, self.unwanted, self.workers, self.repair = site_rules, unwanted, workers, repair
        self.max_chunks_per_page, self.now, self.on_generator = max_chunks_per_page, now, on_generator
        self.on_change = on_change  # told of each page whose text changed, as it is read
        self.checkpoint = checkpoint  # told of each answer before it is decided (`sync.engine.Checkpoint`)
        self.crawl: CrawlObserver | None = None  # set when the pass crawls (`watch_crawl`)
        self.visiting: set[str] = set()

    def watch_crawl(self, crawl: CrawlObserver) -> None:
        """Tell `crawl` of every answer from now on (it also visits through `visit`)."""
        self.crawl = crawl

    async def visit(self, pages: Sequence[PageState]) -> None:
        """Visit `pages`, fetching per host while the embed queue's model call runs."""
        if not pages:
            return
        self.visiting.update(p.url for p in pages)
        # Per host: a worker takes the first page whose host can send now, so no worker
        # sits in one host's Crawl-delay, Retry-After or per-host bound while another's wait.
        todo = HostQueue(self.fetcher, pages, url=lambda p: p.url)
        # Bounded: fetched bodies wait here while the model works, so memory stays flat.
        done: asyncio.Queue[tuple[PageState, FetchResult] | None] = asyncio.Queue(maxsize=max(8, self.workers * 2))
        n_workers = min(self.workers, len(pages))

        async def worker() -> None:
            while (page := await todo.get()) is not None:
                # No await between get() and fetch_page(): see HostQueue.get.
                result = await self.fetcher.fetch_page(page.url, self._validators(page), self._moved_validators)
                await done.put((page, result))
            await done.put(None)

        workers = [asyncio.create_task(worker()) for _ in range(n_workers)]
        finished = 0
        queue = self.queue
        try:
            while finished < n_workers:
                item = await done.get()
                if item is None:
                    finished += 1
                    continue
                page, result = item
                await self.handle(page, result)
                if queue.full():
                    await queue.flush()  # returns while the model works on the batch
                    if queue.stopped:  # --max-embed-tokens: the pages not visited stay due
                        break
            await queue.flush()
            await queue.drain()
        finally:
            for w in workers:
                w.cancel()
            queue.cancel()  # an error left a batch in flight: nothing of it was written
        self.outcomes.flush_skips()

    async def _moved(self, page: PageState, target: str, result: FetchResult) -> None:
        """301/308: the old URL is purged and the target tracked in its place.

        The old URL stays gone with `moved_to` set and, while a sitemap lists it, on the
        schedule like a 404 (a redirect answered again is no change: its interval grows;
        one that stopped is indexed again). The target was vetted by the scope at every
        hop. If it is visited this pass anyway (it is in the sitemap too), that visit
        indexes it; otherwise this answer does.
        """
        if page.moved_to is not None and page.moved_to != target:
            self.ledger.unmoved.add(page.moved_to)
        self.ledger.queue_purge(page, left_sitemap=False, reason=f"moved permanently to {target}", moved_to=target)
        # Purges come at the end of the pass: the old URL's points are still there to reuse.
        await self.queue.remember_vectors(page)
        if target in self.visiting or self.unwanted(target) is not None:
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
        moved = FetchResult(
            target,
            result.outcome,
            status=result.status,
            body=result.body,
            content_type=result.content_type,
            charset=result.charset,
            validators=result.validators,
            final_url=result.final_url,
        )
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
        return MISSING_MARK if page.url in self.check.short else None

    def _validators(self, page: PageState) -> Validators | None:
        if (
            self.repair
            or page.url in self.check.rebuilding
            or not page.indexed
            or self._mark(page) is not None
            or (self.crawl is not None and self.crawl.reads_whole(page.url))
            or may_be_search_page(page.url)  # only its markup tells a docs tool's search page
        ):
            return None
        if needs_unconditional_fetch(page.fingerprint, self.fingerprints.for_url(page.url)):
            return None
        return Validators(page.etag, page.last_modified)

    async def handle(self, page: PageState, result: FetchResult) -> None:
        """Count one fetched answer and decide it."""
        self.checkpoint("page", page.url)
        r = self.report
        r.pages_visited += 1
        if result.answered:
            r.pages_fetched += 1
        r.bytes_downloaded += result.bytes_downloaded
        await self._process(page, result)

    def _search_page(self, page: PageState, tool: str) -> None:
        """A docs tool's own search page (`sync.core.site_rules.generator_search_page`): not
        indexed, as the default excludes keep the other tools' search pages out; one indexed
        before (the default excludes off) leaves."""
        reason = f"excluded by default ({tool}: its search page; --no-default-excludes keeps it)"
        if page.indexed or page.pending_hash is not None:
            page.last_fetched_at = self.now
            self.ledger.queue_purge(page, left_sitemap=False, reason=reason)
        else:
            self.outcomes.skip(page, reason, None)

    async def _process(self, page: PageState, result: FetchResult) -> None:
        """Decide one fetched page and carry out skips and purges; changes go to the embed queue."""
        if self.crawl is not None and await self.crawl.note(page, result):
            return  # a crawl page not to be indexed (noindex, a canonical elsewhere): queued for the purge
        # A 301/308 answered as such (its target is not followed: `Fetcher.unwanted`) is a move.
        unfollowed_move = result.status in (301, 308) and result.moved_permanently
        if result.outcome is Outcome.ERROR and not unfollowed_move:
            self.outcomes.fail(page, result.error or "fetch failed", result.retry_after)
            return
        if result.outcome is Outcome.SKIPPED:
            self.outcomes.skip(page, result.error or "skipped", result.error)
            return
        if result.outcome is Outcome.GONE:
            page.last_fetched_at = self.now
            if page.moved_to is not None:
                self.ledger.unmoved.add(page.moved_to)
            self.ledger.queue_purge(page, left_sitemap=False, reason=f"gone ({result.status})")
            return
        if result.moved_permanently:
            target = canonical_url(result.redirects[-1][1])
            if target != page.url:
                await self._moved(page, target, result)
                return
        if page.moved_to is not None:  # the redirect is undone: its target may be no one's now
            self.ledger.unmoved.add(page.moved_to)
        new_hash = title = None
        markdown, kind = "", GUIDE
        if result.outcome is Outcome.OK:
            self.on_generator(page.url, result.body)  # a generator tag says where the feed is
            rules = self.site_rules.rules_for(page.url)
            tool = generator_search_page(page.url, result.body) if rules.default_excludes else None
            if tool is not None:  # a docs tool's own search page: a default exclude, told by its markup
                self._search_page(page, tool)
                return
            select = rules.select
            given = {"select": select} if select is not None else {}  # an extractor without the option still fits
            try:
                extracted = await asyncio.to_thread(
                    extract_page, result.body, result.content_type, page.url, charset=result.charset, **given
                )
            except Exception as exc:  # a page the extractor chokes on fails alone
                self.outcomes.fail(page, f"extraction failed: {exc}")
                return
            markdown, title, kind = extracted.markdown, extracted.title, extracted.page_kind
            new_hash = content_hash(markdown)
        decision = decide(
            result.outcome,
            new_hash=new_hash,
            stored_hash=page.content_hash,
            stored_fingerprint=page.fingerprint,
            fingerprint=self.fingerprints.for_url(page.url),
            indexed=page.indexed,
            text_empty=result.outcome is Outcome.OK and not markdown,
        )
        if decision.action is Action.REPLACE and page.content_hash is not None and new_hash != page.content_hash:
            self.on_change(page.url)  # as read, before it is embedded: the deploy stage widens on it
        if decision.action is Action.PURGE:  # its text extracted to nothing: queued like a 404
            page.last_fetched_at = self.now
            self.ledger.queue_purge(
                page,
                left_sitemap=False,
                reason="no text extracted (an empty page, or a template or rendering change the extractor cannot read)",
            )
            return
        if decision.action is Action.FAIL:
            page.etag = page.last_modified = None  # stale validators: next visit unconditional
            self.outcomes.fail(page, decision.reason)
            return
        if self.repair and decision.action is Action.SKIP_UNCHANGED:
            decision = Decision(Action.REPLACE, "repair")
        elif page.url in self.check.rebuilding and decision.action is Action.SKIP_UNCHANGED:
            decision = Decision(Action.REPLACE, rewrite_reason(REBUILD_MARK))
        elif self._mark(page) is not None and decision.action is Action.SKIP_UNCHANGED:
            # A pending mark: what the collection holds for this page is not known (a write
            # or purge cut short, a rebuild not reached yet, points lost): rewritten.
            decision = Decision(Action.REPLACE, rewrite_reason(self._mark(page)))
        elif decision.action is Action.SKIP_UNCHANGED and (title or "") != (page.title or ""):
            # Every point carries the title, which the hash (of the markdown) does not cover:
            # a page whose title alone changed is rewritten, each chunk's vector reused.
            decision = Decision(Action.REPLACE, "title changed")
        elif decision.action is Action.SKIP_UNCHANGED and page.page_kind is not None and kind != page.page_kind:
            # Every point carries its page's kind too, which its markup decides, not its text.
            decision = Decision(Action.REPLACE, "page kind changed")
        if not decision.writes:
            page.etag, page.last_modified = result.validators.etag, result.validators.last_modified
            self.scheduler.reschedule(page, False)
            page.failures, page.last_error = 0, None
            self.outcomes.unchanged(page, decision)
            return
        # Chunking happens only for a real change.
        pieces = self.splitter.chunks(markdown, title or "")
        chunks = [c.text for c in pieces]
        cap = self.max_chunks_per_page
        if cap is not None and len(chunks) > cap:
            reason = (
                f"{len(chunks)} chunks, over the cap of {cap} per page (--max-chunks-per-page); "
                "its points are kept as they were"
            )
            log.warning("skipped %s: %s", page.url, reason)
            self.outcomes.skip(page, reason, reason)
            return
        assert new_hash is not None  # a change is read text
        item = PendingPage(
            page,
            decision,
            result,
            new_hash,
            title or "",
            chunks,
            headings=[c.headings for c in pieces],
            markdown=markdown,
            page_kind=kind,
        )
        limit = self.splitter.max_tokens
        if limit is not None:
            self.report.chunks_over_model_input += sum(1 for c in pieces if c.tokens is not None and c.tokens > limit)
        if (
            decision.action is Action.REPLACE
            and decision.reason == "content changed"
            and may_be_broken(page.chunk_count, len(chunks), len(markdown))
        ):
            # A collapse or a short text: written (or held) once the guard has seen the pass.
            self.ledger.suspects[page.url] = item
            return
        await self.queue.enqueue(item)
