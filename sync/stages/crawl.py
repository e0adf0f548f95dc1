"""Crawl: from the --crawl start pages, follow links within scope, riding on the visit stage.

A crawl needs no fetch of its own. Every page the visit stage reads (`Crawl.note`, called
first thing in `Visitor._process`) gives up its links, its `rel=canonical` and its meta robots from
the raw HTML already fetched; they are kept in the state (`put_links`) so a page that
answers 304, or is not due this pass, still stands for what it linked to when last read.
After the plan's visits, `Crawl.run` walks the link graph breadth first from the start pages
(`sync.core.links.Frontier`, at most --max-pages pages): a page read this pass or holding
kept links is followed without a request; a page never read (new, or no links kept) is
visited, one breadth-first level at a time, through the same fetch -> extract -> decide as
every page. So each page is fetched at most once per pass.

Rules: robots.txt (the fetcher's: a disallowed page is skipped, never read), the links'
`rel=nofollow` and a meta `nofollow` (not followed), a meta `noindex` (followed, not
indexed), a `rel=canonical` within the crawl (the page is its canonical's: not indexed under
its own URL, the canonical is crawled instead). These apply to the pages the crawl tracks
(`source == "crawl"`); a sitemap's pages are indexed as listed, their links followed.

A complete crawl (no failure, no bound hit, no page's links cut short) knows the site's
reachable pages: the crawl's pages it no longer reaches leave like pages that left a
sitemap (behind the mass-deletion guard) once a second crawl agrees, and a sitemap page the
crawl reaches stays when its sitemap drops it (it becomes a crawl page). A crawl incomplete
only for what it could not hold (bounded) needs more crawls to agree; any other incomplete
crawl purges nothing for not being reached (`sync.core.unlinked`). A start page that
answers 404/410 is a broken deploy or configuration, as a sitemap that does: an error of
the pass (exit 1, `crawl_start_errors`), and one never tracked leaves no row (it is named
again by the next pass).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import datetime
from typing import Awaitable, Callable, Sequence

from ..core.decision import Outcome
from ..core.ids import canonical_url
from ..core.link_authority import CrawlAnswer, held_reason, lost_links
from ..core.links import CrawlLimits, CrawlRules, Frontier, PageLinks, crawl_prefix, crawl_start, read_links
from ..core.unlinked import BOUNDED, CLEAR, COMPLETE, INCOMPLETE, MARK, PURGE, WAIT, purge_reason, unlinked_step
from ..core.page import GONE, LIVE, NEW, PageState
from ..core.report import overflow_passes
from ..core.scope import Scope
from ..edges.fetcher import FetchResult
from ..edges.state_protocol import LinkKeeper, State
from .crawl_links import LinkMemory
from .outcomes import Outcomes
from .settle import Ledger
from .visit import Visitor

__all__ = ["Crawl"]

log = logging.getLogger("pagesync")

_HTML_TYPES = ("text/html", "application/xhtml+xml", "")

# What the visit stage saw of a page this pass, for the crawl (`crawl_seen`): read (links
# kept), not modified (kept links stand), failed, gone (404/410: no links), skipped (robots,
# type, size: no links), moved (to the target named in `crawl_moved`; or out of the crawl,
# below), or held: its answer
# is no evidence of its links (`sync.core.link_authority`), so its kept links stand.
READ, NOT_MODIFIED, FAILED, GONE_NOW, SKIPPED, MOVED, HELD = (
    "read",
    "304",
    "failed",
    "gone",
    "skipped",
    "moved",
    "held",
)
# A crawl page whose 301/308 leads out of the crawl's directories (the target, in
# `crawl_moved_out`): it leaves the crawl, its target is not indexed, it links nothing.
MOVED_OUT = "moved out"
# Refusals of a link-trap cap: a tracked page refused only by one of these, still linked,
# counts as reached (it is not followed, and not purged for it).
_CAPS = (
    "too many query strings on one path",
    "too many pages of one numbered pattern",
    "path too deep",
    "repeated path segment",
    "url too long",
)


class Crawl:
    """The link crawl of a pass from its start pages (`starts`): told of every visit
    (`note`), then walked (`run`) through the visitor. The rules: the pass's `scope`, the
    start pages' directories, the filter hook (`crawl_filter`, else the site rules'
    `unwanted`: the crawl never fetches what the plan would refuse), the limits."""

    def __init__(
        self,
        state: State,
        outcomes: Outcomes,
        ledger: Ledger,
        *,
        links: LinkKeeper | None,
        starts: Sequence[str],
        scope: Scope,
        unwanted: Callable[[str], str | None],
        crawl_filter: Callable[[str], bool] | None,
        limits: CrawlLimits | None,
        max_pages: int,
        now: datetime,
        last_report: dict | None = None,
        full: bool = False,
    ):
        self.state, self.outcomes, self.ledger, self.report = state, outcomes, ledger, outcomes.report
        self.scope, self.max_pages, self.now, self.start_urls = scope, max_pages, now, list(starts)
        self.last_report = last_report or {}  # the last recorded run's: its crawl_overflow_passes
        # --full: every page the crawl reaches is read, gone ones too (a link names them, as a
        # sitemap would), whatever their schedule.
        self.full = full
        self.crawl_rules = CrawlRules(
            prefixes=[crawl_prefix(u) for u in starts],
            in_scope=scope.check,
            wanted=crawl_filter or (lambda url: unwanted(url) is None),
            limits=replace(limits or CrawlLimits(), max_pages=max_pages),
        )
        self.crawl_seen: dict[str, str] = {}
        self.crawl_moved: dict[str, str] = {}
        self.crawl_moved_out: dict[str, str] = {}  # url -> its 301/308 target outside the crawl's directories
        self.memory = LinkMemory(links, dry_run=outcomes.dry_run)  # what each page links to
        self.crawl_unread: set[str] = set()  # pages to read whole (no kept links): no conditional GET
        # Evidence for the purge of unlinked pages: link -> the page read healthy this pass
        # that no longer links it; url -> why a page's answer did not replace its kept links.
        self.crawl_dropped: dict[str, str] = {}
        self.crawl_held: dict[str, str] = {}
        self.crawl_capped: set[str] = set()  # tracked pages refused only by a cap, still linked
        self.crawl_overflow = 0  # new URLs not tracked: the crawl's pages are at --max-pages
        self.crawl_tracked: set[str] = set()  # the crawl's pages (`_crawl`)
        self.crawl_starts = {crawl_start(u) for u in starts}
        self.crawl_gone: dict[str, int | None] = {}  # url -> the 404/410 it answered this pass
        self.crawl_why: list[str] = []  # why the crawl is incomplete, for its log line

    def _in_crawl(self, url: str) -> bool:
        return any(url.startswith(p) for p in self.crawl_rules.prefixes)

    def reads_whole(self, url: str) -> bool:
        return url in self.crawl_unread

    def prepare(self, pages: Sequence[PageState]) -> None:
        """Before the plan's visits: indexed pages in the crawl that hold no kept links are
        read whole (a 304 would tell the crawl nothing), once."""
        inside = [p.url for p in pages if p.indexed and self._in_crawl(p.url)]
        self.crawl_unread = set(inside) - set(self.memory.get(inside))

    async def note(self, page: PageState, result: FetchResult) -> bool:
        """What the visit of `page` tells the crawl (the visit stage calls this first). Returns
        True when the page is not to be indexed (a crawl page's meta noindex, or a canonical
        elsewhere in the crawl): then it is queued for the purge here, like a page with no
        text, and its visit ends."""
        url = page.url
        if not self._in_crawl(url):
            return False
        outcome = result.outcome
        if outcome is Outcome.ERROR:
            self.crawl_seen[url] = FAILED
            return False
        if result.moved_permanently and outcome not in (Outcome.SKIPPED, Outcome.GONE):
            target = canonical_url(result.redirects[-1][1])
            if target != url and page.source == "crawl" and not self._in_crawl(target):
                return self._moved_out(page, target)
            if target != url:
                self.crawl_seen[url], self.crawl_moved[url] = MOVED, target
                return False
        if outcome is Outcome.NOT_MODIFIED:
            self.crawl_seen[url] = NOT_MODIFIED
            return False
        old = self.memory.get([url]).get(url)
        if outcome is Outcome.SKIPPED:
            answer = CrawlAnswer(url, "skipped", result.status)
        elif outcome is Outcome.GONE:
            answer = CrawlAnswer(url, "gone", result.status, was_gone=page.status == GONE)
            self.crawl_gone[url] = result.status  # its links may stand (a first 404), yet it answered so
        elif outcome is not Outcome.OK or result.content_type not in _HTML_TYPES:
            answer = CrawlAnswer(url, "other", result.status, result.content_type)
        else:
            links = await asyncio.to_thread(read_links, result.body, result.final_url or url, charset=result.charset)
            # Only links on the pass's sites are kept (another site's are never followed): the
            # kept lists stay small.
            links = replace(links, links=tuple(u for u in links.links if self.scope.check(u) is None))
            answer = CrawlAnswer(
                url,
                "html",
                result.status,
                result.content_type,
                result.body,
                canonical_url(result.final_url) if result.final_url else None,
                links,
            )
        held = held_reason(answer, old, self.crawl_rules.prefixes)
        if held is not None:
            # No evidence of what it links to: its last good links stand for this pass (with
            # any new ones it shows), the state keeps them as they were.
            assert old is not None
            new = answer.links.links if answer.links is not None else ()
            self.memory.hold(url, replace(old, links=tuple(dict.fromkeys(old.links + new))))
            self.crawl_seen[url], self.crawl_held[url] = HELD, held
            log.info("crawl: %s %s; its last links stand", url, held)
            return False
        if answer.kind == "skipped":
            self.crawl_seen[url] = SKIPPED
            return False
        if answer.kind == "gone":
            self.crawl_seen[url] = GONE_NOW
            self.memory.forget(url)
            return False
        links = answer.links or PageLinks()
        for link in lost_links(old, links):
            self.crawl_dropped.setdefault(link, url)
        self.crawl_seen[url] = READ
        self.memory.keep(url, links)
        if answer.kind != "html" or page.source != "crawl":
            return False  # a sitemap's or --url's page: indexed as named
        if links.noindex:
            reason = "meta robots noindex"
        elif (
            links.canonical
            and links.canonical != url
            and self.crawl_rules.refusal(links.canonical) is None
            and self.crawl_moved.get(links.canonical) != url
        ):
            reason = f"its rel=canonical is {links.canonical}"
            self.crawl_moved[url] = links.canonical  # the canonical is the page: crawled in its place
        else:
            return False
        page.last_fetched_at = self.now
        page.etag = page.last_modified = None  # read whole next time: it may index itself again
        self.ledger.queue_purge(page, left_sitemap=False, reason=f"not indexed: {reason}")
        return True

    def _moved_out(self, page: PageState, target: str) -> bool:
        """A crawl page that moved permanently out of the crawl's directories (same host,
        `/docs/x.html` -> `/private/y.html`): the crawl's scope is its start directories, so
        the target is not indexed and the page leaves as one that left the site (behind the
        guard, revisited like a 301), naming the target. Its kept links go: it is no page of
        the crawl any more. True: its visit ends here."""
        url = page.url
        self.crawl_seen[url], self.crawl_moved_out[url] = MOVED_OUT, target
        self.memory.forget(url)
        page.last_fetched_at = self.now
        self.ledger.queue_purge(
            page,
            left_sitemap=False,
            moved_to=target,
            reason=f"moved permanently out of the crawl's directories, to {target}",
        )
        return True

    async def run(
        self,
        visitor: Visitor,
        *,
        feed: Callable[[], Awaitable[Sequence[str]]] | None = None,
        sitemap_now: dict[str, str | None] | None = None,
    ) -> None:
        """Walk the links from the start pages, level by level, visiting the pages never
        read through `visitor`; then the pages the change feeds name (`feed()`, asked once the
        links are walked) that no
        link and no sitemap entry (`sitemap_now`) reached; then settle what the crawl
        reached (`_crawl_settle`)."""
        starts = [crawl_start(u) for u in self.start_urls]
        # The crawl's pages as the pass began: within a level they are admitted before new
        # links (a bound or cap never trades a tracked page for a new one), and they count
        # toward --max-pages (`_crawl_visit` tracks no new page past it).
        self.crawl_tracked = {p.url for p in self.state.all_pages() if p.source == "crawl" and p.status != GONE}
        frontier = Frontier(self.crawl_rules, starts, tracked=self.crawl_tracked)
        complete = True
        bounded = False  # incomplete only for what it could not hold (`sync.core.unlinked.BOUNDED`)
        fed = False
        while True:
            level = frontier.take_level()
            if not level and not fed:  # the links are walked: then the feed's pages they did not reach
                fed = True
                # The feed is read now: a crawled host's generator tag may have named it this pass.
                level = feed_level(frontier, await feed() if feed is not None else (), sitemap_now or {})
            if not level:
                break
            await self._crawl_visit(level, visitor)
            kept = self.memory.get(level)
            offered: list[str] = []
            for url in level:  # in discovery order: what a bound admits does not hang on fetch timing
                seen = self.crawl_seen.get(url)
                if seen == FAILED:
                    complete = False  # what it links to now is not known (kept links still followed)
                    self._crawl_incomplete("a page failed")
                elif seen in (GONE_NOW, SKIPPED, MOVED_OUT):
                    continue
                if url in self.crawl_moved:
                    offered.append(self.crawl_moved[url])  # a 301/308 target is reached through its source
                    if seen == MOVED:
                        continue
                links = kept.get(url)
                if links is None:
                    continue
                if links.truncated:
                    bounded = True
                    self._crawl_incomplete("a page had too many links")
                if links.canonical and links.canonical != url and url not in self.crawl_moved:
                    offered.append(links.canonical)  # an alias read in an earlier pass
                offered.extend(links.links)
            tracked = [u for u in offered if u in self.crawl_tracked]
            for link in tracked + [u for u in offered if u not in self.crawl_tracked]:
                if (
                    not frontier.offer(link)
                    and link not in frontier
                    and link in self.crawl_tracked
                    and frontier.last_refusal in _CAPS
                ):
                    self.crawl_capped.add(link)  # still linked, refused by a cap only: reached
        if frontier.bound_hit or self.crawl_overflow:
            bounded = True
            self._crawl_incomplete("over --max-pages")
        # A start page gone or not ours to read is a broken deploy or configuration, not an
        # empty site (as an emptied sitemap): nothing is purged for not being reached.
        for url in starts:
            if url not in frontier:  # refused by the crawl's own rules (excluded, out of scope, a trap cap)
                complete = False
                log.warning(
                    "crawl start page %s is refused by the crawl's rules (%s): no page purged for not being linked",
                    url,
                    self.crawl_rules.refusal(url) or "a link-trap cap",
                )
            elif self.crawl_seen.get(url) in (GONE_NOW, MOVED_OUT) or url in self.crawl_gone:
                complete = False
                self._start_gone(url)
            elif self.crawl_seen.get(url) in (SKIPPED, HELD):
                complete = False
                seen = self.crawl_seen[url]
                log.warning(
                    "crawl start page %s could not be read (%s): no page purged for not being linked",
                    url,
                    "skipped" if seen == SKIPPED else self.crawl_held[url],
                )
        self._crawl_settle(frontier, INCOMPLETE if not complete else BOUNDED if bounded else COMPLETE)

    def _crawl_incomplete(self, why: str) -> None:
        if why not in self.crawl_why:
            self.crawl_why.append(why)

    def _start_gone(self, url: str) -> None:
        """A start page answered 404/410 (or did when last visited, and is not due), or moved
        out of the crawl's directories: an error of the pass, as a sitemap's 404 is. One never
        tracked gets no state row."""
        self.report.crawl_start_errors += 1
        self.report.error(url, start_page_error(self.crawl_gone.get(url), self.crawl_moved_out.get(url)))
        queued = self.ledger.purges.get(url)
        if queued is not None and queued.page.status == NEW:
            del self.ledger.purges[url]  # nothing to purge or to keep: the next pass asks again

    async def _crawl_visit(self, level: Sequence[str], visitor: Visitor) -> None:
        """Visit the pages of one level the crawl cannot follow without reading them: new,
        never indexed, gone and due again, indexed without kept links, or a start page."""
        todo = [u for u in level if u not in self.crawl_seen and u not in visitor.visiting]
        if not todo:
            return
        known = self.state.get_many(todo)
        kept = self.memory.get(todo)
        pages: list[PageState] = []
        new: list[PageState] = []
        room = self.max_pages - len(self.crawl_tracked)
        for url in todo:
            page = known.get(url)
            if page is None:
                if room <= 0:
                    self.crawl_overflow += 1  # the crawl's pages are at --max-pages: not tracked
                    continue
                room -= 1
                self.crawl_tracked.add(url)
                page = PageState(url=url, status=NEW, first_seen_at=self.now, source="crawl")
                new.append(page)
            elif url in self.crawl_starts or (self.full and page.status == GONE):
                # A start page is read every pass, due or not (a conditional GET): it is the root
                # of what the crawl reaches, so a new link, a 404 or its return tells this pass.
                # With --full a gone page a link reaches is read too, as one a sitemap lists.
                if page.status == LIVE and url not in kept:
                    self.crawl_unread.add(url)
            elif page.status == LIVE and page.pending_hash is None and url in kept:
                continue  # followed by its kept links; visited on its own schedule
            elif (
                page.status == GONE
                and page.moved_to is not None
                and page.due_at is not None
                and page.due_at > self.now
                and self._in_crawl(page.moved_to)
            ):
                self.crawl_seen[url], self.crawl_moved[url] = MOVED, page.moved_to  # its target is reached through it
                continue
            elif page.status == GONE and url in kept and page.due_at is not None and page.due_at > self.now:
                continue  # not indexed (noindex, an alias), or a hub's first 404, not due: its kept links stand
            elif page.status == GONE and page.due_at is not None and page.due_at > self.now:
                self.crawl_seen[url] = GONE_NOW  # a 404 not due again: no links
                continue
            elif page.status == LIVE and url not in kept:
                self.crawl_unread.add(url)
            pages.append(page)
        # New pages become rows first (NEW, no points claimed): a crash later leaves them due.
        # Not a start page: every pass names it again, and one that is gone must leave no row.
        self.outcomes.save([p for p in new if p.url not in self.crawl_starts])
        await visitor.visit(pages)

    def _crawl_settle(self, frontier: Frontier, verdict: str) -> None:
        """Report the crawl; keep the sitemap pages it reaches; mark, clear or purge the
        crawl pages it does not reach (`sync.core.unlinked`: a purge needs two complete
        crawls a revisit interval apart, or more bounded ones; the guard judges it)."""
        r = self.report
        complete = verdict == COMPLETE
        r.pages_crawled, r.crawl_complete, r.crawl_bounded = len(frontier), complete, verdict == BOUNDED
        r.crawl_refused = dict(sorted(frontier.refused.items()))
        # What the crawl found but may not hold: links past the frontier's bound, and new
        # pages past the tracked ones' (both --max-pages).
        self.crawl_overflow += frontier.refused.get("over --max-pages", 0)
        r.crawl_overflow = self.crawl_overflow
        r.crawl_overflow_passes = overflow_passes(self.last_report, crawled=True, overflowed=self.crawl_overflow > 0)
        if self.crawl_overflow:
            log.warning(
                "warning: the crawl found %d more pages than --max-pages %d lets it track%s",
                self.crawl_overflow,
                self.max_pages,
                f" ({r.crawl_overflow_passes} passes in a row: exit 1; raise --max-pages, or exclude the "
                "links that grow without end)"
                if r.crawl_overflows_every_pass
                else "",
            )
        purges = self.ledger.purges
        for url, (page, left_sitemap, reason, _) in list(purges.items()):
            if left_sitemap and reason == "left the sitemap" and url in frontier and page.status == LIVE:
                del purges[url]  # still linked: the crawl keeps it
                page.source, page.in_sitemap = "crawl", False
                self.outcomes.save([page])
        if verdict == INCOMPLETE and self.crawl_why:  # a start page that could not be read was said already
            log.info("crawl incomplete (%s): no page purged for not being linked", ", ".join(self.crawl_why))
        elif verdict == BOUNDED:
            log.info(
                "crawl incomplete (%s): a page it did not reach leaves only when several crawls agree",
                ", ".join(self.crawl_why),
            )
        changed: list[PageState] = []
        for page in self.state.all_pages():
            if page.source != "crawl" or page.in_sitemap or page.status == GONE or page.url in purges:
                continue
            reached = page.url in frontier or page.url in self.crawl_capped
            dropped_by = self.crawl_dropped.get(page.url)
            linker = page.unlinked_by or dropped_by
            step = unlinked_step(
                reached=reached,
                crawl=verdict,
                since=page.unlinked_since,
                by=page.unlinked_by,
                misses=page.unlinked_misses,
                interval=page.interval,
                now=self.now,
                dropped_by=dropped_by,
                behind_cut=linker is not None and frontier.cut_series(linker),
            )
            if step.action == PURGE:
                assert step.since is not None
                self.ledger.queue_purge(
                    page, left_sitemap=True, reason=purge_reason(step.since, step.by, self.now, step.misses)
                )
            elif step.action in (CLEAR, MARK, WAIT) and (step.since, step.by, step.misses) != (
                page.unlinked_since,
                page.unlinked_by,
                page.unlinked_misses,
            ):
                if step.action == MARK:
                    log.info(
                        "crawl: %s is no longer linked (%s); it leaves if a complete crawl a revisit "
                        "interval from now agrees",
                        page.url,
                        step.by or "no page reached links it",
                    )
                page.unlinked_since, page.unlinked_by, page.unlinked_misses = step.since, step.by, step.misses
                changed.append(page)
        self.outcomes.save(changed)


def feed_level(frontier: Frontier, feed_pages: Sequence[str], sitemap_now: dict[str, str | None]) -> list[str]:
    """The pages the change feed names that the links did not reach (nor a sitemap lists),
    offered to the crawl under its rules: one more level, whose links are followed too."""
    unreached = [u for u in feed_pages if u not in frontier and u not in sitemap_now]
    added = [u for u in unreached if frontier.offer(u)]
    if added:
        log.info("crawl: %d page(s) the change feed names and no link reached are visited", len(added))
    return frontier.take_level()


def start_page_error(status: int | None, moved_out_to: str | None) -> str:
    """The pass's error line for a start page that answered `status` (404/410) or moved out of
    the crawl's directories (to `moved_out_to`); neither known: it was gone when last visited."""
    if moved_out_to is not None:
        return f"crawl start page: moved permanently out of the crawl's directories, to {moved_out_to} (give that as --crawl)"
    if status is not None:
        return f"crawl start page: HTTP {status}"
    return "crawl start page: gone (a 404 or 410 when last visited)"
