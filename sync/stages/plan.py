"""Plan: the sitemaps read and sorted, then the diff, the schedule and the budget -> visits and removals.

`Planner.read_sitemaps` reads the configured sitemaps (conditional GETs) and sorts their
entries: in scope and wanted, out of scope, excluded. `Planner.plan` turns them, the due
queue and the preflight's marks into the pass's `Plan` (`sync.core.planning`), with what a
deploy, the feed, --changed or a bulk edit add, ordered by the policy and cut to
--max-fetches, and writes what the sitemap says before any visit (`record_sitemap`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Callable, Sequence

from ..core.ids import canonical_url
from ..core.page import GONE, LIVE, PageState
from ..core.planning import ChangeEvent, Plan, SitemapRead, emptied_sitemap_errors, plan_events, record_sitemap
from ..core.plural import plural
from ..core.bulk_edits import url_section
from ..core.history import history_from_json
from ..core.policies import Policy, _span, make_policy
from ..core.visit_selection import Candidate, select_visits
from ..core.scope import Scope, all_out_of_scope, some_out_of_scope
from ..core.sitemaps import NOT_A_SITEMAP, collect_sitemaps, feed_hosts, lastmod_state, lastmods_to_record
from ..edges.fetcher import Fetcher
from ..edges.httpcache import memo_parser
from ..edges.state_protocol import State
from ..errors import ConfigError, PagesyncError
from .bulk_edits import BulkEdits
from .deploys import Deploys
from .outcomes import Outcomes
from .preflight import CollectionCheck
from .schedule import Scheduler

__all__ = ["Planner", "pass_policy", "uniform_interval_s"]

log = logging.getLogger("pagesync")

_SCOPE_SKIP = "sitemap out of scope"  # collect_sitemaps' reason for a child sitemap the scope refuses


def uniform_interval_s(policy: Policy) -> float | None:
    """Uniform's one interval in seconds (what the run report records); None for the others."""
    return float(policy.interval_s) if policy.name == "uniform" else None  # type: ignore[attr-defined]


def pass_policy(name: str, interval: timedelta | None, *, repair: bool, last_report: dict) -> Policy:
    """The policy a pass schedules with: the one asked for, or, for a repair pass (audit
    --fix), which chooses none, the last pass's, so the pages it rewrites are scheduled as
    the next pass would and the next pass sees no policy switch."""
    policy = make_policy(name, interval=interval)
    return (_last_policy(last_report) or policy) if repair else policy


def _last_policy(last_report: dict) -> Policy | None:
    """The policy the last recorded pass scheduled with, or None when it is not known."""
    name = last_report.get("policy")
    if not name:
        return None
    secs = last_report.get("revisit_interval_s")
    try:
        return make_policy(name, interval=timedelta(seconds=secs) if name == "uniform" and secs else None)
    except (PagesyncError, TypeError, ValueError):
        return None


