"""The pass's scheduler: which policy schedules a page, and its next visit after this one.

A service the plan, the visits and the writes share, over `PageState` alone: the pass's
revisit policy, each host's lastmod trust (as it stood when the pass began, and what this
pass's visits add to it), the sitemap's lastmod feed, the bulk-edit watch and the deploy
watch (`ScheduleHook`), which decide some pages' visits instead of their rates.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from ..core.page import PageState
from ..core.history import Visit, add_visit, history_from_json, history_json_with
from ..core.lastmod_trust import host_lastmod_trust, lastmod_makes_due
from ..core.policies import Policy
from ..core.scheduler import MAX_INTERVAL
from ..core.scope import url_host
from .bulk_edits import BulkEdits

__all__ = ["ScheduleHook", "Scheduler"]


class ScheduleHook(Protocol):
    """A watch that learns from each visit and may decide a page's visits (the deploys')."""

    def observe(self, page: PageState, changed: bool | None) -> None:
        """At a visit's reschedule, before the visit is recorded in the page's history."""

    def decides(self, url: str) -> bool:
        """Whether a deploy or a feed decides this page's visits (then its own is the 60 d one)."""


class Scheduler:
    """Policies per page and each visit's next due time (`reschedule`)."""

    def __init__(
        self,
        policy: Policy,
        trust_seen: dict[str, tuple[int, int]],
        *,
        now: datetime,
        bulk: BulkEdits | None = None,
        hook: ScheduleHook | None = None,
    ):
        self.policy, self.trust_seen, self.now = policy, trust_seen, now
        self.bulk, self.hook = bulk, hook
        self.trust_delta: dict[str, list[int]] = {}  # host -> [advances visited, advances a change confirmed]
        # The pass's sitemap entries (url -> lastmod) and the hosts whose lastmods can be a
        # change feed at all (not one stamp on every URL; `feed_hosts`): see `policy_for`.
        self.sitemap_now: dict[str, str | None] = {}
        self.feed_hosts: frozenset[str] = frozenset()
        self._feed_policies: dict[str, Policy] = {}
        self.reasons: dict[str, str] = {}  # url -> why the plan visits it

    def see_sitemap(self, entries: dict[str, str | None], feed_hosts: frozenset[str]) -> None:
        """The pass's sitemap entries and its lastmod-feed hosts (`sync.core.sitemaps.feed_hosts`)."""
        self.sitemap_now, self.feed_hosts = entries, feed_hosts

    def lastmod_due(self, url: str) -> bool:
        """Whether a lastmod advance makes `url` due now: its host's lastmod has earned trust."""
        host = url_host(url)[1]
        return lastmod_makes_due(host_lastmod_trust(*self.trust_seen.get(host, (0, 0))))

    def lastmod_covers(self, url: str) -> bool:
        """A trusted lastmod feed tells this page's changes: its host's stamps vary, it has one, and they are trusted."""
        return self.sitemap_now.get(url) is not None and url_host(url)[0] in self.feed_hosts and self.lastmod_due(url)

    def policy_for(self, url: str) -> Policy:
        """The policy that schedules `url`: the pass's, or `Policy.under_feed` when a
        trusted lastmod feed covers the page (its host's sitemap lastmods vary, this page
        has one, and its host's lastmod has earned trust), with a prior for the changes the
        feed misses that shrinks as the host's trust grows. One object per host and pass."""
        if self.sitemap_now.get(url) is None:
            return self.policy
        netloc, host = url_host(url)
        if netloc not in self.feed_hosts:
            return self.policy
        policy = self._feed_policies.get(host)
        if policy is None:
            trust = host_lastmod_trust(*self.trust_seen.get(host, (0, 0)))
            policy = self.policy.under_feed(trust) if lastmod_makes_due(trust) else self.policy
            self._feed_policies[host] = policy
        return policy

    def reschedule(self, page: PageState, changed: bool | None) -> None:
        """Record this visit in the page's history and set its next due time by the policy.

        `changed` is None for a page's first visit with text (it starts at 3 d), else
        whether the extracted text's hash changed (never ETag churn).
        """
        if self.hook is not None:
            self.hook.observe(page, changed)  # before the visit is recorded: it reads the last one
        visits = history_from_json(page.history)
        if changed is not None and page.last_fetched_at is not None:
            # Whole seconds: far below what a rate in changes per day can resolve, and the
            # history (parsed again at every visit of the page) stays short and quick to read.
            elapsed = float(max(0, round((self.now - page.last_fetched_at).total_seconds())))
            if self.bulk is not None and self.bulk.observe(
                page, visits, elapsed, changed, policy=self.policy_for(page.url), reason=self.reasons.get(page.url)
            ):
                changed = False  # put down to the bulk edit: neither the rate nor the interval moves
            else:
                # Announced: a trusted lastmod advance sent the pass here (the rate leaves such changes out).
                announced = page.lastmod_pending and self.lastmod_due(page.url)
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
        page.interval = self.policy_for(page.url).next_interval(visits, page.interval, changed)
        if self.hook is not None and self.hook.decides(page.url):  # a deploy or the feed says when
            page.interval = MAX_INTERVAL
        page.due_at = self.now + page.interval
        page.last_fetched_at = self.now
