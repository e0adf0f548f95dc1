"""Plan: the sitemap diff, the schedule and the budget -> the pass's visits and removals.

`plan_events` merges the sitemap diff, the extra URLs and the due queue into change events
(visits with their reason, and removals); `record_sitemap` says what is written about the
sitemap before any visit (never ahead of the visit it asks for); `within_budget` cuts
pages to a chunk budget. `PlanStage` holds the pass's scheduling: the policy per page
(`_policy_for`, a trusted lastmod feed), a policy switch (`_reschedule_on_switch`), the
order and cut to --max-fetches (`_within_budget`), bulk edits, and each visit's next due
time (`_reschedule`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, Sequence

from ..errors import ConfigError, PagesyncError
from ..edges.httpcache import memo_parser
from ..core.ids import canonical_url
from ..core.plural import plural
from ..core.scope import all_out_of_scope, allow_host_flags, refused_by_host, some_out_of_scope, url_host
from ..core.scheduler import MAX_INTERVAL
from ..core.site_rules import unwanted_reason
from ..core.bulk_edits import BulkState, bulk_state_from_json, url_section
from ..core.visit_selection import Candidate, select_visits
from ..core.policies import Policy, make_policy, _span
from ..core.history import Visit, add_visit, history_from_json, history_json_with
from ..core.lastmod_trust import lastmod_makes_due, host_lastmod_trust
from ..core.sitemaps import (NOT_A_SITEMAP, SitemapCollection, collect_sitemaps, diff_sitemap, feed_hosts, lastmod_state,
                        lastmods_to_record)
from ..edges.state import GONE, LIVE, NEW, PageState

log = logging.getLogger("pagesync")


# Why a page is visited this pass, most specific first (a page gets its first reason).
REASONS = ("new", "pending", "rebuild", "changed", "lastmod", "feed", "deploy", "due", "full", "removed", "bulk")


@dataclass(frozen=True)
class ChangeEvent:
    url: str
    reason: str


def _uniform_interval_s(policy) -> float | None:
    """Uniform's one interval in seconds (what the run report records); None for the others."""
    return float(policy.interval_s) if policy.name == "uniform" else None


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
            page = dirty[ev.url] = PageState(url=ev.url, status=NEW, first_seen_at=now,
                                             source="sitemap" if ev.url in sitemap_now else "url")
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


def within_budget(pages: Sequence[PageState], budget: int) -> tuple[list[str], int, int]:
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


_SCOPE_SKIP = "sitemap out of scope"  # collect_sitemaps' reason for a child sitemap the scope refuses


def _allow_hosts(urls: Sequence[str]) -> str:
    """"add --allow-host a --allow-host b:8080": the flags that would bring `urls` into scope."""
    return "add " + allow_host_flags(refused_by_host(urls))


def emptied_sitemap_errors(sitemaps: Sequence[str], complete: bool, entries: dict[str, str | None],
                           before: dict[str, str | None], refused: Sequence[str]) -> list[tuple[str, str]]:
    """Pure: the sitemap errors (where, why) that hold back the removals of an emptied
    sitemap or site (not asked for with --allow-mass-delete, which the caller checks):
    `entries` the sitemaps' URLs in scope now, `before` the state's, `refused` the listed
    URLs the scope refuses."""
    if not (sitemaps and complete and before):
        return []
    if not entries:
        # An empty sitemap where we tracked pages is a broken deploy, not a deleted site.
        return [(", ".join(sitemaps), "sitemap(s) listed no URLs; nothing purged "
                 "(if the site really is empty, run again with --allow-mass-delete)")]
    # The same per site: with several sitemaps, one that comes back empty would purge its
    # whole site under the others' URLs (and a small site is under the guard's minimum).
    # A site is a configured sitemap's host and port: pages of a --sitemap dropped from
    # the configuration go (out of scope, or left the sitemap) as before.
    configured = {url_host(canonical_url(u))[0] for u in sitemaps}
    listed = {url_host(u)[0] for u in entries}
    emptied = sorted({h for u in before if (h := url_host(u)[0]) in configured and h not in listed})
    if emptied and refused:  # what they list instead is out of scope: the cause is the scope
        return [(", ".join(emptied), "the sitemaps listed no URLs of this site any more, only URLs "
                 f"out of scope (see the warning); nothing purged (if those are this site under "
                 f"another name, {_allow_hosts(refused)})")]
    if emptied:
        return [(", ".join(emptied), "the sitemaps listed no URLs of this site any more; nothing "
                 "purged (if it really is empty, run again with --allow-mass-delete)")]
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