class Planner:
    """Reads the sitemaps and plans the pass's visits and removals."""

    def __init__(
        self,
        fetcher: Fetcher,
        state: State,
        scheduler: Scheduler,
        deploys: Deploys,
        bulk: BulkEdits,
        outcomes: Outcomes,
        marks: CollectionCheck,
        *,
        scope: Scope,
        unwanted: Callable[[str], str | None],
        sitemaps: Sequence[str],
        urls: Sequence[str],
        full: bool,
        max_fetches: int | None,
        max_sitemap_urls: int,
        allow_mass_delete: bool,
        now: datetime,
        stamp_clock: datetime,
        last_report: dict,
    ):
        self.fetcher, self.state, self.scheduler, self.deploys, self.bulk = fetcher, state, scheduler, deploys, bulk
        self.outcomes, self.marks, self.report = outcomes, marks, outcomes.report
        self.scope, self.unwanted = scope, unwanted
        self.sitemaps, self.urls, self.full, self.max_fetches = sitemaps, urls, full, max_fetches
        self.max_sitemap_urls, self.allow_mass_delete = max_sitemap_urls, allow_mass_delete
        # `stamp_clock`: a sitemap stamp later than this (and a day) is no stamp (`lastmod_in_time`).
        self.now, self.stamp_clock, self.last_report = now, stamp_clock, last_report

    async def read_sitemaps(self) -> SitemapRead:
        """Read the configured sitemaps (conditional GETs, a kept parse for a 304) and sort
        their entries: in scope (the pass's sitemap), out of scope (listed, never fetched),
        invalid, child sitemaps skipped; each goes to the report. An emptied sitemap or site
        is an error here, so nothing of it is purged (`emptied_sitemap_errors`)."""
        sm = await collect_sitemaps(
            self.sitemaps,
            self.fetcher.fetch_bytes,
            scope=self.scope.check,
            parse=memo_parser(self.fetcher.cache),
            now=self.stamp_clock,
            max_urls=self.max_sitemap_urls,
        )
        self.report.bytes_downloaded += sm.bytes_downloaded
        if sm.not_sitemaps and self.state.tracked_count() == 0:
            # A first run pointed at a web page: the configuration is wrong, nothing to sync yet.
            raise ConfigError(f"--sitemap {sm.not_sitemaps[0]} is {NOT_A_SITEMAP}")
        self.report.sitemaps_not_modified = self.fetcher.sitemaps_not_modified
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
            elif (why := self.unwanted(url)) is not None:
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
            log.info(
                "skipped %s with an invalid <loc>, e.g. %r (%s)",
                plural(len(sm.invalid), "sitemap entry", "sitemap entries"),
                loc,
                reason.removeprefix("invalid <loc>: "),
            )
        for url, reason in sm.skipped:  # child sitemaps, not pages
            self.report.skip(url, reason)
            self.report.sitemaps_skipped += 1
            # Rare, and every page it lists goes untracked: said at INFO, not only in the report
            # (out of scope: in `_judge_scope`'s one line).
            if not reason.startswith(_SCOPE_SKIP):
                log.info("skipped sitemap %s (%s)", url, reason)
        before = self.state.sitemap_urls()
        if not self.allow_mass_delete:
            sm.errors.extend(emptied_sitemap_errors(self.sitemaps, sm.complete, sitemap_now, before, refused))
        self.report.pages_in_sitemaps = len(sitemap_now)
        self.report.sitemap_errors = len(sm.errors)
        for url, err in sm.errors:
            self.report.error(url, f"sitemap: {err}")
        return SitemapRead(sm, sitemap_now, out_of_scope, before, excluded)

    def _judge_excluded(self, excluded: dict[str, str], any_wanted: bool) -> None:
        """Count the sitemap URLs the site rules keep out, and say so in one line. Sitemaps
        whose every URL is excluded are a configuration error (an --include that matches
        nothing), before anything is fetched or purged."""
        self.report.pages_excluded += len(excluded)
        if not excluded:
            return
        url, why = next(iter(excluded.items()))
        if not any_wanted and self.sitemaps:
            raise ConfigError(
                f"every URL the sitemaps list is excluded ({plural(len(excluded), 'URL')}, e.g. "
                f"{url}: {why}): check --include/--exclude; no page was fetched or purged"
            )
        log.info("excluded %s the sitemaps list, e.g. %s (%s)", plural(len(excluded), "URL"), url, why)

    def _judge_scope(
        self, skipped: Sequence[tuple[str, str]], out_of_scope: dict[str, str], any_in_scope: bool
    ) -> list[str]:
        """Sitemaps that list only URLs (or child sitemaps) the scope refuses: a configuration
        error (exit 2), before anything is fetched or purged. A host alias (`--sitemap
        http://localhost/...` listing 127.0.0.1) would otherwise skip every page of a fresh
        state, and read as "the site is empty" on a tracked one. Some refused: one line.
        Returns the refused URLs."""
        refused = [*out_of_scope, *(u for u, why in skipped if why.startswith(_SCOPE_SKIP))]
        if not refused or not self.sitemaps:
            return refused
        if not any_in_scope:
            raise ConfigError(all_out_of_scope(refused, self.scope.hosts))
        log.warning("%s", some_out_of_scope(refused, self.scope.hosts))
        return refused

    def plan(self, read: SitemapRead) -> Plan:
        """The pass's visits and removals (`plan_events`), ordered and cut to the budget, and
        what the sitemap says written to the state before any visit (`record_sitemap`)."""
        sm, sitemap_now, before = read.collection, read.entries, read.before
        marks, sched = self.marks, self.scheduler
        # --url pages the site rules exclude are not tracked either (an exclude wins).
        extra = [u for u in map(canonical_url, self.urls) if self.unwanted(u) is None]
        hosts = feed_hosts(sitemap_now)
        sched.see_sitemap(sitemap_now, hosts)
        made_due = self._reschedule_on_switch()
        due = self.state.due_urls(self.now)  # includes pages with a pending write
        if made_due or marks.short:  # a dry run wrote nothing: its rescheduled pages are not in the state
            due = sorted(set(due) | made_due | marks.short)
        # Only pages the diff or the schedule touches are loaded: a sitemap entry whose
        # record does not move (`lastmods_to_record`: the same lastmod, or a host whose
        # stamps say nothing today, which keeps its recorded ones) changes nothing, so a
        # pass over 20,000 unchanged pages, or a deploy-date night, reads a handful of rows.
        to_record = lastmods_to_record(before, sitemap_now, hosts, self.stamp_clock)
        candidates = to_record.keys() | (before.keys() - sitemap_now.keys()) | set(extra) | set(due) | marks.rebuilding
        known = self.state.get_many(candidates) if not self.full else {p.url: p for p in self.state.all_pages()}
        pending = [u for u, p in known.items() if p.pending_hash is not None]
        visits, removals, trusted, advanced = plan_events(
            sitemap_now=sitemap_now,
            sitemap_before=before,
            sitemap_complete=sm.complete and bool(self.sitemaps),
            extra_urls=extra,
            known=known,
            due=due,
            pending=pending,
            full=self.full,
            lastmod_due=sched.lastmod_due,
            rebuild=sorted(marks.rebuilding),
            feed=hosts,
            now=self.stamp_clock,
        )
        self.report.lastmod_trusted = trusted if sitemap_now else None
        # Judged per host, as the feed is: stamps that vary only between two sites are "same".
        state = lastmod_state(sitemap_now.values()) if sitemap_now else None
        self.report.lastmod_state = "same" if state == "varied" and not trusted else state
        if self.sitemaps and not sm.complete:
            # The removals a failed or empty sitemap held back: live pages it did not list.
            self.report.mass_delete_blocked = sum(
                1
                for u in before.keys() - sitemap_now.keys()
                if (p := known.get(u)) is not None and p.status == LIVE and p.source != "url" and u not in extra
            )
        # --changed, the feed, a deploy (`sync.stages.deploys`); pages a trusted lastmod covers are its.
        visits = self.deploys.plan(visits, known, lastmod_covers=sched.lastmod_covers)
        visits += self.bulk.suspects(visits, known, sitemap_now, self.state)
        visits, unwanted = self._wanted_only(visits, known, sm.complete and bool(self.sitemaps))
        removals += unwanted
        sched.reasons = {ev.url: ev.reason for ev in visits}
        self.report.pages_due = len(visits)
        visits = self._order_and_cut(visits, known)

        # New URLs become rows first (status NEW, no points claimed), so a crash later in
        # the pass still leaves them due; sitemap membership and lastmod are recorded, and
        # trusted advances made due, in the same rows (`record_sitemap`: the recorded stamp
        # never gets ahead of the visit it asks for). Only rows that are new or altered
        # here are written (a --full pass over 20,000 known pages writes none of them twice).
        pages, dirty = record_sitemap(
            visits=visits,
            known=known,
            sitemap_now=sitemap_now,
            to_record=to_record,
            advanced=advanced,
            extra=extra,
            now=self.now,
            lastmod_due=sched.lastmod_due,
        )
        self.outcomes.save(list(dirty.values()))
        return Plan(visits, removals, [pages[ev.url] for ev in visits], extra, known)

    def _wanted_only(
        self, visits: list[ChangeEvent], known: dict[str, PageState], sitemap_complete: bool
    ) -> tuple[list[ChangeEvent], list[ChangeEvent]]:
        """The visits the site rules want, and removals for the tracked pages among the rest.

        An excluded page is never fetched. A sitemap page leaves as a page that left the
        sitemap does: `plan_events` made it a removal when every sitemap was read (the rules
        took it out of the sitemap's entries), and a pass whose sitemap failed removes
        nothing. A --url page (or a redirect's target) leaves here. Every removal goes
        behind the mass-deletion guard."""
        wanted: list[ChangeEvent] = []
        removals: list[ChangeEvent] = []
        for ev in visits:
            if self.unwanted(ev.url) is None:
                wanted.append(ev)
                continue
            page = known.get(ev.url)
            if page is not None and (page.source == "url" or sitemap_complete):
                removals.append(ChangeEvent(ev.url, "removed"))
        return wanted, removals

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
        policy = self.scheduler.policy
        new_s = uniform_interval_s(policy)
        if (old, old_s) == (policy.name, new_s):
            return set()
        was = f"{old} {_span(timedelta(seconds=old_s))}" if old == "uniform" and old_s else old
        now_ = f"{policy.name} {_span(timedelta(seconds=new_s))}" if new_s else policy.name
        if policy.name == "halve-double":
            log.info(
                "revisit policy changed since the last pass (%s -> %s): each page goes on from its current interval",
                was,
                now_,
            )
            return set()
        changed: list[PageState] = []
        tracked = 0
        for page in self.state.all_pages():
            if (
                page.status == GONE
                or page.last_fetched_at is None
                or page.failures
                or page.pending_hash is not None
                or page.due_at is None
            ):
                continue
            tracked += 1
            if new_s is not None:  # uniform
                interval = timedelta(seconds=new_s)
                due_at = page.last_fetched_at + interval
                if page.due_at <= due_at:
                    continue
            else:
                visits = history_from_json(page.history)
                interval = self.scheduler.policy_for(page.url).next_interval(
                    visits, page.interval, visits[-1].changed if visits else None
                )
                due_at = page.last_fetched_at + interval
                if due_at == page.due_at:
                    continue
            page.interval, page.due_at = interval, due_at
            changed.append(page)
        self.outcomes.save(changed)
        made_due = {p.url for p in changed if p.due_at is not None and p.due_at <= self.now}
        self.report.pages_rescheduled = len(changed)
        log.info(
            "revisit policy changed since the last pass (%s -> %s): %s %d of %d visited pages, %d of them due now",
            was,
            now_,
            "would reschedule" if self.outcomes.dry_run else "rescheduled",
            len(changed),
            tracked,
            len(made_due),
        )
        return made_due

    def _order_and_cut(self, visits: list[ChangeEvent], known: dict[str, PageState]) -> list[ChangeEvent]:
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
            edit = self.bulk.edit_for(ev.url) if not forced else None
            cands.append(
                Candidate(
                    url=ev.url,
                    visits=tuple(history_from_json(page.history)) if page is not None and not forced else (),
                    since_last_visit_s=(self.now - last).total_seconds() if last is not None else None,
                    due=True,
                    forced=forced,
                    repair=(
                        ev.reason == "pending"
                        or ev.url in self.marks.rebuilding
                        or ev.url in self.marks.short
                        or (page is not None and page.pending_hash is not None)
                    ),
                    bonus_s=(
                        edit.bonus(last.timestamp() if last is not None else None, now_s, url_section(ev.url))
                        if edit is not None
                        else 0.0
                    ),
                    policy=self.scheduler.policy_for(ev.url) if not forced else None,
                )
            )
        order = select_visits(cands, self.scheduler.policy, self.max_fetches)
        by_url = {ev.url: ev for ev in visits}
        self.report.pages_deferred = len(visits) - len(order)
        return [by_url[u] for u in order]
