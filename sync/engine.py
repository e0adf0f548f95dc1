"""One sync pass, conducted: preflight -> plan -> visit (+ crawl) -> embed -> write -> settle.

`run_pass` is the one library entry point (the CLI only builds its arguments). `_conduct`
builds the stages (`sync.stages`), each from the config fields and collaborators it uses,
and calls them in the order a page's data flows: `Preflight` checks the collection and the
model against the state; `Planner` reads the sitemaps and turns the diff, the schedule and
--max-fetches into a `Plan`; `Visitor` fetches, extracts and decides each page, handing a
change to the `EmbedQueue`, which gives its chunks their vectors and hands each batch to the
`Writer`; purges and held changes wait in the `Ledger` until the `Settler`, once every page
was seen, judges the mass-deletion guard and applies them.

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

from .core.ids import canonical_url, url_problem
from .core.links import CrawlLimits
from .core.page import NEW, PageState
from .core.policies import DEFAULT_POLICY
from .core.report import Report, overflow_passes
from .core.scope import Scope
from .core.site_rules import SiteRuleSet, headers_in_scope, unwanted_reason
from .core.sitemaps import MAX_TOTAL_SITEMAP_URLS
from .edges.fetcher import Fetcher
from .edges.httpcache import FetchCache, ReadOnlyCache
from .edges.state_protocol import LinkKeeper, State
from .edges.store import Store
from .errors import ConfigError
from .stages.bulk_edits import BulkEdits
from .stages.crawl import Crawl
from .stages.deploys import Deploys
from .stages.embed import EmbedQueue
from .stages.fingerprints import Fingerprints
from .stages.outcomes import Outcomes
from .stages.pending import PendingPage
from .stages.plan import Planner, pass_policy, uniform_interval_s
from .stages.preflight import Preflight
from .stages.schedule import Scheduler
from .stages.settle import Ledger, Settler
from .stages.visit import Visitor
from .stages.write import Writer

__all__ = ["Checkpoint", "PassConfig", "run_pass", "arun_pass"]

log = logging.getLogger("pagesync")


@dataclass
class PassConfig:
    """Everything one pass is told: where the pages are, how to read them, and its limits."""

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
    max_fetches: int | None = (
        None  # page visits per pass at most (repairs, trusted lastmod, --full and 60 d pages may exceed it)
    )
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
            raise ConfigError(
                "a pass needs at least one sitemap, URL or crawl start page (PassConfig.sitemaps / urls / crawl)"
            )
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


def _pass_fetcher(
    fetcher: Fetcher, state: State, scope: Scope, rules: SiteRuleSet, *, now: datetime, dry_run: bool
) -> Fetcher:
    """The caller's Fetcher made this pass's (`Fetcher.for_pass`): the scope, headers and
    cache the caller gave it, else the pass's own; the site rules and the clock.

    The cache is the state, unless the caller chose one; a dry run reads it (its conditional
    GETs are as cheap as a real pass's) but keeps nothing. A state that is no `FetchCache`
    (the Qdrant state keeps pages, not HTTP copies) leaves the Fetcher uncached: robots.txt is
    then read once per pass and sitemaps are fetched in full. The --header fields of a
    request are its site's, and only for this pass's sites.
    """
    cache = fetcher.cache if fetcher.cache is not None else (state if isinstance(state, FetchCache) else None)
    if cache is not None and dry_run:
        cache = ReadOnlyCache(cache)
    return fetcher.for_pass(
        scope=fetcher.scope or scope.check,
        site_headers=fetcher.site_headers
        or (lambda url: headers_in_scope(rules, url, scope.check, scope.plain_http_ok)),
        unwanted=lambda url: unwanted_reason(url, rules.rules_for(url)),
        cache=cache,
        now=now,
    )


Checkpoint = Callable[[str, "str | None"], None]
"""`checkpoint(point, url)`: told as the pass reaches each of its crash points, in order:
"plan" (the sitemaps read, nothing of them written yet), "visit" (before the first visit),
"page" (each fetched answer, with its url, before it is decided) and "settle" (before the
purges). A test raises there to kill the pass at that point; a library caller may log."""


def _no_checkpoint(point: str, url: str | None) -> None:
    return None


async def _conduct(
    cfg: PassConfig,
    fetcher: Fetcher,
    store: Store,
    state: State,
    embedder: Embedder,
    splitter: Splitter,
    on_progress: Callable[[str, str], None] | None,
    checkpoint: Checkpoint = _no_checkpoint,
) -> Report:
    """One pass: the stages built from the config, then called in the order a page's data flows."""
    t0 = time.monotonic()
    now, rules, dry_run, repair = cfg.now, cfg.site_rules, cfg.dry_run, bool(cfg.repair)
    # A sitemap stamp later than this (and a day) is no stamp (`lastmod_in_time`): the pass's
    # clock, or the real one when the pass is run at an earlier `now` (a replay, a test), as a
    # site stamps its pages by the real clock.
    stamp_clock = max(now, datetime.now(timezone.utc))
    scope = Scope.from_urls([*cfg.sitemaps, *cfg.urls, *cfg.crawl], cfg.allow_hosts)
    last = state.last_run()
    last_report: dict = last if isinstance(last, dict) else {}  # its policy, bulk edits, schedules, tokens

    def unwanted(url: str) -> str | None:
        """Why the site rules (--include, --exclude, the default excludes) keep `url` out, or None."""
        return unwanted_reason(url, rules.rules_for(url))

    report = Report(
        dry_run=dry_run, now=now.isoformat(), collection=store.collection, embedder=embedder.model_id, policy=cfg.policy
    )
    report.started_at = datetime.now(timezone.utc).isoformat()
    fetcher = _pass_fetcher(fetcher, state, scope, rules, now=now, dry_run=dry_run)
    outcomes = Outcomes(state, report, now=now, dry_run=dry_run, on_progress=on_progress)

    # 1. Preflight: the model and the collection against the state, before any request.
    preflight = Preflight(store, state, embedder, outcomes, rebuild=cfg.rebuild, repair=repair, last_report=last_report)
    check = preflight.run()

    # The services the stages share: the schedule and the pipeline fingerprints.
    policy = pass_policy(cfg.policy, cfg.revisit_interval, repair=repair, last_report=last_report)
    report.policy, report.revisit_interval_s = policy.name, uniform_interval_s(policy)
    bulk = BulkEdits(last_report.get("bulk_edits") if cfg.bulk_edits else None, now=now, repair=repair)
    deploys = Deploys(
        fetcher,
        state,
        outcomes,
        on=cfg.policy == "deploys" and not repair,
        last_schedules=last_report.get("host_schedule"),
        changed=cfg.changed,
        sitemaps=cfg.sitemaps,
        crawl_starts=cfg.crawl,
        max_fetches=cfg.max_fetches,
        now=now,
    )
    scheduler = Scheduler(
        policy, state.host_trust_counts(), now=now, bulk=bulk if cfg.bulk_edits else None, hook=deploys
    )
    fingerprints = Fingerprints(
        rules, embedder_id=embedder.model_id, extractor_id=EXTRACTOR_ID, splitter_settings=splitter.settings
    )

    # The hand-offs, downstream first: writer <- embed queue <- visitor; the ledger for settle.
    writer = Writer(
        store,
        state,
        outcomes,
        embedder_id=embedder.model_id,
        fetched_at=now.isoformat(),
        ready_collection=preflight.ready_collection,
        reschedule=scheduler.reschedule,
        fingerprint_for=fingerprints.for_url,
        keep_texts=not dry_run,
    )
    queue: EmbedQueue[PendingPage] = EmbedQueue(
        store,
        embedder,
        writer,
        report,
        batch=cfg.embed_batch,
        write_batch=cfg.write_batch,
        reuse_vectors=cfg.reuse_vectors,
        reuse_cache=cfg.reuse_cache,
        reuse_leaving_chunks=cfg.reuse_leaving_chunks,
        read_stored=not repair,
        max_embed_tokens=cfg.max_embed_tokens,
        dry_run=dry_run,
        store_was_empty=check.store_was_empty,
        rebuilding=check.rebuilding,
    )
    ledger = Ledger(on_leaving=queue.add_leaving)
    visitor = Visitor(
        fetcher,
        state,
        outcomes,
        scheduler,
        ledger,
        queue,
        splitter,
        fingerprints,
        check,
        site_rules=rules,
        unwanted=unwanted,
        workers=cfg.workers,
        repair=repair,
        max_chunks_per_page=cfg.max_chunks_per_page,
        now=now,
        on_generator=deploys.generator,
        on_change=deploys.changed,
        checkpoint=checkpoint,
    )
    settler = Settler(
        ledger,
        queue,
        outcomes,
        store,
        state,
        now=now,
        dry_run=dry_run,
        allow_mass_delete=cfg.allow_mass_delete,
        mass_delete_min=cfg.mass_delete_min,
        max_delete_share=cfg.max_delete_share,
    )

    crawl: Crawl | None = None
    if repair:
        # 2'. A repair pass (audit --fix): exactly the given pages, read and rewritten.
        known = state.get_many(cfg.repair)
        pages = [known.get(u) or PageState(url=u, status=NEW, first_seen_at=now, source="url") for u in cfg.repair]
        report.pages_due = len(pages)
        tracked_before = state.tracked_count()
        checkpoint("visit", None)
        await visitor.visit(pages)
    else:
        # 2. Plan: the sitemaps, the change feed and the deploy signal, then the visits.
        if cfg.crawl:
            crawl = Crawl(
                state,
                outcomes,
                ledger,
                links=state if isinstance(state, LinkKeeper) else None,
                starts=cfg.crawl,
                scope=scope,
                unwanted=unwanted,
                crawl_filter=cfg.crawl_filter,
                limits=cfg.crawl_limits,
                max_pages=cfg.max_pages,
                now=now,
                last_report=last_report,
                full=cfg.full,
            )
            visitor.watch_crawl(crawl)
        planner = Planner(
            fetcher,
            state,
            scheduler,
            deploys,
            bulk,
            outcomes,
            check,
            scope=scope,
            unwanted=unwanted,
            sitemaps=cfg.sitemaps,
            urls=cfg.urls,
            full=cfg.full,
            max_fetches=cfg.max_fetches,
            max_sitemap_urls=cfg.max_sitemap_urls,
            allow_mass_delete=cfg.allow_mass_delete,
            now=now,
            stamp_clock=stamp_clock,
            last_report=last_report,
        )
        read = await planner.read_sitemaps()
        await deploys.read(read)  # the change feed and the deploy signal, before the plan
        tracked_before = state.tracked_count()  # the guard's base: before the plan writes new rows
        checkpoint("plan", None)
        plan = planner.plan(read)
        ledger.queue_removals(plan.removals, plan.known, read.out_of_scope, unwanted)
        # 3. Visit (fetch -> extract -> decide), embed and write, overlapped; then the crawl.
        if crawl is not None:
            crawl.prepare(plan.pages)  # a crawl's pages with no kept links are read whole
        visitor.visiting.update(ev.url for ev in plan.visits)
        checkpoint("visit", None)
        await visitor.visit(plan.pages)
        # A deploy that changed a page visited only for its turn: the host's other pages now.
        await visitor.visit(deploys.widen(visitor.visiting))
        if crawl is not None:  # the links of what was read, followed from the --crawl start pages
            await crawl.run(visitor, feed=deploys.crawl_feed, sitemap_now=read.entries)
        settler.queue_orphans(set(read.entries) | set(plan.extra))

    # 4. Settle, once every page was seen: the guard, the held changes, then the purges.
    settler.judge_guard(tracked_before)
    await settler.settle_suspects()
    checkpoint("settle", None)
    await settler.apply_purges()
    if not repair and not preflight.points_checked and not dry_run:
        preflight.check_points(at_start=False)  # an embedded shard this pass opened: its count is cheap now

    report.robots_bytes = fetcher.robots_bytes
    report.bytes_downloaded += report.robots_bytes
    report.pages_tracked = state.tracked_count()
    report.finished_at = datetime.now(timezone.utc).isoformat()
    report.seconds = round(time.monotonic() - t0, 3)
    chunk_tokens = splitter.chunk_size / (1 if splitter.counter is not None else 4)  # about 4 characters a token
    queue.tokens.count_tokens(
        chunks_skipped=outcomes.chunks_skipped,
        last_per_chunk=last_report.get("tokens_per_chunk"),
        chunk_tokens=chunk_tokens,
    )
    if crawl is None:  # no crawl this pass: its overflow count goes on as it was
        report.crawl_overflow_passes = overflow_passes(last_report, crawled=False, overflowed=False)
    if cfg.bulk_edits:
        report.bulk_edits = bulk.update()
    deploys.finish()
    if not dry_run:
        state.add_host_trust({h: (a, c) for h, (a, c) in scheduler.trust_delta.items()})
        state.record_run(report.to_dict())
    return report


async def arun_pass(
    cfg: PassConfig,
    *,
    fetcher: Fetcher,
    store: Store,
    state: State,
    embedder: Embedder,
    splitter: Splitter | None = None,
    on_progress: Callable[[str, str], None] | None = None,
    checkpoint: Checkpoint | None = None,
) -> Report:
    """Async form of `run_pass` (for callers already in an event loop)."""
    cfg.check()
    state.lock(wait=cfg.wait_lock)
    try:
        if splitter is None:
            from .stages.chunks import splitter_for

            splitter = splitter_for(embedder)  # the embedder's own tokens, up to what it reads
        return await _conduct(cfg, fetcher, store, state, embedder, splitter, on_progress, checkpoint or _no_checkpoint)
    finally:
        state.unlock()


def run_pass(
    cfg: PassConfig,
    *,
    fetcher: Fetcher,
    store: Store,
    state: State,
    embedder: Embedder,
    splitter: Splitter | None = None,
    on_progress: Callable[[str, str], None] | None = None,
    checkpoint: Checkpoint | None = None,
) -> Report:
    """Run one sync pass and return its report. Takes the state lock for the pass's duration
    (waiting up to `cfg.wait_lock` seconds for another pass to finish). `on_progress(url,
    action)` hears each page's outcome; `checkpoint` each crash point (`Checkpoint`)."""
    return asyncio.run(
        arun_pass(
            cfg,
            fetcher=fetcher,
            store=store,
            state=state,
            embedder=embedder,
            splitter=splitter,
            on_progress=on_progress,
            checkpoint=checkpoint,
        )
    )
