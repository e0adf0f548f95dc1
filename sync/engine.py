"""One sync pass: sitemap diff + due queue -> fetch -> extract/hash -> decide -> write.

`run_pass` is the one library entry point (the CLI only builds its arguments). Write
order, per page, is what makes every crash repairable:

1. embed the new chunks (nothing is deleted before the new vectors exist);
2. mark the page `pending_hash` in the state;
3. in the store: delete every point with the page's url, insert the new points, and wait
   for the store to confirm;
4. record the new hash, validators and schedule in the state, clearing `pending_hash`.

A crash or error before 3 leaves the old points and old state; between 3 and 4 the
pending mark makes the next pass revisit the page unconditionally. Skips (304, same
hash) touch neither the embedder nor the store.

Vector reuse (step 1 in detail): when a page that has points changed, its stored vectors
are read first (`Store.vectors_for_url`, this embedder's points only) and each new chunk
whose exact text is among them takes that vector (`sync.hashing.reuse_key`: embedder id +
text). Identical texts met earlier in the pass (any page, any batch) are not embedded
again either. Only the remaining texts go to the model, each once; the page is still
replaced as a unit in steps 2-4. Vectors are read only for pages being written, at the
moment they are queued (before any write of theirs), so a pass with nothing to write
never opens the store. A failed read costs only the reuse (every chunk is embedded); a
crash between 3 and 4 leaves either no points (nothing to reuse: all re-embedded) or the
new ones (all reused).

Moves: a page leaving this pass (left the sitemap, 404/410, 301/308, no text) keeps its
points until `_apply_purges` at the very end, so its texts can still lend their vectors to
the pages written meanwhile (a renamed section: new URLs added, old ones removed). Read
key-first, only when a written page has texts its own points and the pass's cache lack:
the leaving pages' reuse keys (no vectors, within `reuse_leaving_chunks`), then the
vectors of just the leaving pages that hold such a text. A text queued for the model
before its leaving page was known (a 404 or 301 met later in the pass) is looked up again
when its batch starts (`_late_reuse`).

Overlap: a pass where everything changed is bound by the model, so the model call of a
batch runs in a worker thread while the consumer goes on fetching, extracting and
chunking the next pages (`_flush` starts it, `_drain` finishes it). One batch is in flight
at most: before the next one starts, the one in flight is finished, vectors then writes
(steps 2-4 above, unchanged). Writes therefore keep batch order and each page is written
only after its own vectors exist; a failed model call fails its batch's pages only (old
points and state kept), as before. A chunk whose text is in the batch in flight waits for
that batch's vector instead of being embedded twice; should that batch fail, the waiting
batch embeds the text itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Sequence

from chunking import EXTRACTOR_ID, Splitter, extract_page
from embedders.base import Embedder

from .decision import Action, Decision, Outcome, broken_deploy, decide, may_be_broken, needs_unconditional_fetch
from .errors import ConfigError, PagesyncError, StoreFullError
from .fetcher import Fetcher, FetchResult, HostQueue, Validators
from .hashing import content_hash, pipeline_fingerprint, reuse_key
from .httpcache import FetchCache, ReadOnlyCache, memo_parser
from .ids import canonical_url, chunk_id, point_id
from .plural import plural
from .points_check import (
    MISSING_MARK,
    REBUILD_MARK,
    lost_refusal,
    mark_for_rewrite,
    points_per_url,
    recorded_chunks,
    rewrite_reason,
    short_pages,
)
from .report import Report
from .scope import Scope, all_out_of_scope, refused_by_host, some_out_of_scope, url_host
from .policy import (
    DEFAULT_POLICY,
    BulkState,
    Candidate,
    Policy,
    Visit,
    add_visit,
    bulk_state_from_json,
    bulk_state_to_json,
    change_probability,
    estimate_rate,
    pass_evidence,
    update_bulk_state,
    url_section,
    history_from_json,
    history_json_with,
    lastmod_makes_due,
    host_lastmod_trust,
    make_policy,
    select_visits,
    _span,
)
from .scheduler import NEW_PAGE_INTERVAL, failure_backoff, next_interval
from .sitemaps import (MAX_TOTAL_SITEMAP_URLS, NOT_A_SITEMAP, collect_sitemaps, diff_sitemap, feed_hosts,
                       lastmod_state, lastmods_to_record)
from .state import GONE, LIVE, NEW, PageState
from .state_protocol import State
from .store import PageWrite, Store, StoredPoint
from .threads import in_daemon_thread
from .stages.embed import EmbedStage, _Pending, _VectorCache
from .stages.plan import (REASONS, ChangeEvent, PlanStage, _uniform_interval_s, plan_events, record_sitemap,
                          within_budget)
from .stages.settle import _SCOPE_SKIP, SettleStage, _allow_hosts
from .stages.visit import VisitStage
from .stages.write import WriteStage, build_points

__all__ = ["PassConfig", "run_pass", "arun_pass", "plan_events", "record_sitemap", "ChangeEvent", "build_points"]

log = logging.getLogger("pagesync")


@dataclass
class PassConfig:
    sitemaps: Sequence[str] = ()
    urls: Sequence[str] = ()
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
    policy: str = DEFAULT_POLICY  # revisit policy: "change-rate" (learned), "halve-double" (halve on a change, double otherwise), "uniform"
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

    def check(self) -> None:
        """`ConfigError` for a configuration the CLI would refuse too (exit 2, nothing done):
        no source at all (the scope is the sources': every tracked page would be out of
        it), a source that is not an http(s) URL, no worker or a share out of [0, 1]."""
        if not (self.sitemaps or self.urls or self.repair):
            raise ConfigError("a pass needs at least one sitemap or URL (PassConfig.sitemaps / urls)")
        for u in (*self.sitemaps, *self.urls):
            if not isinstance(u, str) or not u.lower().startswith(("http://", "https://")):
                raise ConfigError(f"{u!r} must be an http(s) URL")
        if self.workers < 1 or self.embed_batch < 1 or self.write_batch < 1 or self.max_sitemap_urls < 1:
            raise ConfigError("workers, embed_batch, write_batch and max_sitemap_urls must be at least 1")
        if self.max_chunks_per_page is not None and self.max_chunks_per_page < 1:
            raise ConfigError("max_chunks_per_page must be at least 1 (None: no cap)")
        if not 0.0 <= self.max_delete_share <= 1.0:
            raise ConfigError(f"max_delete_share {self.max_delete_share} is not a share in [0, 1]")


class _Pass(PlanStage, VisitStage, EmbedStage, WriteStage, SettleStage):
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
        # The visit stage's extractor and hash rule, read here (the conductor's names) when the pass starts.
        self.extract_page, self.content_hash = extract_page, content_hash
        self.queue: list[_Pending] = []
        self.queued_chunks = 0
        # This batch's model inputs, each text once: reuse key -> text.
        self.to_embed: dict[str, str] = {}
        # The batch whose model call is in flight (see `_flush`): its pages, its inputs, the call.
        self.inflight: tuple[list[_Pending], dict[str, str], asyncio.Future | None] | None = None
        self.inflight_keys: dict[str, str] = {}  # that batch's model inputs (reuse key -> text)
        self.last_fresh: dict[str, Sequence[float]] = {}  # the vectors of the batch finished last
        # A repair rewrites from scratch; a Store written before vectors_for_url existed reuses nothing.
        self.read_stored = cfg.reuse_vectors and not cfg.repair and hasattr(store, "vectors_for_url")
        self.cache = _VectorCache(cfg.reuse_cache if cfg.reuse_vectors else 0)
        # Pages leaving this pass, as reuse sources (see the module docstring, "Moves"):
        # queued by `_queue_purge`, their keys read on the first need, their vectors per url.
        self.leaving_on = self.read_stored and hasattr(store, "reuse_keys_for_urls") and cfg.reuse_leaving_chunks > 0
        self.leaving_todo: list[PageState] = []  # keys not read yet
        self.leaving_keys: dict[str, str] = {}  # reuse key -> url of a leaving page holding it
        self.leaving_read: set[str] = set()  # leaving urls whose vectors were read (or tried)
        self.leaving_budget = cfg.reuse_leaving_chunks
        self.leaving_over = 0  # leaving pages past the budget: not reuse sources
        # Queued pages hold their texts and reused vectors: bound them as well as the model input.
        self.max_queued_chunks = max(1024, 16 * cfg.embed_batch)
        self.skips: list[PageState] = []
        # url -> (page, left_sitemap, reason, moved_to): every page this pass found gone.
        self.purges: dict[str, tuple[PageState, bool, str, str | None]] = {}
        self.unmoved: set[str] = set()  # targets some page redirected to before this pass and no longer does
        # Changes that may be a broken deploy (`may_be_broken`), written or held at the end
        # of the pass (`_settle_suspects`): url -> (the page's _Pending, its new markdown).
        self.suspects: dict[str, tuple[_Pending, str]] = {}
        self.broken: set[str] = set()  # those `broken_deploy` picked: they count toward the guard
        self.guard: str | None = None  # the mass-deletion guard's refusal, once judged (`_judge_guard`)
        self.store_was_empty = False  # the collection was missing or empty when the pass began
        self.points_checked = False  # the store's point count was checked against the state (`_check_points`)
        self.visiting: set[str] = set()
        # Indexed pages whose points the collection lost (missing or empty at the pass's
        # start): fetched unconditionally and rewritten this pass (`_start_rebuild`).
        self.rebuild: set[str] = set()
        self.marked: set[str] = set()  # pages `_check_points` found short at the start: visited this pass
        self.scope = Scope.from_urls([*cfg.sitemaps, *cfg.urls], cfg.allow_hosts)
        self.policy = make_policy(cfg.policy, interval=cfg.revisit_interval)
        # The last recorded pass's report, read once: its policy (a switch reschedules, a
        # repair pass goes on with it) and its bulk-edit state.
        last = state.last_run()
        self.last_report: dict = last if isinstance(last, dict) else {}
        if cfg.repair:
            # A repair pass (audit --fix) chooses no policy: the last pass's goes on, so the
            # pages it rewrites are scheduled as the next pass would, and the next pass sees
            # no policy switch (`_reschedule_on_switch`).
            self.policy = self._last_policy() or self.policy
        self.report.policy = self.policy.name
        self.report.revisit_interval_s = _uniform_interval_s(self.policy)
        self.trust_seen = state.host_trust_counts()
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
        # What a pass gives the Fetcher is that pass's: a Fetcher used for a second pass
        # (a library caller's loop) gets this pass's scope and state, not the first one's.
        # What the caller gave it before its first pass stays the caller's choice.
        given = getattr(fetcher, "given", None) or {"scope": fetcher.scope, "cache": fetcher.cache}
        fetcher.scope = given["scope"] or self.scope.check
        self._bind_cache(fetcher, given["cache"])

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

    def _check_embedder(self) -> None:
        """Refuse a pass whose embedder is not the last pass's into this collection, unless
        --full: only the pages it visits would get the new model's vectors, the others keep
        the old one's, and a collection of two models answers searches wrongly while
        nothing else notices (the vector size may be the same). --full re-embeds every page
        in this pass; `pagesync reindex` builds a new collection and switches to it whole."""
        last, cfg = self.last_report, self.cfg
        was = last.get("embedder")
        if (not was or was == self.embedder.model_id or cfg.full or cfg.repair
                or last.get("collection") not in (None, self.store.collection)):
            return
        raise ConfigError(
            f"the last pass into collection {self.store.collection!r} embedded with {was!r}, this one would with "
            f"{self.embedder.model_id!r}: only the pages it visits would change model, and the collection would mix "
            f"both. Run with --embedder {was} (or the option that names it), or switch models with `pagesync "
            f"reindex --embedder ...` (a new collection, switched when whole) or `run --full` (every page "
            f"re-embedded in this pass)")

    # -- the pass ---------------------------------------------------------------------------
    async def run(self) -> Report:
        t0 = time.monotonic()
        self.report.started_at = datetime.now(timezone.utc).isoformat()
        cfg = self.cfg
        self._check_embedder_runs()  # before any request: a model that cannot load is exit 2
        # Before ensure_collection, which would create a missing collection.
        lost = not cfg.repair and self._collection_empty()
        self.store_was_empty = lost
        lost_pages = self._lost_pages() if lost else []
        if lost_pages and not cfg.rebuild and not self._rebuild_under_way(lost_pages):
            # A mistyped name or a lost collection: refused before anything is created.
            raise lost_refusal(self.store.collection, str(getattr(self.store, "location", "the store")), lost_pages)
        if self.store.exists() or not cfg.dry_run:
            # Checked before anything is fetched or written: a wrong vector size is exit 2.
            self.store.ensure_collection(self.embedder.dimension)
        self._check_embedder()  # the same size, another model: exit 2 too
        if lost_pages:
            self._start_rebuild(lost_pages)
        elif not cfg.repair:
            self._check_points(at_start=True)

        if cfg.repair:
            await self._repair()
            return self._finish(t0)
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
        for url, lastmod in sm.entries.items():
            reason = self.scope.check(url)
            if reason:  # a hostile or sloppy sitemap: listed, never fetched
                out_of_scope[url] = reason
                self.report.skip(url, f"out of scope: {reason}")
                self.report.pages_out_of_scope += 1
                self.report.pages_skipped += 1
            else:
                sitemap_now[url] = lastmod
        refused = self._judge_scope(sm.skipped, out_of_scope, bool(sitemap_now))  # before any line about them
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
        if cfg.sitemaps and sm.complete and not sitemap_now and before and not cfg.allow_mass_delete:
            # An empty sitemap where we tracked pages is a broken deploy, not a deleted site.
            sm.errors.append((", ".join(cfg.sitemaps), "sitemap(s) listed no URLs; nothing purged "
                              "(if the site really is empty, run again with --allow-mass-delete)"))
        elif cfg.sitemaps and sm.complete and sitemap_now and before and not cfg.allow_mass_delete:
            # The same per site: with several sitemaps, one that comes back empty would purge its
            # whole site under the others' URLs (and a small site is under the guard's minimum).
            # A site is a configured sitemap's host and port: pages of a --sitemap dropped from
            # the configuration go (out of scope, or left the sitemap) as before.
            configured = {url_host(canonical_url(u))[0] for u in cfg.sitemaps}
            listed = {url_host(u)[0] for u in sitemap_now}
            emptied = sorted({h for u in before if (h := url_host(u)[0]) in configured and h not in listed})
            if emptied and refused:  # what they list instead is out of scope: the cause is the scope
                sm.errors.append((", ".join(emptied), "the sitemaps listed no URLs of this site any more, only URLs "
                                  f"out of scope (see the warning); nothing purged (if those are this site under "
                                  f"another name, {_allow_hosts(refused)})"))
            elif emptied:
                sm.errors.append((", ".join(emptied), "the sitemaps listed no URLs of this site any more; nothing "
                                  "purged (if it really is empty, run again with --allow-mass-delete)"))
        self.report.pages_in_sitemaps = len(sitemap_now)
        self.report.sitemap_errors = len(sm.errors)
        for url, err in sm.errors:
            self.report.error(url, f"sitemap: {err}")
        self.tracked_before = self.state.tracked_count()
        extra = [canonical_url(u) for u in cfg.urls]
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
        visits += self._bulk_suspects(visits, known, sitemap_now)
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

        for ev in removals:
            if ev.url in known:
                page = known[ev.url]
                if page.moved_to is not None:
                    self.unmoved.add(page.moved_to)
                # Still listed but out of scope now (an --allow-host dropped): a fresh index
                # would not hold it either, so it goes, under its real reason.
                why = out_of_scope.get(ev.url)
                self._queue_purge(page, left_sitemap=True,
                                  reason=f"out of scope: {why}" if why else "left the sitemap")
        self.visiting = {ev.url for ev in visits}
        await self._visit([pages[ev.url] for ev in visits])
        self._queue_orphans(set(sitemap_now) | set(extra))
        self._judge_guard()
        await self._settle_suspects()
        await self._apply_purges()
        if not self.points_checked and not cfg.dry_run:
            # An embedded shard this pass opened (it wrote or read): its count is cheap now.
            self._check_points(at_start=False)

        return self._finish(t0)

    def _check_embedder_runs(self) -> None:
        """An embedder that can tell it cannot run here (`check()`: its package or model is
        not installed) says so before the first request, not after every page was fetched."""
        check = getattr(self.embedder, "check", None)
        if callable(check):
            check()

    def _collection_empty(self) -> bool:
        """Whether the collection is missing or holds no points, cheaply: existence and a
        count, never a scan. A store may answer through an optional `is_empty()` (True,
        False, or None for "not known without loading it": the embedded store does not
        load a shard for this); without one, `exists()` and `count()`."""
        hint = getattr(self.store, "is_empty", None)
        if hint is not None:
            return hint() is True
        return not self.store.exists() or self.store.count() == 0

    def _lost_pages(self) -> list[PageState]:
        """The collection is missing or empty: the indexed pages with chunks the state
        records are the points it lost (or, under a mistyped name, never held)."""
        return [p for p in self.state.all_pages() if p.indexed and p.chunk_count > 0]

    def _rebuild_under_way(self, lost: list[PageState]) -> bool:
        """A rebuild cut short before its first write: the collection it created exists,
        empty, and every lost page still has its rebuild mark. The next pass goes on with it."""
        return self.store.exists() and all(p.pending_hash == REBUILD_MARK for p in lost)

    def _start_rebuild(self, lost: list[PageState]) -> None:
        """Rebuild a lost collection (PassConfig.rebuild): every lost page is fetched without
        validators (a 304 must not hide it) and rewritten whatever its hash says, past
        --max-fetches like repairs. They are marked pending in one state write before the
        first store write, so a pass killed halfway leaves the unwritten ones due and
        rewritten by the next pass (`sync.points_check`)."""
        self.rebuild = {p.url for p in lost}
        self.points_checked = True  # the whole collection is rewritten: nothing to count
        chunks = sum(p.chunk_count for p in lost)
        self.report.collection_lost = True
        self.report.pages_rebuilt = len(lost)
        log.warning("collection %r is missing or empty but the state records %s of %s: "
                    "%s them this pass", self.store.collection, plural(chunks, "chunk"), plural(len(lost), "page"),
                    "would re-index" if self.cfg.dry_run else "re-indexing")
        self._save(mark_for_rewrite(lost, REBUILD_MARK))

    def _check_points(self, *, at_start: bool) -> None:
        """The store's exact point count against the chunks the state records for its
        settled pages: a collection that lost points (deleted by hand or by another program,
        a restored backup) is reported, and the pages that lack points are marked pending
        so they are rewritten unconditionally: this pass when checked at its start (a
        server answers a count cheaply), else the next one (an embedded shard is counted
        only once the pass has opened it). Points beyond the record (pending writes,
        foreign points) are the audit's matter, not this check's."""
        count_of = getattr(self.store, "count_if_open", None)
        stored = count_of() if count_of is not None else self.store.count()
        if stored is None:
            return
        self.points_checked = True
        summed = getattr(self.state, "recorded_chunks", None)
        recorded = summed() if summed is not None else recorded_chunks(self.state.all_pages())
        if stored >= recorded:
            return
        missing = short_pages(self.state.all_pages(), points_per_url(self.store), stored, recorded)
        if not missing.pages:
            return
        self.report.points_missing = missing.points
        self.report.pages_points_missing = len(missing.pages)
        when = "rewriting them this pass" if at_start else "the next pass rewrites them"
        if self.cfg.dry_run:
            when = "a pass would rewrite them"
        log.warning("collection %r holds %s but the state records %s: %s of %s are missing; %s",
                    self.store.collection, plural(stored, "point"), plural(recorded, "chunk"),
                    plural(missing.points, "point"), plural(len(missing.pages), "page"), when)
        self._save(mark_for_rewrite(missing.pages, MISSING_MARK))
        if at_start:
            self.marked = {p.url for p in missing.pages}

    def _finish(self, t0: float) -> Report:
        self.report.robots_bytes = getattr(self.fetcher, "robots_bytes", 0)
        self.report.bytes_downloaded += self.report.robots_bytes
        self.report.pages_tracked = self.state.tracked_count()
        self.report.finished_at = datetime.now(timezone.utc).isoformat()
        self.report.seconds = round(time.monotonic() - t0, 3)
        if self.cfg.bulk_edits:
            self.report.bulk_edits = self._bulk_update()
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
        return await _Pass(cfg, fetcher, store, state, embedder, splitter or Splitter(), on_progress).run()
    finally:
        state.unlock()


def run_pass(cfg: PassConfig, *, fetcher: Fetcher, store: Store, state: State, embedder: Embedder,
             splitter: Splitter | None = None, on_progress: Callable[[str, str], None] | None = None) -> Report:
    """Run one sync pass and return its report. Takes the state lock for the pass's duration
    (waiting up to `cfg.wait_lock` seconds for another pass to finish)."""
    return asyncio.run(arun_pass(cfg, fetcher=fetcher, store=store, state=state, embedder=embedder,
                                 splitter=splitter, on_progress=on_progress))
