"""Pure planning: the sitemap diff, extra URLs and the due queue merged into a pass's visits.

`plan_events` merges them into change events (visits with their reason, and removals);
`record_sitemap` says what is written about the sitemap before any visit (never ahead of
the visit it asks for); `pages_within_chunk_budget` cuts pages to a chunk budget;
`emptied_sitemap_errors` holds back the removals of an emptied sitemap. No I/O: the plan
stage (`sync.stages.plan`) reads and writes around them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Sequence

from .ids import canonical_url
from .page import GONE, LIVE, NEW, PageState
from .scope import allow_host_flags, refused_by_host, url_host
from .sitemaps import SitemapCollection, diff_sitemap

__all__ = [
    "REASONS",
    "ChangeEvent",
    "Plan",
    "SitemapRead",
    "emptied_sitemap_errors",
    "plan_events",
    "record_sitemap",
    "pages_within_chunk_budget",
]


# Why a page is visited this pass, most specific first (a page gets its first reason).
REASONS = ("new", "pending", "rebuild", "changed", "lastmod", "feed", "deploy", "due", "full", "removed", "bulk")


@dataclass(frozen=True)
class ChangeEvent:
    """A URL the plan visits or removes this pass, with its reason (one of `REASONS`)."""

    url: str
    reason: str


def plan_events(
    *,
    sitemap_now: dict[str, str | None],
    sitemap_before: dict[str, str | None],
    sitemap_complete: bool,
    extra_urls: Sequence[str],
    known: dict[str, PageState],
    due: Sequence[str],
    pending: Sequence[str],
    full: bool,
    lastmod_due: Callable[[str], bool] = lambda url: True,
    rebuild: Sequence[str] = (),
    feed: frozenset[str] | None = None,
    now: datetime | None = None,
) -> tuple[list[ChangeEvent], list[ChangeEvent], bool, list[str]]:
    """Pure: merge the sitemap diff, extra URLs and the due queue into change events.

    Returns (visits, removals, lastmod_trusted, lastmod_advanced). A lastmod advance makes
    a page due now only when `lastmod_due(url)` (its host's lastmod has earned trust); all
    advances are returned so their confirmation can be counted at the next visit. A URL
    absent from the sitemaps is a removal only when every sitemap was read
    (`sitemap_complete`) and we still track it through a sitemap; a failed sitemap never
    reads as "every URL removed". `full` visits every known page that is not gone, and
    gone ones (404/410/301) that a sitemap or `extra_urls` still names. `rebuild`: indexed
    pages whose points the collection lost (it was missing or empty at the pass's start):
    visited with reason "rebuild". `feed`: the hosts whose lastmods are a change feed
    (`feed_hosts(sitemap_now)`), when the caller has them already. A due page whose
    recorded advance awaits its visit (`lastmod_pending`; a pass that recorded it was
    killed before the visit, see `record_sitemap`) goes as "lastmod" again while its host
    is trusted, as it would have in that pass. `now`: the pass's clock, past which a
    stamp is no stamp (`lastmod_in_time`).
    """
    diff = diff_sitemap(sitemap_before, sitemap_now, feed, now)
    reasons: dict[str, str] = {}
    extras = set(extra_urls)

    def add(url: str, reason: str) -> None:
        if url not in reasons or REASONS.index(reason) < REASONS.index(reasons[url]):
            reasons[url] = reason

    for u in diff.added:
        page = known.get(u)
        add(u, "new" if page is None or not page.indexed else "due")
    for u in extra_urls:
        page = known.get(u)
        if page is None or page.status != LIVE:
            add(u, "new")
    for u in pending:
        add(u, "pending")
    for u in rebuild:
        add(u, "rebuild")
    for u in diff.lastmod_changed:
        if lastmod_due(u):
            add(u, "lastmod")
    for u in due:
        page = known.get(u)
        add(u, "lastmod" if page is not None and page.lastmod_pending and lastmod_due(u) else "due")
    if full:
        # Gone pages too while a sitemap or --url still names them: one may be back.
        for u, page in known.items():
            if page.status != GONE or page.in_sitemap or u in sitemap_now or u in extras:
                add(u, "full")
    removals: list[ChangeEvent] = []
    if sitemap_complete:
        for u in diff.removed:
            page = known.get(u)
            if u in extras or (page is not None and page.source == "url"):
                continue
            # Gone and new pages too: no points, but they leave the schedule (not counted as removed).
            removals.append(ChangeEvent(u, "removed"))
            reasons.pop(u, None)
    visits = [ChangeEvent(u, r) for u, r in sorted(reasons.items(), key=lambda kv: (REASONS.index(kv[1]), kv[0]))]
    return visits, removals, diff.lastmod_trusted, diff.lastmod_changed


def record_sitemap(
    *,
    visits: Sequence[ChangeEvent],
    known: dict[str, PageState],
    sitemap_now: dict[str, str | None],
    to_record: dict[str, str | None],
    advanced: Sequence[str],
    extra: Sequence[str],
    now: datetime,
    lastmod_due: Callable[[str], bool] = lambda url: True,
) -> tuple[dict[str, PageState], dict[str, PageState]]:
    """No I/O: what the pass writes about the sitemap before it visits anything.

    Returns (pages to visit, by url; rows to write now). New URLs become rows (status
    NEW, due, no points claimed); `to_record` (`lastmods_to_record`) sets membership and
    the `lastmod` the next diff compares against; advances are marked `lastmod_pending`
    (counted toward the host's trust at the page's visit). Known pages are updated in place.

    Crash safety rests on one rule: whatever this write records of the new sitemap never
    gets ahead of the visit it asks for. A recorded stamp is what the next pass diffs
    against, so once it is written the diff shows the advance no more (a kept sitemap or a
    304 gives the same entries): hence a trusted advance and a newly listed page are made
    due (`due_at` now) in the very row that records their new stamp or membership. A pass
    killed before the visit leaves them due, and the next pass visits them (an advance
    still as "lastmod", `plan_events`); one that gets there reschedules them as usual.
    Pages that left the sitemap are not touched here: they stay listed in the state until
    their purge (`_apply_purges`), so the next pass sees them leave again.
    """
    pages: dict[str, PageState] = {}
    dirty: dict[str, PageState] = {}
    for ev in visits:
        page = known.get(ev.url)
        if page is None:  # due_at None: due until a visit schedules it
            page = dirty[ev.url] = PageState(
                url=ev.url, status=NEW, first_seen_at=now, source="sitemap" if ev.url in sitemap_now else "url"
            )
        pages[ev.url] = page
    for url in advanced:
        page = pages.get(url) or known.get(url)
        if page is None:
            continue
        if not page.lastmod_pending:
            page.lastmod_pending = True
            dirty[url] = page
        if lastmod_due(url) and page.due_at is not None and page.due_at > now:
            page.due_at = now  # written with the new stamp (every advance is in `to_record`): one row
            dirty[url] = page
    for url in sorted(to_record):
        lastmod = to_record[url]
        page = pages.get(url) or known.get(url)
        if page is None:
            continue
        if not page.in_sitemap and page.due_at is not None and page.due_at > now:
            page.due_at = now  # newly listed: visited this pass ("new" or "due"), so due until then
        if not page.in_sitemap or page.sitemap_lastmod != lastmod:
            page.in_sitemap, page.sitemap_lastmod = True, lastmod
            dirty[url] = page
    for u in extra:
        page = pages.get(u)
        if page is not None and page.url not in sitemap_now and page.source != "url":
            page.source = "url"
            dirty[u] = page
    return pages, dirty


def pages_within_chunk_budget(pages: Sequence[PageState], budget: int) -> tuple[list[str], int, int]:
    """Pure: the urls of `pages`, in order, whose recorded chunks fit in `budget` (a page
    too large is passed over, smaller ones after it may still fit). Returns (urls, budget
    left, pages passed over)."""
    urls, over = [], 0
    for page in pages:
        n = max(page.chunk_count, 1)
        if n > budget:
            over += 1
            continue
        budget -= n
        urls.append(page.url)
    return urls, budget, over


def _allow_hosts(urls: Sequence[str]) -> str:
    """ "add --allow-host a --allow-host b:8080": the flags that would bring `urls` into scope."""
    return "add " + allow_host_flags(refused_by_host(urls))


def emptied_sitemap_errors(
    sitemaps: Sequence[str],
    complete: bool,
    entries: dict[str, str | None],
    before: dict[str, str | None],
    refused: Sequence[str],
) -> list[tuple[str, str]]:
    """Pure: the sitemap errors (where, why) that hold back the removals of an emptied
    sitemap or site (not asked for with --allow-mass-delete, which the caller checks):
    `entries` the sitemaps' URLs in scope now, `before` the state's, `refused` the listed
    URLs the scope refuses."""
    if not (sitemaps and complete and before):
        return []
    if not entries:
        # An empty sitemap where we tracked pages is a broken deploy, not a deleted site.
        return [
            (
                ", ".join(sitemaps),
                "sitemap(s) listed no URLs; nothing purged "
                "(if the site really is empty, run again with --allow-mass-delete)",
            )
        ]
    # The same per site: with several sitemaps, one that comes back empty would purge its
    # whole site under the others' URLs (and a small site is under the guard's minimum).
    # A site is a configured sitemap's host and port: pages of a --sitemap dropped from
    # the configuration go (out of scope, or left the sitemap) as before.
    configured = {url_host(canonical_url(u))[0] for u in sitemaps}
    listed = {url_host(u)[0] for u in entries}
    emptied = sorted({h for u in before if (h := url_host(u)[0]) in configured and h not in listed})
    if emptied and refused:  # what they list instead is out of scope: the cause is the scope
        return [
            (
                ", ".join(emptied),
                "the sitemaps listed no URLs of this site any more, only URLs "
                f"out of scope (see the warning); nothing purged (if those are this site under "
                f"another name, {_allow_hosts(refused)})",
            )
        ]
    if emptied:
        return [
            (
                ", ".join(emptied),
                "the sitemaps listed no URLs of this site any more; nothing "
                "purged (if it really is empty, run again with --allow-mass-delete)",
            )
        ]
    return []


@dataclass
class SitemapRead:
    """What the pass read of its sitemaps: the collection as read, its entries in scope and
    wanted (url -> lastmod), those out of scope (url -> why), the state's entries before,
    and those the site rules exclude (url -> why)."""

    collection: SitemapCollection
    entries: dict[str, str | None]
    out_of_scope: dict[str, str]
    before: dict[str, str | None]
    excluded: dict[str, str] = field(default_factory=dict)  # listed, not wanted (--include/--exclude): url -> why


@dataclass
class Plan:
    """The pass's plan: visits in order (within the budget) and their pages (rows written
    already), removals, the extra URLs (--url, canonical) and the pages it loaded."""

    visits: list[ChangeEvent]
    removals: list[ChangeEvent]
    pages: list[PageState]
    extra: list[str]
    known: dict[str, PageState]
