"""Settle: the end of a pass, once every page was seen: the guard, the held changes, moves and purges.

Purges are queued in the pass's `Ledger` while it visits (`queue_purge`: a page that left
the sitemap, answered 404/410/301 or lost its text) and applied last by the `Settler`
(`apply_purges`), so a leaving page's vectors can still be reused meanwhile and the
mass-deletion guard (`guard_refusal`) judges them all at once, together with the changes
that look like a broken deploy (`judge_guard`, `settle_suspects`).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Callable, NamedTuple, Sequence

from ..core.decision import Action, Decision, broken_deploy, held_reason
from ..core.page import GONE, LIVE, PageState
from ..core.scheduler import failure_backoff, next_interval
from ..core.scope import allow_host_flags, refused_by_host
from ..edges.state_protocol import State, TextKeeper
from ..edges.store import Store
from .embed import EmbedQueue
from .outcomes import Outcomes
from .pending import PendingPage
from .plan import ChangeEvent

__all__ = ["Ledger", "Purge", "Settler", "guard_refusal"]

log = logging.getLogger("pagesync")


def guard_refusal(
    n: int,
    tracked: int,
    *,
    emptied: int = 0,
    scoped: Sequence[str] = (),
    allow_mass_delete: bool = False,
    mass_delete_min: int = 5,
    max_delete_share: float = 0.2,
) -> str | None:
    """Pure: the mass-deletion guard's refusal when `n` of `tracked` live pages would go,
    `emptied` of them by a change to a stub (`broken_deploy`) rather than a purge, `scoped`
    (their URLs) because they are out of scope now; None when the pass may go on (fewer
    than `mass_delete_min`, at most `max_delete_share` of the tracked pages, or allowed).
    Pages that only left the scope are no lost site: for them the advice is the scope,
    never --allow-mass-delete."""
    if allow_mass_delete or n < mass_delete_min or n <= max_delete_share * tracked:
        return None
    if scoped:
        hosts = refused_by_host(scoped)  # counted once: the advice and the line share it
        allow = allow_host_flags(hosts)
        where = ", ".join(f"{k} on {h}" for h, k in list(hosts.items())[:3])
        if len(scoped) == n:
            return (
                f"mass-deletion guard: this pass would purge {n} of {tracked} tracked pages "
                f"because they are out of scope now ({where}: not among this run's hosts); nothing was "
                f"purged. If they are still this site's, add {allow}"
            )
    what = " and ".join(
        w for w in (f"purge {n - emptied}" if n > emptied else "", f"empty {emptied}" if emptied else "") if w
    )
    why = (
        "; emptied: the text shrank to a stub, or many pages changed to one short text, as in a broken deploy"
        if emptied
        else ""
    )
    done = "nothing was purged or emptied" if emptied else "nothing was purged"
    also = f" ({len(scoped)} of them only left the scope: {allow} keeps those)" if scoped else ""
    return (
        f"mass-deletion guard: this pass would {what} of {tracked} tracked pages "
        f"(more than {max_delete_share:.0%}{why}); {done}. If the site really lost them, "
        f"run again with --allow-mass-delete{also}"
    )


class Purge(NamedTuple):
    """A page found gone this pass, waiting for the end of it."""

    page: PageState
    left_sitemap: bool  # left the sitemap (or the crawl): no revisit; else a 404/410/301, revisited
    reason: str
    moved_to: str | None = None


class Ledger:
    """What the end of the pass settles, filled while it visits: purges, undone redirects and
    the changes held for the guard. `on_leaving` hears each page queued for the purge (the
    embed queue reads a leaving page's vectors for reuse until the purges)."""

    def __init__(self, on_leaving: Callable[[PageState], None] = lambda page: None):
        self.on_leaving = on_leaving
        self.purges: dict[str, Purge] = {}  # url -> every page this pass found gone
        self.unmoved: set[str] = set()  # targets some page redirected to before this pass and no longer does
        # Changes that may be a broken deploy (`may_be_broken`), written or held at the end
        # of the pass (`Settler.settle_suspects`).
        self.suspects: dict[str, PendingPage] = {}

    def queue_purge(self, page: PageState, *, left_sitemap: bool, reason: str, moved_to: str | None = None) -> None:
        """Purges wait for the end of the pass, where the mass-deletion guard sees them all.

        Any page may be queued (a NEW page answering 404, a gone page found gone again):
        only those live in the state count as removals (`Settler.apply_purges`)."""
        if page.url not in self.purges:
            self.on_leaving(page)
        self.purges[page.url] = Purge(page, left_sitemap, reason, moved_to)

    def queue_removals(
        self,
        removals: Sequence[ChangeEvent],
        known: dict[str, PageState],
        out_of_scope: dict[str, str],
        unwanted: Callable[[str], str | None],
    ) -> None:
        """Queue the pages that left the sitemap or the site rules (the plan's removals) for the purge."""
        for ev in removals:
            if ev.url in known:
                page = known[ev.url]
                if page.moved_to is not None:
                    self.unmoved.add(page.moved_to)
                # Still listed but out of scope now (an --allow-host dropped) or excluded by
                # the site rules: a fresh index would not hold it either, so it goes, under
                # its real reason.
                why = out_of_scope.get(ev.url)
                reason = f"out of scope: {why}" if why else (unwanted(ev.url) or "left the sitemap")
                self.queue_purge(page, left_sitemap=True, reason=reason)


class Settler:
    """The end of a pass: the guard's verdict over the ledger, the held changes, then the purges."""

    def __init__(
        self,
        ledger: Ledger,
        queue: EmbedQueue,
        outcomes: Outcomes,
        store: Store,
        state: State,
        *,
        now: datetime,
        dry_run: bool,
        allow_mass_delete: bool,
        mass_delete_min: int,
        max_delete_share: float,
    ):
        self.ledger, self.queue, self.outcomes, self.store, self.state = ledger, queue, outcomes, store, state
        self.report = outcomes.report
        self.now, self.dry_run = now, dry_run
        self.allow_mass_delete, self.mass_delete_min = allow_mass_delete, mass_delete_min
        self.max_delete_share = max_delete_share
        self.broken: set[str] = set()  # suspects `broken_deploy` picked: they count toward the guard
        self.guard: str | None = None  # the mass-deletion guard's refusal, once judged

    def queue_orphans(self, named: set[str]) -> None:
        """Purge the targets of redirects undone this pass that nothing names any more: no
        sitemap or --url, and no other page moved to them (a fresh index would not have them).

        Reads every page of the state, but only in a pass where a redirect was undone."""
        ledger = self.ledger
        if not ledger.unmoved:
            return
        # This pass's purges set their pages' targets; the state holds every other page's.
        still = {p.moved_to for p in ledger.purges.values() if p.moved_to}
        still |= {p.moved_to for p in self.state.all_pages() if p.moved_to and p.url not in ledger.purges}
        for url in sorted(ledger.unmoved - still - named):
            page = self.state.get(url)
            if page is not None and page.status == LIVE and page.source == "url" and url not in ledger.purges:
                ledger.queue_purge(page, left_sitemap=True, reason="no page redirects here any more")

    def judge_guard(self, tracked_before: int) -> str | None:
        """Once every page of the pass was seen: the live pages it would purge (but those
        that moved to a page indexed now), and those whose change looks like a broken
        deploy, against the mass-deletion guard (of `tracked_before` pages). The refusal, or None."""
        purges = self.ledger.purges.values()
        self.broken = broken_deploy(
            {
                url: (item.page.chunk_count, len(item.chunks), item.page.text_chars, len(item.markdown), item.hash_)
                for url, item in self.ledger.suspects.items()
            }
        )
        # A 301/308 whose target holds the text now lost nothing: a site that moves every
        # page (http -> https, www -> apex, a trailing slash) settles on the targets at once.
        live = sum(
            1
            for p in purges
            if p.page.status == LIVE and (p.moved_to is None or p.moved_to not in self.outcomes.landed)
        )
        scoped = [p.page.url for p in purges if p.page.status == LIVE and p.reason.startswith("out of scope")]
        self.guard = guard_refusal(
            live + len(self.broken),
            tracked_before,
            emptied=len(self.broken),
            scoped=scoped,
            allow_mass_delete=self.allow_mass_delete,
            mass_delete_min=self.mass_delete_min,
            max_delete_share=self.max_delete_share,
        )
        if self.guard:
            self.report.mass_delete_blocked = live + len(self.broken)
            self.report.error("(pass)", self.guard)
        return self.guard

    async def settle_suspects(self) -> None:
        """Write the changes held for the guard (`may_be_broken`), before the purges: all of
        them when the guard lets the pass go on; else all but the broken-looking ones, which
        keep their points and old validators (the next visit reads them again) and come back
        with the failure backoff."""
        suspects = self.ledger.suspects
        if not suspects:
            return
        held = []
        for url, item in suspects.items():
            page = item.page
            if self.guard and url in self.broken:
                page.failures += 1
                page.last_error = held_reason(page.chunk_count, len(item.chunks), page.text_chars, len(item.markdown))
                page.due_at = self.now + failure_backoff(page.failures)
                held.append(page)
                continue
            await self.queue.enqueue(item)
            if self.queue.full():
                await self.queue.flush()
        self.outcomes.save(held)
        self.ledger.suspects = {}
        await self.queue.flush()
        await self.queue.drain()

    async def apply_purges(self) -> None:
        """Delete the pages' points, then mark them gone (pending mark in between).

        Only pages live in the state count: as removals in the report and toward the
        mass-deletion guard, whose base (the tracked pages before the pass) holds them, so
        the share is never above 1. A new or already gone page found gone (again) holds no
        points: it is only settled (gone, its redirect target kept, rescheduled), also when
        the guard holds the live ones back.
        """
        items = list(self.ledger.purges.values())
        if not items:
            return
        live = [it for it in items if it.page.status == LIVE]
        if self.guard:  # judged with the broken-looking changes (`judge_guard`)
            held = []
            for page, left_sitemap, reason, _ in live:
                if not left_sitemap:  # a 404/410/301 held back: look again soon
                    page.failures += 1
                    page.last_error = f"purge held by the mass-deletion guard ({reason})"
                    page.due_at = self.now + failure_backoff(page.failures)
                    held.append(page)
            self.outcomes.save(held)
            items = [it for it in items if it.page.status != LIVE]
        else:
            for page, _, reason, _ in live:
                self.outcomes.record(page, Decision(Action.PURGE, reason))
        if self.dry_run or not items:
            return
        pages = [it.page for it in items]
        # Points exist only under live pages and interrupted writes or purges.
        indexed = [p for p in pages if p.status == LIVE or p.pending_hash is not None]
        for p in indexed:
            p.pending_hash = "purge"
        self.outcomes.save(indexed)
        if indexed:
            self.report.chunks_deleted += await asyncio.to_thread(self.store.delete_pages, [p.url for p in indexed])
        for p, left_sitemap, _, moved_to in items:
            p.status, p.content_hash, p.pending_hash, p.chunk_count = GONE, None, None, 0
            p.etag = p.last_modified = None
            p.moved_to = moved_to
            if left_sitemap:
                p.in_sitemap, p.due_at = False, None
            else:
                p.interval = next_interval(p.interval, changed=False)
                p.due_at = self.now + p.interval
            p.failures, p.last_error = 0, None
        self.outcomes.save(pages)
        if isinstance(self.state, TextKeeper):  # a state that keeps texts forgets theirs
            self.state.drop_texts([p.url for p in pages])