class PlanStage:
    """The pass's scheduling: policies, budget, bulk edits, next due times (a mixin of the pass)."""

    def _init_plan(self) -> None:
        """The pass's policy (a repair pass goes on with the last one), lastmod trust, the
        sitemap's feed hosts and the bulk-edit state."""
        cfg = self.cfg
        self.policy = make_policy(cfg.policy, interval=cfg.revisit_interval)
        if cfg.repair:
            # A repair pass (audit --fix) chooses no policy: the last pass's goes on, so the
            # pages it rewrites are scheduled as the next pass would, and the next pass sees
            # no policy switch (`_reschedule_on_switch`).
            self.policy = self._last_policy() or self.policy
        self.report.policy = self.policy.name
        self.report.revisit_interval_s = _uniform_interval_s(self.policy)
        self.trust_seen = self.state.host_trust_counts()
        self.trust_delta: dict[str, list[int]] = {}
        # The pass's sitemap entries (url -> lastmod) and the hosts whose lastmods can be a
        # change feed at all (not one stamp on every URL; `feed_hosts`): see `_policy_for`.
        self.sitemap_now: dict[str, str | None] = {}
        self.feed_hosts: frozenset[str] = frozenset()
        self.feed_policies: dict[str, Policy] = {}
        # Bulk edits: per host, the state carried in the last run report, and this pass's
        # (predicted P(change), changed) observations.
        self.bulk: dict[str, BulkState] = {}
        if cfg.bulk_edits:
            raw = self.last_report.get("bulk_edits")
            if isinstance(raw, dict):
                self.bulk = {str(h): bulk_state_from_json(v) for h, v in raw.items()}
        self.observed: dict[str, list[tuple[float, bool]]] = {}
        self.suspects_seen: dict[str, list[tuple[str, bool]]] = {}  # host -> (section, changed)
        self.reasons: dict[str, str] = {}

    async def _read_sitemaps(self) -> SitemapRead:
        """Read the configured sitemaps (conditional GETs, a kept parse for a 304) and sort
        their entries: in scope (the pass's sitemap), out of scope (listed, never fetched),
        invalid, child sitemaps skipped; each goes to the report. An emptied sitemap or site
        is an error here, so nothing of it is purged (`emptied_sitemap_errors`)."""
        cfg = self.cfg
        sm = await collect_sitemaps(cfg.sitemaps, self.fetcher.fetch_bytes, scope=self.scope.check,
                                    parse=memo_parser(self.fetcher.cache), now=self.stamp_clock,
                                    max_urls=cfg.max_sitemap_urls)
        self.report.bytes_downloaded += sm.bytes_downloaded
        if sm.not_sitemaps and self.state.tracked_count() == 0:
            # A first run pointed at a web page: the configuration is wrong, nothing to sync yet.
            raise ConfigError(f"--sitemap {sm.not_sitemaps[0]} is {NOT_A_SITEMAP}")
        self.report.sitemaps_not_modified = getattr(self.fetcher, "sitemaps_not_modified", 0)
        sitemap_now: dict[str, str | None] = {}
        out_of_scope: dict[str, str] = {}  # listed, never fetched: url -> why
        excluded: dict[str, str] = {}  # listed, not wanted by the site rules: url -> why
        for url, lastmod in sm.entries.items():
            reason = self.scope.check(url)
            if reason:  # a hostile or sloppy sitemap: listed, never fetched
                out_of_scope[url] = reason
                self.report.skip(url, f"out of scope: {reason}")
                self.report.pages_out_of_scope += 1
                self.report.pages_skipped += 1
            elif (why := self._unwanted(url)) is not None:
                excluded[url] = why  # as if the sitemap did not list it: a tracked one leaves
            else:
                sitemap_now[url] = lastmod
        refused = self._judge_scope(sm.skipped, out_of_scope, bool(sitemap_now) or bool(excluded))
        self._judge_excluded(excluded, bool(sitemap_now))
        for loc, reason in sm.invalid.items():  # listed, but no URL a page could have
            self.report.skip(loc, reason)
            self.report.pages_invalid_loc += 1
            self.report.pages_skipped += 1
        if sm.invalid:  # a sitemap generator writing relative URLs hides the whole site: said once
            loc, reason = next(iter(sm.invalid.items()))
            log.info("skipped %s with an invalid <loc>, e.g. %r (%s)", plural(len(sm.invalid), "sitemap entry",
                     "sitemap entries"), loc, reason.removeprefix("invalid <loc>: "))
        for url, reason in sm.skipped:  # child sitemaps, not pages
            self.report.skip(url, reason)
            self.report.sitemaps_skipped += 1
            # Rare, and every page it lists goes untracked: said at INFO, not only in the report
            # (out of scope: in `_judge_scope`'s one line).
            if not reason.startswith(_SCOPE_SKIP):
                log.info("skipped sitemap %s (%s)", url, reason)
        before = self.state.sitemap_urls()
        if not cfg.allow_mass_delete:
            sm.errors.extend(emptied_sitemap_errors(cfg.sitemaps, sm.complete, sitemap_now, before, refused))
        self.report.pages_in_sitemaps = len(sitemap_now)
        self.report.sitemap_errors = len(sm.errors)
        for url, err in sm.errors:
            self.report.error(url, f"sitemap: {err}")
        return SitemapRead(sm, sitemap_now, out_of_scope, before, excluded)

    def _unwanted(self, url: str) -> str | None:
        """Why the site rules (--include, --exclude, the default excludes) keep `url` out, or None."""
        return unwanted_reason(url, self.cfg.site_rules.rules_for(url))

    def _judge_excluded(self, excluded: dict[str, str], any_wanted: bool) -> None:
        """Count the sitemap URLs the site rules keep out, and say so in one line. Sitemaps
        whose every URL is excluded are a configuration error (an --include that matches
        nothing), before anything is fetched or purged."""
        self.report.pages_excluded += len(excluded)
        if not excluded:
            return
        url, why = next(iter(excluded.items()))
        if not any_wanted and self.cfg.sitemaps:
            raise ConfigError(f"every URL the sitemaps list is excluded ({plural(len(excluded), 'URL')}, e.g. "
                              f"{url}: {why}): check --include/--exclude; no page was fetched or purged")
        log.info("excluded %s the sitemaps list, e.g. %s (%s)", plural(len(excluded), "URL"), url, why)

    def _judge_scope(self, skipped: Sequence[tuple[str, str]], out_of_scope: dict[str, str],
                     any_in_scope: bool) -> list[str]:
        """Sitemaps that list only URLs (or child sitemaps) the scope refuses: a configuration
        error (exit 2), before anything is fetched or purged. A host alias (`--sitemap
        http://localhost/...` listing 127.0.0.1) would otherwise skip every page of a fresh
        state, and read as "the site is empty" on a tracked one. Some refused: one line.
        Returns the refused URLs."""
        refused = [*out_of_scope, *(u for u, why in skipped if why.startswith(_SCOPE_SKIP))]
        if not refused or not self.cfg.sitemaps:
            return refused
        if not any_in_scope:
            raise ConfigError(all_out_of_scope(refused, self.scope.hosts))
        log.warning("%s", some_out_of_scope(refused, self.scope.hosts))
        return refused

    def _plan(self, read: SitemapRead) -> Plan:
        """The pass's visits and removals (`plan_events`), ordered and cut to the budget, and
        what the sitemap says written to the state before any visit (`record_sitemap`)."""
        cfg, sm, sitemap_now, before = self.cfg, read.collection, read.entries, read.before
        self.tracked_before = self.state.tracked_count()
        # --url pages the site rules exclude are not tracked either (an exclude wins).
        extra = [u for u in map(canonical_url, cfg.urls) if self._unwanted(u) is None]
        self.sitemap_now = sitemap_now
        self.feed_hosts = feed_hosts(sitemap_now)
        made_due = self._reschedule_on_switch()
        due = self.state.due_urls(self.now)  # includes pages with a pending write
        if made_due or self.marked:  # a dry run wrote nothing: its rescheduled pages are not in the state
            due = sorted(set(due) | made_due | self.marked)
        # Only pages the diff or the schedule touches are loaded: a sitemap entry whose
        # record does not move (`lastmods_to_record`: the same lastmod, or a host whose
        # stamps say nothing today, which keeps its recorded ones) changes nothing, so a
        # pass over 20,000 unchanged pages, or a deploy-date night, reads a handful of rows.
        to_record = lastmods_to_record(before, sitemap_now, self.feed_hosts, self.stamp_clock)
        candidates = to_record.keys() | (before.keys() - sitemap_now.keys()) | set(extra) | set(due) | self.rebuild
        known = self.state.get_many(candidates) if not cfg.full else {p.url: p for p in self.state.all_pages()}
        pending = [u for u, p in known.items() if p.pending_hash is not None]
        visits, removals, trusted, advanced = plan_events(
            sitemap_now=sitemap_now, sitemap_before=before, sitemap_complete=sm.complete and bool(cfg.sitemaps),
            extra_urls=extra, known=known, due=due, pending=pending, full=cfg.full, lastmod_due=self._lastmod_due,
            rebuild=sorted(self.rebuild), feed=self.feed_hosts, now=self.stamp_clock,
        )
        self.report.lastmod_trusted = trusted if sitemap_now else None
        # Judged per host, as the feed is: stamps that vary only between two sites are "same".
        state = lastmod_state(sitemap_now.values()) if sitemap_now else None
        self.report.lastmod_state = "same" if state == "varied" and not trusted else state
        if cfg.sitemaps and not sm.complete:
            # The removals a failed or empty sitemap held back: live pages it did not list.
            self.report.mass_delete_blocked = sum(
                1 for u in before.keys() - sitemap_now.keys()
                if (p := known.get(u)) is not None and p.status == LIVE and p.source != "url" and u not in extra)
        visits = self._deploy_plan(visits, known)  # --changed, the feed, a deploy (`sync.stages.deploys`)
        visits += self._bulk_suspects(visits, known, sitemap_now)
        visits, unwanted = self._wanted_only(visits, known, sm.complete and bool(cfg.sitemaps))
        removals += unwanted
        self.reasons = {ev.url: ev.reason for ev in visits}
        self.report.pages_due = len(visits)
        visits = self._within_budget(visits, known)

        # New URLs become rows first (status NEW, no points claimed), so a crash later in
        # the pass still leaves them due; sitemap membership and lastmod are recorded, and
        # trusted advances made due, in the same rows (`record_sitemap`: the recorded stamp
        # never gets ahead of the visit it asks for). Only rows that are new or altered
        # here are written (a --full pass over 20,000 known pages writes none of them twice).
        pages, dirty = record_sitemap(visits=visits, known=known, sitemap_now=sitemap_now, to_record=to_record,
                                      advanced=advanced, extra=extra, now=self.now, lastmod_due=self._lastmod_due)
        self._save(list(dirty.values()))
        planned = [pages[ev.url] for ev in visits]
        self._crawl_prepare(planned)  # a crawl's pages with no kept links are read whole
        return Plan(visits, removals, planned, extra, known)

    def _wanted_only(self, visits: list[ChangeEvent], known: dict[str, PageState],
                     sitemap_complete: bool) -> tuple[list[ChangeEvent], list[ChangeEvent]]:
        """The visits the site rules want, and removals for the tracked pages among the rest.

        An excluded page is never fetched. A sitemap page leaves as a page that left the
        sitemap does: `plan_events` made it a removal when every sitemap was read (the rules
        took it out of the sitemap's entries), and a pass whose sitemap failed removes
        nothing. A --url page (or a redirect's target) leaves here. Every removal goes
        behind the mass-deletion guard."""
        wanted: list[ChangeEvent] = []
        removals: list[ChangeEvent] = []
        for ev in visits:
            if self._unwanted(ev.url) is None:
                wanted.append(ev)
                continue
            page = known.get(ev.url)
            if page is not None and (page.source == "url" or sitemap_complete):
                removals.append(ChangeEvent(ev.url, "removed"))
        return wanted, removals

    def _last_policy(self):
        """The policy the last recorded pass scheduled with, or None when it is not known."""
        name = self.last_report.get("policy")
        if not name:
            return None
        secs = self.last_report.get("revisit_interval_s")
        try:
            return make_policy(name, interval=timedelta(seconds=secs) if name == "uniform" and secs else None)
        except (PagesyncError, TypeError, ValueError):
            return None

    def _reschedule_on_switch(self) -> set[str]:
        """When --policy or --revisit-interval differs from the last pass's, put every
        tracked page's due time under this pass's policy; returns the URLs that are due now.

        The due queue is read through an index on due_at, so due times must be right in
        the state: a page scheduled 60 d ahead by halve-double would otherwise wait out
        those 60 d under `uniform --revisit-interval 6h`. This reads every page once, only
        on a pass that switches (the run report records each pass's policy and interval).
        `uniform` caps each page's due time at its last visit + the interval; `change-rate`
        sets it to the last visit + the interval its history gives now; `halve-double`,
        which learns nothing, goes on from each page's current interval. Pages never
        visited, gone, failing (their retry backoff stands) or with a pending write (due
        anyway) are left as they are.
        """
        old = self.last_report.get("policy")
        if not old:
            return set()  # nothing ran yet, or the last run was no sync pass of a pagesync that recorded it
        old_s = self.last_report.get("revisit_interval_s") if old == "uniform" else None
        new_s = _uniform_interval_s(self.policy)
        if (old, old_s) == (self.policy.name, new_s):
            return set()
        was = f"{old} {_span(timedelta(seconds=old_s))}" if old == "uniform" and old_s else old
        now_ = f"{self.policy.name} {_span(timedelta(seconds=new_s))}" if new_s else self.policy.name
        if self.policy.name == "halve-double":
            log.info("revisit policy changed since the last pass (%s -> %s): each page goes on from its "
                     "current interval", was, now_)
            return set()
        changed: list[PageState] = []
        tracked = 0
        for page in self.state.all_pages():
            if (page.status == GONE or page.last_fetched_at is None or page.failures
                    or page.pending_hash is not None or page.due_at is None):
                continue
            tracked += 1
            if new_s is not None:  # uniform
                interval = timedelta(seconds=new_s)
                due_at = page.last_fetched_at + interval
                if page.due_at <= due_at:
                    continue
            else:
                visits = history_from_json(page.history)
                interval = self._policy_for(page.url).next_interval(
                    visits, page.interval, visits[-1].changed if visits else None)
                due_at = page.last_fetched_at + interval
                if due_at == page.due_at:
                    continue
            page.interval, page.due_at = interval, due_at
            changed.append(page)
        self._save(changed)
        made_due = {p.url for p in changed if p.due_at <= self.now}
        self.report.pages_rescheduled = len(changed)
        log.info("revisit policy changed since the last pass (%s -> %s): %s %d of %d visited pages, %d of them "
                 "due now", was, now_, "would reschedule" if self.cfg.dry_run else "rescheduled",
                 len(changed), tracked, len(made_due))
        return made_due

    def _lastmod_due(self, url: str) -> bool:
        host = url_host(url)[1]
        return lastmod_makes_due(host_lastmod_trust(*self.trust_seen.get(host, (0, 0))))

    def _policy_for(self, url: str) -> Policy:
        """The policy that schedules `url`: the pass's, or `Policy.under_feed` when a
        trusted lastmod feed covers the page (its host's sitemap lastmods vary, this page
        has one, and its host's lastmod has earned trust), with a prior for the changes the
        feed misses that shrinks as the host's trust grows. One object per host and pass."""
        if self.sitemap_now.get(url) is None:
            return self.policy
        netloc, host = url_host(url)
        if netloc not in self.feed_hosts:
            return self.policy
        policy = self.feed_policies.get(host)
        if policy is None:
            trust = host_lastmod_trust(*self.trust_seen.get(host, (0, 0)))
            policy = self.policy.under_feed(trust) if lastmod_makes_due(trust) else self.policy
            self.feed_policies[host] = policy
        return policy

    def _within_budget(self, visits: list[ChangeEvent], known: dict[str, PageState]) -> list[ChangeEvent]:
        """Order the visits by the policy and cut them to --max-fetches (`select_visits`).

        Order: pending write repairs (always, even past the budget); new pages (within
        what the repairs leave); trusted lastmod advances and --full, then pages at the
        60 d ceiling (always, even past the budget, but counted after the new pages so they
        never take a new page's place); then the due pages by the policy's priority, within
        what is left. Every visit counts against --max-fetches."""
        cands = []
        now_s = self.now.timestamp()
        for ev in visits:
            page = known.get(ev.url)
            last = page.last_fetched_at if page is not None else None
            # Forced visits go regardless of priority (`select_visits` never scores them):
            # their histories, bulk-edit bonus and policy need not be looked up.
            forced = ev.reason in ("lastmod", "full", "changed", "feed")
            edit = self._edit_for(ev.url) if not forced else None
            cands.append(Candidate(
                url=ev.url,
                visits=tuple(history_from_json(page.history)) if page is not None and not forced else (),
                since_last_visit_s=(self.now - last).total_seconds() if last is not None else None,
                due=True,
                forced=forced,
                repair=(ev.reason == "pending" or ev.url in self.rebuild
                        or ev.url in self.marked or (page is not None and page.pending_hash is not None)),
                bonus_s=(edit.bonus(last.timestamp() if last is not None else None, now_s, url_section(ev.url))
                         if edit is not None else 0.0),
                policy=self._policy_for(ev.url) if not forced else None,
            ))
        order = select_visits(cands, self.policy, self.cfg.max_fetches)
        by_url = {ev.url: ev for ev in visits}
        self.report.pages_deferred = len(visits) - len(order)
        return [by_url[u] for u in order]

    def _reschedule(self, page: PageState, changed: bool | None) -> None:
        """Record this visit in the page's history and set its next due time by the policy.

        `changed` is None for a page's first visit with text (it starts at 3 d), else
        whether the extracted text's hash changed (never ETag churn).
        """
        self._deploy_observe(page, changed)  # before the visit is recorded: it reads the last one
        visits = history_from_json(page.history)
        if changed is not None and page.last_fetched_at is not None:
            # Whole seconds: far below what a rate in changes per day can resolve, and the
            # history (parsed again at every visit of the page) stays short and quick to read.
            elapsed = float(max(0, round((self.now - page.last_fetched_at).total_seconds())))
            if self.cfg.bulk_edits and self._bulk_observe(page, visits, elapsed, changed):
                changed = False  # put down to the bulk edit: neither the rate nor the interval moves
            else:
                # Announced: a trusted lastmod advance sent the pass here (the rate leaves such changes out).
                announced = page.lastmod_pending and self._lastmod_due(page.url)
                visit = Visit(elapsed_s=elapsed, changed=changed, announced=announced)
                page.history = history_json_with(page.history, visits, visit)  # the stored text, extended
                visits = add_visit(visits, visit)
        else:
            changed = None
        if page.lastmod_pending:
            if changed is not None:
                host = url_host(page.url)[1]
                counts = self.trust_delta.setdefault(host, [0, 0])
                counts[0] += 1
                counts[1] += int(changed)
            page.lastmod_pending = False
        page.interval = self._policy_for(page.url).next_interval(visits, page.interval, changed)
        if self._deploy_interval(page):  # a deploy or the feed says when: the 60 d visit only
            page.interval = MAX_INTERVAL
        page.due_at = self.now + page.interval
        page.last_fetched_at = self.now
