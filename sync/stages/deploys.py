"""Deploys and change feeds in the pass (`--policy deploys`; `sync.core.deploys`, `sync.core.feeds`).

`Deploys.read` (after the sitemaps are read) fetches each site's change feed with one
conditional GET, and says per host whether a deploy is seen; `Deploys.plan` (inside the
plan) adds the pages a deploy, the feed or --changed make due and drops the due visits a
static host or a trusted feed makes needless; `Deploys.observe` (at each visit's
reschedule, a `ScheduleHook`) learns whether the host is static and the feed honest, and
`Deploys.changed` (told by the visitor of each changed text) whether a deploy surprised:
`Deploys.widen` then gives the host's other pages, visited in the same pass. The schedules ride in
the run report (`host_schedule`), the feed digests in the state's `page_feed` table.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Callable, Collection, Iterable, Sequence
from urllib.parse import urljoin

from ..core.deploys import (
    DeployCandidate,
    HostSchedule,
    SiteSignal,
    choose_at_deploy,
    deploy_candidate,
    deploy_seen,
    deploys_between,
    schedules_from_json,
    schedules_to_json,
    site_signals,
    surprised,
)
from ..core.feeds import FeedError, feed_candidates, feed_page_urls, generator_feed_kind, match_urls, parse_feed
from ..core.ids import canonical_url
from ..core.page import LIVE, PageState
from ..core.history import history_from_json
from ..core.scheduler import MAX_INTERVAL
from ..core.scope import url_host
from ..core.planning import REASONS, ChangeEvent, SitemapRead
from ..edges.fetcher import Fetcher
from ..edges.state_protocol import FeedDigests, State
from ..errors import PagesyncError
from .outcomes import Outcomes

__all__ = ["FEED_RECHECK", "Deploys"]

log = logging.getLogger("pagesync")

FEED_RECHECK = timedelta(days=7)  # a site with no feed is looked at again this often


class Deploys:
    """Deploy-aware scheduling and change feeds. `on`: the pass schedules by deploys (its
    policy is `deploys`); --changed pages (`changed`) are visited either way."""

    def __init__(
        self,
        fetcher: Fetcher,
        state: State,
        outcomes: Outcomes,
        *,
        on: bool,
        last_schedules: object,
        changed: Sequence[str],
        sitemaps: Sequence[str],
        crawl_starts: Sequence[str],
        max_fetches: int | None,
        now: datetime,
    ):
        self.fetcher, self.state, self.outcomes, self.report = fetcher, state, outcomes, outcomes.report
        self.sitemaps, self.crawl_starts, self.max_fetches, self.now = sitemaps, crawl_starts, max_fetches, now
        self.deploys_on = on
        self.schedules: dict[str, HostSchedule] = schedules_from_json(last_schedules)
        self.deploy_now: set[str] = set()  # hosts that deployed since the last pass
        self.feed_now: dict[str, str] = {}  # url -> the feed's digest this pass (trusted feeds)
        self.feed_hosts_read: set[str] = set()
        self.feed_before: dict[str, str] = {}
        self.feed_record: dict[str, str] = {}  # url -> digest to record (visited, or baseline)
        self.changed_given = {canonical_url(u) for u in changed}
        self.feed_pages: list[str] = []  # every page an exact feed names, as URLs: a crawl visits the unreached
        self.deploy_read: SitemapRead | None = None
        self.schedules_read: set[str] = set()  # crawled hosts whose feed was looked for this pass
        self.at_deploy: dict[str, DeployCandidate] = {}  # url -> the page's candidacy, chosen at this deploy
        self.passed_over: dict[str, list[PageState]] = {}  # host -> its candidates not chosen at this deploy
        self.surprised_hosts: dict[str, str] = {}  # host -> the page whose change surprised

    async def read(self, read: SitemapRead) -> None:
        """Each site's feed (one conditional GET; looked for next to the sitemap when not
        known) and each host's signal; a host whose signal moved since the last pass deployed."""
        if not self.deploys_on:
            return
        self.deploy_read = read
        feeds: dict[str, str | None] = {}
        for sm in self.sitemaps:
            host = url_host(canonical_url(sm))[0]
            if host in feeds:
                continue
            feeds[host] = await self._read_feed(host, sm, read)
        for host, start in self._crawl_feed_roots(feeds):  # a crawl with no sitemap: a feed found before
            feeds[host] = await self._read_feed(host, start, read)
        cache = self.fetcher.cache
        validators: dict[str, tuple[str | None, str | None]] = {}
        for sm in self.sitemaps:
            kept = cache.cached_sitemap(sm) if cache is not None else None
            if kept is not None:
                validators[sm] = (kept.etag, kept.last_modified)
        now_s = self.now.timestamp()
        for host, signal in site_signals(read.entries, validators, feeds).items():
            hs = self.schedules.get(host, HostSchedule())
            if signal.feed is None and hs.signal is not None and host not in self.feed_hosts_read:
                signal = SiteSignal(signal.validators, signal.entries, hs.signal.feed)  # not read: not moved
            if deploy_seen(hs.signal, signal):
                hs = hs.with_deploy(now_s)
                self.deploy_now.add(host)
            self.schedules[host] = _with_signal(hs, signal, now_s)
        self.report.deploy_seen = bool(self.deploy_now)
        self._report_feed()
        if self.feed_now and isinstance(self.state, FeedDigests):
            self.feed_before = self.state.feed_digests()
            # A page the feed names with nothing recorded yet: its digest now is the baseline.
            self.feed_record.update({u: d for u, d in self.feed_now.items() if u not in self.feed_before})

    async def _read_feed(self, host: str, sitemap: str, read: SitemapRead) -> str | None:
        """The digest of `host`'s feed body (None: no feed, or not trusted); `feed_now` gets
        its per-page digests. A site with no known feed is probed next to the sitemap, again
        every `FEED_RECHECK`."""
        hs = self.schedules.get(host, HostSchedule())
        now_s = self.now.timestamp()
        if not hs.feed_trusted or not isinstance(self.state, FeedDigests):
            return None
        if hs.feed_url and hs.feed_kind:
            cands = [(hs.feed_kind, hs.feed_url)]
        elif hs.feed_checked_s is None or now_s - hs.feed_checked_s >= FEED_RECHECK.total_seconds():
            # The kind a page's generator tag named is looked for first (and alone, when named).
            cands = [c for c in feed_candidates(sitemap) if hs.generator in (None, c[0])]
        else:
            return None
        kept_count = self.fetcher.sitemaps_not_modified
        found = None
        for kind, url in cands:
            try:
                body, wire = await self.fetcher.fetch_bytes(url)
            except (PagesyncError, OSError, ValueError):
                continue
            finally:
                self.fetcher.sitemaps_not_modified = kept_count  # the feed is no sitemap
            self.report.bytes_downloaded += wire
            try:
                feed = parse_feed(kind, body)
            except FeedError:
                continue
            found = (kind, url, feed, hashlib.sha256(body).hexdigest()[:32])
            break
        self.schedules[host] = replace(
            hs, feed_checked_s=now_s, feed_kind=found[0] if found else None, feed_url=found[1] if found else None
        )
        if found is None:
            return None
        self.feed_hosts_read.add(host)
        self.feed_now.update(match_urls(found[2], urljoin(sitemap, "."), read.entries))
        self.feed_pages.extend(feed_page_urls(found[2], urljoin(sitemap, ".")))
        return found[3]

    def _crawl_feed_roots(self, read_hosts: Iterable[str]) -> list[tuple[str, str]]:
        """(host, start page) of the --crawl hosts no sitemap covers whose feed is known or
        whose pages' generator tag named its kind: the feed is looked for next to the start
        page (never probed blindly: a crawl has no sitemap to find it beside)."""
        out: dict[str, str] = {}
        for start in self.crawl_starts:
            host = url_host(canonical_url(start))[0]
            hs = self.schedules.get(host)
            if host in read_hosts or host in out or hs is None or not (hs.feed_url or hs.generator):
                continue
            out[host] = start
        return sorted(out.items())

    async def crawl_feed(self) -> list[str]:
        """After a crawl walked the links: the feed of a crawled host whose generator tag a
        page of this pass named, read now, so the pages it names and no link reached are
        visited in this pass (`sync.stages.crawl.Crawl.run`). Gives every page the feeds read
        this pass name."""
        if not self.deploys_on or self.deploy_read is None:
            return self.feed_pages
        for host, start in self._crawl_feed_roots(self.feed_hosts_read | self.schedules_read):
            self.schedules_read.add(host)
            await self._read_feed(host, start, self.deploy_read)
        self._report_feed()
        return self.feed_pages

    def _report_feed(self) -> None:
        kinds = sorted({s.feed_kind for h, s in self.schedules.items() if h in self.feed_hosts_read and s.feed_kind})
        self.report.feed = kinds[0] if kinds else None
        if self.feed_hosts_read:
            self.report.feed_trusted = all(self.schedules[h].feed_trusted for h in self.feed_hosts_read)

    def generator(self, url: str, body: bytes) -> None:
        """A page read whole names its generator (`<meta name="generator">`): the host's feed
        is looked for as that kind at the next pass (at once, not after the weekly recheck)."""
        if not self.deploys_on or not body:
            return
        host = url_host(url)[0]
        hs = self.schedules.get(host) or HostSchedule()  # a crawled host has none before its feed
        if hs.feed_url is not None or not hs.feed_trusted:
            return
        kind = generator_feed_kind(body[:65536].decode("utf-8", "replace"))
        if kind is not None and kind != hs.generator:
            self.schedules[host] = replace(hs, generator=kind, feed_checked_s=None)

    def plan(
        self, visits: list[ChangeEvent], known: dict[str, PageState], *, lastmod_covers: Callable[[str], bool]
    ) -> list[ChangeEvent]:
        """The visits with what --changed, the feed and a deploy add, and without the due
        visits a static host or a trusted feed makes needless (those pages keep their
        60 d visit, so a 404 is still seen: they are rescheduled to it)."""
        by_url = {ev.url: ev for ev in visits}
        extra: dict[str, str] = {}  # url -> why: only where it is more specific than the plan's reason
        for u in sorted(self.changed_given):
            extra[u] = "changed"
        if self.deploys_on:
            for u in sorted(self.feed_now):
                before = self.feed_before.get(u)
                if before is not None and before != self.feed_now[u]:
                    extra.setdefault(u, "feed")
            deploying = {h for h in self.deploy_now if self.schedules[h].deploy_mode}
            if deploying:
                for u in self._chosen_at_deploy(deploying, known, lastmod_covers):
                    extra.setdefault(u, "deploy")
        self.report.pages_due_by_feed = sum(1 for r in extra.values() if r == "feed")
        for u in [u for u, r in extra.items() if u in by_url and REASONS.index(by_url[u].reason) <= REASONS.index(r)]:
            del extra[u]
        need = [u for u in extra if u not in known]
        if need:
            known.update(self.state.get_many(need))
        self.report.pages_changed_given = len(self.changed_given)
        out: list[ChangeEvent] = []
        dropped: list[PageState] = []
        ceiling = self.now - MAX_INTERVAL
        for ev in visits:
            if ev.url in extra:
                continue
            page = known.get(ev.url)
            if (
                self.deploys_on
                and ev.reason == "due"
                and page is not None
                and page.last_fetched_at is not None
                and page.last_fetched_at > ceiling
                and page.pending_hash is None
                and not page.failures
                and self._decided(ev.url)
            ):
                page.due_at = page.last_fetched_at + MAX_INTERVAL
                page.interval = MAX_INTERVAL
                dropped.append(page)
                continue
            out.append(ev)
        self.outcomes.save(dropped)
        added = [ChangeEvent(u, r) for u, r in extra.items()]
        self.report.pages_due_by_deploy = sum(1 for ev in added if ev.reason == "deploy")
        return added + out

    def _decided(self, url: str) -> bool:
        """A page whose visits a deploy or a trusted feed decides: its host is static (pages
        change only at deploys), or the feed names it."""
        if url in self.feed_now:
            return True
        hs = self.schedules.get(url_host(url)[0])
        return hs is not None and hs.deploy_mode

    def _chosen_at_deploy(
        self, hosts: set[str], known: dict[str, PageState], lastmod_covers: Callable[[str], bool]
    ) -> list[str]:
        """The pages of the deploying static hosts whose chance of a change since their
        last visit reaches the threshold, or whose turn it is, within --max-fetches. Pages a trusted feed or a
        trusted lastmod covers are left to them."""
        now_s = self.now.timestamp()
        cands: list[DeployCandidate] = []
        pages = [p for p in self.state.all_pages() if url_host(p.url)[0] in hosts]
        for p in pages:
            if p.status != LIVE or p.last_fetched_at is None or p.url in self.feed_now:
                continue
            if lastmod_covers(p.url):
                continue
            hs = self.schedules[url_host(p.url)[0]]
            cand = deploy_candidate(
                p.url, history_from_json(p.history), p.last_fetched_at.timestamp(), hs.deploys, hs.deploy_count, now_s
            )
            if cand is None:
                continue
            cands.append(cand)
            known.setdefault(p.url, p)
        chosen = choose_at_deploy(cands, self.max_fetches)
        picked = set(chosen)
        self.at_deploy = {c.url: c for c in cands if c.url in picked}
        for c in cands:
            if c.url not in picked:
                self.passed_over.setdefault(url_host(c.url)[0], []).append(known[c.url])
        return chosen

    def changed(self, url: str) -> None:
        """A page visited at this deploy read changed: a page that rarely changes makes its
        host surprised, and `widen` sends the pass to the pages the deploy passed over."""
        cand = self.at_deploy.get(url)
        if cand is not None and surprised(cand, True):
            self.surprised_hosts.setdefault(url_host(url)[0], url)

    def widen(self, visited: Collection[str]) -> list[PageState]:
        """After the plan's pages were visited: the pages a surprised deploy passed over
        (`sync.core.deploys.surprised`), those not visited yet, within what --max-fetches
        leaves. The one-off edits of a deploy come several at once; the first one found
        sends the pass to the rest of its host, not to the next deploy's turns."""
        out = [p for h in sorted(self.surprised_hosts) for p in self.passed_over.get(h, ()) if p.url not in visited]
        if self.max_fetches is not None:
            out = out[: max(0, self.max_fetches - len(visited))]
        for h in sorted(self.surprised_hosts):
            log.info(
                "deploy of %s reached further than its pages' habits (%s changed on its turn): %d more pages visited",
                h,
                self.surprised_hosts[h],
                sum(1 for p in out if url_host(p.url)[0] == h),
            )
        self.passed_over.clear()  # once per pass
        self.report.pages_due_by_deploy += len(out)
        return out

    def observe(self, page: PageState, changed: bool | None) -> None:
        """At a visit (before it is recorded): a change with no deploy seen since the
        page's last visit makes its host dynamic; a change its feed did not show makes the
        feed untrusted. Either is said once, and kept."""
        if not self.deploys_on:
            return
        host = url_host(page.url)[0]
        hs = self.schedules.get(host)
        if page.url in self.feed_now:
            self.feed_record[page.url] = self.feed_now[page.url]
        if hs is None or not changed or page.last_fetched_at is None:
            return
        last_s = page.last_fetched_at.timestamp()
        if page.url in self.feed_now and hs.feed_trusted:
            before = self.feed_before.get(page.url)
            if before is not None and before == self.feed_now[page.url]:
                why = f"{page.url} changed while its {hs.feed_kind} feed text did not"
                log.warning("change feed of %s no longer trusted: %s", host, why)
                hs = replace(hs, feed_trusted=False, reason=why)
                self.report.feed_trusted = False
                for u in [u for u in self.feed_now if url_host(u)[0] == host]:
                    self.feed_now.pop(u)
        watched = hs.watched_since_s
        if (
            hs.static is not False
            and watched is not None
            and last_s >= watched
            and not deploys_between(hs.deploys, last_s, self.now.timestamp())
            and page.url not in self.changed_given
        ):
            why = f"{page.url} changed with no deploy seen"
            log.warning("%s is scheduled as a dynamic site from now on: %s", host, why)
            hs = replace(hs, static=False, reason=hs.reason or why)
        self.schedules[host] = hs

    def decides(self, url: str) -> bool:
        """Whether a deploy or the feed decides this page's next visit: then its next
        scheduled visit is the 60 d one (its 404 check)."""
        return self.deploys_on and self._decided(url)

    def finish(self) -> None:
        """The hosts' schedules into the report (`host_schedule`), the feed digests seen into the state."""
        if not self.deploys_on:
            return
        self.report.host_schedule = schedules_to_json(self.schedules)
        if self.feed_record and not self.outcomes.dry_run and isinstance(self.state, FeedDigests):
            self.state.put_feed_digests(self.feed_record)


def _with_signal(hs: HostSchedule, signal: SiteSignal, now_s: float) -> HostSchedule:
    watched = hs.watched_since_s if hs.watched_since_s is not None else now_s
    return replace(hs, signal=signal, watched_since_s=watched)
