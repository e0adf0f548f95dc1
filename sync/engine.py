"""One sync pass, conducted: preflight -> plan -> visit (+ crawl) -> embed -> write -> settle.

`run_pass` is the one library entry point (the CLI only builds its arguments). The pass
calls its stages (`sync.stages`) in the order a page's data flows: `preflight` checks the
collection and the model against the state; `plan` reads the sitemaps and turns the diff,
the schedule and --max-fetches into visits and removals; `visit` fetches, extracts and
decides each page; `embed` gives a change's chunks their vectors; `write` replaces the page;
`settle`, once every page was seen, judges the mass-deletion guard and applies the purges.

Write order, per page, is what makes every crash repairable:

1. embed the new chunks (nothing is deleted before the new vectors exist);
2. mark the page `pending_hash` in the state;
3. in the store: delete every point with the page's url, insert the new points, and wait
   for the store to confirm;
4. record the new hash, validators and schedule in the state, clearing `pending_hash`.

A crash or error before 3 leaves the old points and old state; between 3 and 4 the
pending mark makes the next pass revisit the page unconditionally. Skips (304, same
hash) touch neither the embedder nor the store. New sitemap URLs and trusted lastmod
advances are written due before any visit, never ahead of the visit they ask for
(`record_sitemap`).

Vector reuse (step 1): a chunk whose exact text the page's stored points, a page leaving
this pass or an earlier page of the pass already hold (`sync.core.hashing.reuse_key`: embedder
id + text) takes that vector; only the other texts go to the model, each once. Vectors
are read only for pages being written, before any write of theirs; a failed read costs
only the reuse. Pages leaving the pass (left the sitemap, 404/410, 301/308, no text) keep
their points until the purges at the very end, so a renamed section's texts are reused.

Overlap: a batch's model call runs in a worker thread while the pass goes on fetching and
chunking; one batch is in flight at most, so writes keep batch order and each page is
written only after its own vectors exist. A failed model call fails its batch's pages only
(old points and state kept).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Sequence

from chunking import EXTRACTOR_ID, Splitter
from chunking.extract import SelectorError, compile_selector
from embedders.base import Embedder

from .errors import ConfigError
from .edges.fetcher import Fetcher
from .core.hashing import pipeline_fingerprint
from .edges.httpcache import FetchCache, ReadOnlyCache
from .core.policy import DEFAULT_POLICY
from .core.report import Report
from .core.ids import canonical_url, url_problem
from .core.scope import Scope
from .core.site_rules import SiteRuleSet, headers_in_scope
from .core.sitemaps import MAX_TOTAL_SITEMAP_URLS
from .stages.embed import EmbedStage
from .stages.plan import PlanStage
from .core.links import CrawlLimits
from .stages.bulk_edits import BulkEditStage
from .stages.crawl import CrawlStage
from .stages.deploys import DeployStage
from .stages.preflight import PreflightStage
from .stages.settle import SettleStage
from .stages.visit import VisitStage
from .stages.write import WriteStage
from .edges.state import NEW, PageState
from .edges.state_protocol import State
from .edges.store import Store

__all__ = ["PassConfig", "run_pass", "arun_pass"]

log = logging.getLogger("pagesync")


@dataclass
class PassConfig:
    sitemaps: Sequence[str] = ()
    urls: Sequence[str] = ()
    crawl: Sequence[str] = ()  # start pages of a link crawl (`sync.stages.crawl`)
    max_pages: int = 10000  # pages one crawl reaches at most (its memory and fetches are bounded by it)
    crawl_limits: CrawlLimits | None = None  # the crawl's link-trap caps (default `CrawlLimits()`); max_pages wins
    crawl_filter: Callable[[str], bool] | None = None  # a hook: False refuses a link (include/exclude rules)
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    full: bool = False
    dry_run: bool = False
    embed_batch: int = 64  # texts per model call (reused chunks not counted); batches span pages
    write_batch: int = 16  # pages per store request
    workers: int = 8  # concurrent fetches in all (per host bounded by the Fetcher)
    allow_hosts: Sequence[str] = ()  # hosts beyond those of the sitemaps and URLs
    allow_mass_delete: bool = False
    max_delete_share: float = 0.2  # a pass purging more than this share of tracked pages...
    mass_delete_min: int = 5  # ...and at least this many, purges nothing (unless allowed)
    policy: str = DEFAULT_POLICY  # revisit policy: "deploys" (static sites at their deploys, else change-rate), "change-rate" (learned), "halve-double", "uniform"
    revisit_interval: timedelta | None = None  # uniform's one interval (default 3 d); only with policy "uniform"
    max_fetches: int | None = None  # page visits per pass at most (repairs, trusted lastmod, --full and 60 d pages may exceed it)
    bulk_edits: bool = False  # notice bulk edits (many pages changed at once) and look for the rest sooner
    repair: Sequence[str] = ()  # a repair pass: visit exactly these URLs, unconditionally, and rewrite them
    # The collection is missing or empty while the state records indexed pages: rebuild it
    # (every such page fetched unconditionally and rewritten). Without it such a pass raises
    # CollectionLostError (a mistyped collection name is as likely as a lost collection).
    rebuild: bool = False
    wait_lock: float = 0.0  # seconds to wait for another pass's state lock before refusing (exit 2)
    reuse_vectors: bool = True  # reuse stored vectors of unchanged chunk texts (never in a repair pass)
    reuse_cache: int = 16384  # vectors kept for identical texts later in the pass (~1.5 KB each at 384-d)
    # Chunks of pages leaving the pass whose reuse keys may be read (~200 B each): a pass
    # removing a whole site reads no more, and pages past it are embedded as before.
    reuse_leaving_chunks: int = 20000
    # Sitemap URLs of a pass in all (an index's files together): past them the pass reads no
    # further sitemap and removes nothing, with a sitemap error (each URL costs ~200 B up front).
    max_sitemap_urls: int = MAX_TOTAL_SITEMAP_URLS
    # A page cut into more chunks than this is skipped (its old points kept, the reason in the
    # report's `skipped`): one huge page must not flood the collection. None: no cap.
    max_chunks_per_page: int | None = 2000
    # Which pages are wanted, which element is content, which headers go along: the
    # command line's rules for every site, and a site's own (`sync.core.site_rules`).
    site_rules: SiteRuleSet = SiteRuleSet()
    # The spending guard: the pass sends no batch that could take the tokens it embedded past
    # this (counted offline as an upper bound before sending, `embedders.limits.token_bound`;
    # what was sent, as the provider counted it). None: no guard.
    max_embed_tokens: int | None = None
    # Pages a deploy job says it changed (--changed): visited this pass, unconditionally.
    changed: Sequence[str] = ()

    def check(self) -> None:
        """`ConfigError` for a configuration the CLI would refuse too (exit 2, nothing done):
        no source at all (the scope is the sources': every tracked page would be out of
        it), a source that is not an http(s) URL, no worker or a share out of [0, 1]."""
        if not (self.sitemaps or self.urls or self.crawl or self.repair):
            raise ConfigError("a pass needs at least one sitemap, URL or crawl start page "
                              "(PassConfig.sitemaps / urls / crawl)")
        if self.max_pages < 1:
            raise ConfigError("max_pages must be at least 1")
        for u in (*self.sitemaps, *self.urls, *self.crawl):
            problem = url_problem(u)
            if problem:
                raise ConfigError(f"{u!r} {problem}")
        if self.workers < 1 or self.embed_batch < 1 or self.write_batch < 1 or self.max_sitemap_urls < 1:
            raise ConfigError("workers, embed_batch, write_batch and max_sitemap_urls must be at least 1")
        if self.max_embed_tokens is not None and self.max_embed_tokens < 0:
            raise ConfigError("max_embed_tokens must be at least 0 (None: no guard)")
        if self.max_chunks_per_page is not None and self.max_chunks_per_page < 1:
            raise ConfigError("max_chunks_per_page must be at least 1 (None: no cap)")
        if not 0.0 <= self.max_delete_share <= 1.0:
            raise ConfigError(f"max_delete_share {self.max_delete_share} is not a share in [0, 1]")
        self.check_rules()
        self.check_changed()

    def check_changed(self) -> None:
        """`ConfigError` naming the first --changed URL that is no URL or lies outside the
        run's scope (the hosts of its sitemaps, URLs, crawl start pages and --allow-host)."""
        if not self.changed:
            return
        scope = Scope.from_urls([*self.sitemaps, *self.urls, *self.crawl], self.allow_hosts)
        for u in self.changed:
            problem = url_problem(u)
            if problem:
                raise ConfigError(f"--changed {u!r} {problem}")
            why = scope.check(canonical_url(u))
            if why:
                raise ConfigError(f"--changed {u} is outside this run's scope ({why})")

    def check_rules(self) -> None:
        """`ConfigError` for a --select that is no CSS selector."""
        for css in self.site_rules.selectors:
            try:
                compile_selector(css)
            except SelectorError as exc:
                raise ConfigError(str(exc)) from None


# The ignore below: VisitStage resets EmbedStage's `inflight` through the shared `self`, so
# mypy infers it there as None; it goes when the stages take explicit inputs.
class _Pass(PreflightStage, PlanStage, DeployStage, BulkEditStage, VisitStage, CrawlStage, EmbedStage, WriteStage, SettleStage):  # type: ignore[misc]
    def __init__(self, cfg: PassConfig, fetcher: Fetcher, store: Store, state: State, embedder: Embedder,
                 splitter: Splitter, on_progress: Callable[[str, str], None] | None):
        self.cfg, self.fetcher, self.store, self.state = cfg, fetcher, store, state
        self.embedder, self.splitter = embedder, splitter
        self.on_progress = on_progress or (lambda url, action: None)
        self.now = cfg.now
        self.now_iso = cfg.now.isoformat()
        # A sitemap stamp later than this (and a day) is no stamp (`lastmod_in_time`): the
        # pass's clock, or the real one when the pass is run at an earlier `now` (a replay, a
        # test), as a site stamps its pages by the real clock.
        self.stamp_clock = max(cfg.now, datetime.now(timezone.utc))
        self.report = Report(dry_run=cfg.dry_run, now=self.now_iso, collection=store.collection,
                             embedder=embedder.model_id, policy=cfg.policy)
        self.fingerprint = pipeline_fingerprint(embedder.model_id, f"{EXTRACTOR_ID}/{splitter.settings}")
        self.scope = Scope.from_urls([*cfg.sitemaps, *cfg.urls, *cfg.crawl], cfg.allow_hosts)
        # The last recorded pass's report, read once: its policy (a switch reschedules, a
        # repair pass goes on with it) and its bulk-edit state.
        last = state.last_run()
        self.last_report: dict = last if isinstance(last, dict) else {}
        # Each stage's own state, in the order the data flows (`sync.stages`).
        self._init_preflight()
        self._init_plan()
        self._init_deploys()
        self._init_visit()
        self._init_embed()
        self._init_write()
        self._init_settle()
        self._init_crawl()
        # What a pass gives the Fetcher is that pass's: a Fetcher used for a second pass
        # (a library caller's loop) gets this pass's scope and state, not the first one's.
        # What the caller gave it before its first pass stays the caller's choice.
        given = getattr(fetcher, "given", None) or {"scope": fetcher.scope, "cache": fetcher.cache}
        fetcher.scope = given["scope"] or self.scope.check
        fetcher.site_headers = given.get("site_headers") or self._site_headers
        fetcher.unwanted = self._unwanted
        self._bind_cache(fetcher, given["cache"])

    def _site_headers(self, url: str) -> dict[str, str]:
        """The --header fields for a request to `url`: its site's, and only for this pass's
        sites (the scope's hosts), whatever scope the caller gave the Fetcher."""
        return headers_in_scope(self.cfg.site_rules, url, self.scope.check, self.scope.plain_http_ok)

    def _bind_cache(self, fetcher: Fetcher, cache: FetchCache | None) -> None:
        """Give the Fetcher the pass clock and a cache: the state, unless the caller chose one.

        A dry run reads the cache (its conditional GETs are as cheap as a real pass's) but
        keeps nothing, like everything else it learns. A state that is no `FetchCache`
        (the Qdrant state keeps pages, not HTTP copies) leaves the Fetcher uncached:
        robots.txt is then read once per pass and sitemaps are fetched in full.
        """
        if cache is None and isinstance(self.state, FetchCache):
            cache = self.state
        if cache is not None and self.cfg.dry_run:
            cache = ReadOnlyCache(cache)
        fetcher.cache = cache
        fetcher.now = self.now

    # -- the pass ---------------------------------------------------------------------------
    async def run(self) -> Report:
        t0 = time.monotonic()
        self.report.started_at = datetime.now(timezone.utc).isoformat()
        cfg = self.cfg
        self._preflight()

        if cfg.repair:
            await self._repair()
            return self._finish(t0)
        read = await self._read_sitemaps()
        await self._read_deploys(read)  # the change feed and the deploy signal, before the plan
        plan = self._plan(read)
        self._queue_removals(plan.removals, plan.known, read.out_of_scope)
        self.visiting = {ev.url for ev in plan.visits}
        await self._visit(plan.pages)
        await self._crawl()  # the links of what was read, followed from the --crawl start pages
        self._queue_orphans(set(read.entries) | set(plan.extra))
        self._judge_guard()
        await self._settle_suspects()
        await self._apply_purges()
        if not self.points_checked and not cfg.dry_run:
            # An embedded shard this pass opened (it wrote or read): its count is cheap now.
            self._check_points(at_start=False)
        return self._finish(t0)

    def _finish(self, t0: float) -> Report:
        self.report.robots_bytes = getattr(self.fetcher, "robots_bytes", 0)
        self.report.bytes_downloaded += self.report.robots_bytes
        self.report.pages_tracked = self.state.tracked_count()
        self.report.finished_at = datetime.now(timezone.utc).isoformat()
        self.report.seconds = round(time.monotonic() - t0, 3)
        self._count_tokens()
        if self.cfg.bulk_edits:
            self.report.bulk_edits = self._bulk_update()
        self._deploy_finish()
        if not self.cfg.dry_run:
            self.state.add_host_trust({h: (a, c) for h, (a, c) in self.trust_delta.items()})
            self.state.record_run(self.report.to_dict())
        return self.report

    async def _repair(self) -> None:
        """Re-read and rewrite the given pages whatever their hash says (audit --fix)."""
        known = self.state.get_many(self.cfg.repair)
        pages = [known.get(u) or PageState(url=u, status=NEW, first_seen_at=self.now, source="url")
                 for u in self.cfg.repair]
        self.visiting = {p.url for p in pages}
        self.report.pages_due = len(pages)
        self.tracked_before = self.state.tracked_count()
        await self._visit(pages)
        self._judge_guard()
        await self._settle_suspects()
        await self._apply_purges()


async def arun_pass(cfg: PassConfig, *, fetcher: Fetcher, store: Store, state: State, embedder: Embedder,
                    splitter: Splitter | None = None, on_progress: Callable[[str, str], None] | None = None) -> Report:
    """Async form of `run_pass` (for callers already in an event loop)."""
    cfg.check()
    state.lock(wait=cfg.wait_lock)
    try:
        if splitter is None:
            from .stages.chunks import splitter_for

            splitter = splitter_for(embedder)  # the embedder's own tokens, up to what it reads
        return await _Pass(cfg, fetcher, store, state, embedder, splitter, on_progress).run()
    finally:
        state.unlock()


def run_pass(cfg: PassConfig, *, fetcher: Fetcher, store: Store, state: State, embedder: Embedder,
             splitter: Splitter | None = None, on_progress: Callable[[str, str], None] | None = None) -> Report:
    """Run one sync pass and return its report. Takes the state lock for the pass's duration
    (waiting up to `cfg.wait_lock` seconds for another pass to finish)."""
    return asyncio.run(arun_pass(cfg, fetcher=fetcher, store=store, state=state, embedder=embedder,
                                 splitter=splitter, on_progress=on_progress))
