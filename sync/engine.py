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
from .stages.settle import _SCOPE_SKIP, SettleStage, _allow_hosts
from .stages.write import WriteStage, build_points

__all__ = ["PassConfig", "run_pass", "arun_pass", "plan_events", "record_sitemap", "ChangeEvent", "build_points"]

log = logging.getLogger("pagesync")

# Why a page is visited this pass, most specific first (a page gets its first reason).
REASONS = ("new", "pending", "rebuild", "lastmod", "due", "full", "removed", "bulk")


@dataclass(frozen=True)
class ChangeEvent:
    url: str
    reason: str


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


@dataclass
class _Pending:
    """A page decided ADD/REPLACE, waiting for its vectors and its write."""

    page: PageState
    decision: Decision
    result: FetchResult
    hash_: str
    title: str
    chunks: list[str]
    keys: list[str] = field(default_factory=list)  # reuse_key per chunk
    # Per chunk: a vector already known (reused), or None until the batch's model call.
    vectors: list[Sequence[float] | None] = field(default_factory=list)
    reused: int = 0  # chunks that will not be model inputs of their own


class _VectorCache:
    """Vectors met this pass, by reuse key: least recently used dropped past `size`.

    Held as float32 arrays (what Qdrant stores anyway): ~1.5 KB a vector at 384-d.
    """

    def __init__(self, size: int):
        self.size = max(0, size)
        self._d: OrderedDict[str, array] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key in self._d

    def get(self, key: str) -> array | None:
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
        return v

    def put(self, key: str, vector: Sequence[float]) -> None:
        if not self.size:
            return
        self._d[key] = vector if isinstance(vector, array) else array("f", vector)
        self._d.move_to_end(key)
        while len(self._d) > self.size:
            self._d.popitem(last=False)


class _Pass(WriteStage, SettleStage):
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

    # -- scheduling -------------------------------------------------------------------------
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

    def _edit_for(self, url: str):
        """The bulk edit under way on the url's host, or None."""
        if not self.bulk:
            return None
        st = self.bulk.get(url_host(url)[1])
        edit = st.edit if st is not None else None
        return edit if edit is not None and edit.active(self.now.timestamp()) else None

    def _bulk_suspects(self, visits: list[ChangeEvent], known: dict[str, PageState],
                       sitemap_now: dict[str, str | None]) -> list[ChangeEvent]:
        """Pages a bulk edit under way may have changed (last visited before it was
        noticed) that are not visits yet: candidates of this pass, within --max-fetches.

        Reads every page of the state, but only while a bulk edit is under way on a host
        (`BULK_HOLD_S` after its detection at most)."""
        now_s = self.now.timestamp()
        if not any(st.edit is not None and st.edit.active(now_s) for st in self.bulk.values()):
            return []
        listed = {ev.url for ev in visits}
        out = []
        for page in self.state.all_pages():
            if page.url in listed or page.status != LIVE or page.pending_hash is not None:
                continue
            if page.failures and page.due_at is not None and page.due_at > self.now:
                continue  # backing off after a failure
            if page.url not in sitemap_now and page.source != "url":
                continue
            edit = self._edit_for(page.url)
            last = page.last_fetched_at.timestamp() if page.last_fetched_at is not None else None
            if edit is not None and edit.suspect(last, now_s):
                known[page.url] = page
                out.append(ChangeEvent(page.url, "bulk"))
        return out

    def _bulk_update(self) -> dict:
        """Each host's bulk-edit state after this pass, for the run report (a repair pass
        or a pass without evidence carries it on)."""
        now_s = self.now.timestamp()
        hosts = set(self.bulk) | set(self.observed)
        out = {}
        for host in sorted(hosts):
            obs = self.observed.get(host)
            st = self.bulk.get(host, BulkState())
            if st.edit is not None and host in self.suspects_seen:
                st = BulkState(st.evidence, st.edit.with_visits(self.suspects_seen[host]))
            st = update_bulk_state(st, pass_evidence(now_s, obs) if obs else None, now_s)
            if st.evidence or st.edit is not None:
                out[host] = bulk_state_to_json(st)
        return out

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
            forced = ev.reason in ("lastmod", "full")
            edit = self._edit_for(ev.url) if not forced else None
            cands.append(Candidate(
                url=ev.url,
                visits=tuple(history_from_json(page.history)) if page is not None and not forced else (),
                since_last_visit_s=(self.now - last).total_seconds() if last is not None else None,
                due=True,
                forced=forced,
                repair=(ev.reason == "pending" or ev.url in self.rebuild
                        or (page is not None and page.pending_hash is not None)),
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
        page.due_at = self.now + page.interval
        page.last_fetched_at = self.now

    def _bulk_observe(self, page: PageState, visits: list[Visit], elapsed: float, changed: bool) -> bool:
        """Count this visit as bulk-edit evidence, or put its change down to the edit under
        way. Returns True when the change is the edit's: a suspect (last visited before the
        edit was noticed) found changed while the edit is under way.

        Evidence is every other visit with text that no trusted lastmod advance, pending
        write or repair pass caused (those expect a change): its predicted P(change) from the page's rate as it
        stood before the visit, and whether the text changed."""
        assert page.last_fetched_at is not None
        edit = self._edit_for(page.url)
        host = url_host(page.url)[1]
        if edit is not None and edit.suspect(page.last_fetched_at.timestamp(), self.now.timestamp()):
            self.suspects_seen.setdefault(host, []).append((url_section(page.url), changed))
            return changed
        if self.cfg.repair or self.reasons.get(page.url) in ("lastmod", "pending", "rebuild"):
            return False
        rate_of = getattr(self._policy_for(page.url), "rate", None) or estimate_rate
        self.observed.setdefault(host, []).append((change_probability(rate_of(visits), elapsed), changed))
        return False

    async def _visit(self, pages: Sequence[PageState]) -> None:
        if not pages:
            return
        # Per host: a worker takes the first page whose host can send now, so no worker
        # sits in one host's Crawl-delay, Retry-After or per-host bound while another's wait.
        todo = HostQueue(self.fetcher, pages, url=lambda p: p.url)
        # Bounded: fetched bodies wait here while the model works, so memory stays flat.
        done: asyncio.Queue[tuple[PageState, FetchResult] | None] = asyncio.Queue(maxsize=max(8, self.cfg.workers * 2))
        n_workers = min(self.cfg.workers, len(pages))

        async def worker() -> None:
            while (page := await todo.get()) is not None:
                # No await between get() and fetch_page(): see HostQueue.get.
                result = await self.fetcher.fetch_page(page.url, self._validators(page), self._moved_validators)
                await done.put((page, result))
            await done.put(None)

        workers = [asyncio.create_task(worker()) for _ in range(n_workers)]
        finished = 0
        try:
            while finished < n_workers:
                item = await done.get()
                if item is None:
                    finished += 1
                    continue
                page, result = item
                await self._handle(page, result)
                if len(self.to_embed) >= self.cfg.embed_batch or self.queued_chunks >= self.max_queued_chunks:
                    await self._flush()  # returns while the model works on the batch
            await self._flush()
            await self._drain()
        finally:
            for w in workers:
                w.cancel()
            if self.inflight is not None:  # an error left a batch in flight: nothing of it was written
                _, _, call = self.inflight
                self.inflight, self.inflight_keys = None, {}
                if call is not None:
                    call.cancel()
        self._flush_skips()

    async def _moved(self, page: PageState, target: str, result: FetchResult) -> None:
        """301/308: the old URL is purged and the target tracked in its place.

        The old URL stays gone with `moved_to` set and, while a sitemap lists it, on the
        schedule like a 404 (a redirect answered again is no change: its interval grows;
        one that stopped is indexed again). The target was vetted by the scope at every
        hop. If it is visited this pass anyway (it is in the sitemap too), that visit
        indexes it; otherwise this answer does.
        """
        if page.moved_to is not None and page.moved_to != target:
            self.unmoved.add(page.moved_to)
        self._queue_purge(page, left_sitemap=False, reason=f"moved permanently to {target}", moved_to=target)
        # Purges come at the end of the pass: the old URL's points are still there to reuse.
        await self._remember_vectors(page)
        if target in self.visiting:
            return
        self.visiting.add(target)
        known = self.state.get(target)
        tpage = known or PageState(url=target, status=NEW, first_seen_at=self.now, source="url")
        if known is None or known.status == GONE:
            tpage.source = "url"
        if result.outcome is Outcome.NOT_MODIFIED and not tpage.indexed:
            # The old page's validators matched the target, but we hold no text under the
            # target's key: read it once more, unconditionally.
            again = await self.fetcher.fetch_page(target, None)
            self.report.bytes_downloaded += again.bytes_downloaded
            await self._process(tpage, again)
            return
        moved = FetchResult(target, result.outcome, status=result.status, body=result.body,
                            content_type=result.content_type, charset=result.charset, validators=result.validators,
                            final_url=result.final_url)
        await self._process(tpage, moved)

    def _moved_validators(self, target: str) -> Validators | None:
        """The validators to ask a 301/308 target with: its own, if it is indexed."""
        known = self.state.get(canonical_url(target))
        return self._validators(known) if known is not None else None

    def _validators(self, page: PageState) -> Validators | None:
        if self.cfg.repair or page.url in self.rebuild or not page.indexed or page.pending_hash is not None:
            return None
        if needs_unconditional_fetch(page.fingerprint, self.fingerprint):
            return None
        return Validators(page.etag, page.last_modified)

    async def _handle(self, page: PageState, result: FetchResult) -> None:
        r = self.report
        if result.answered:
            r.pages_fetched += 1
        r.bytes_downloaded += result.bytes_downloaded
        await self._process(page, result)

    async def _process(self, page: PageState, result: FetchResult) -> None:
        """Decide one fetched page and carry out skips and purges; changes go to the embed queue."""
        if result.outcome is Outcome.ERROR:
            self._fail(page, result.error or "fetch failed", result.retry_after)
            return
        if result.outcome is Outcome.SKIPPED:
            self._skip(page, result.error or "skipped", result.error)
            return
        if result.outcome is Outcome.GONE:
            page.last_fetched_at = self.now
            if page.moved_to is not None:
                self.unmoved.add(page.moved_to)
            self._queue_purge(page, left_sitemap=False, reason=f"gone ({result.status})")
            return
        if result.moved_permanently:
            target = canonical_url(result.redirects[-1][1])
            if target != page.url:
                await self._moved(page, target, result)
                return
        if page.moved_to is not None:  # the redirect is undone: its target may be no one's now
            self.unmoved.add(page.moved_to)
        new_hash = title = None
        chunks: list[str] = []
        if result.outcome is Outcome.OK:
            try:
                extracted = await asyncio.to_thread(extract_page, result.body, result.content_type, page.url,
                                                    charset=result.charset)
            except Exception as exc:  # a page the extractor chokes on fails alone
                self._fail(page, f"extraction failed: {exc}")
                return
            new_hash, title = content_hash(extracted.markdown), extracted.title
        decision = decide(result.outcome, new_hash=new_hash, stored_hash=page.content_hash,
                          stored_fingerprint=page.fingerprint, fingerprint=self.fingerprint, indexed=page.indexed,
                          text_empty=result.outcome is Outcome.OK and not extracted.markdown)
        if decision.action is Action.PURGE:  # its text extracted to nothing: queued like a 404
            page.last_fetched_at = self.now
            self._queue_purge(page, left_sitemap=False, reason="no text extracted (an empty page, or a template "
                                                                  "or rendering change the extractor cannot read)")
            return
        if decision.action is Action.FAIL:
            page.etag = page.last_modified = None  # stale validators: next visit unconditional
            self._fail(page, decision.reason)
            return
        if self.cfg.repair and decision.action is Action.SKIP_UNCHANGED:
            decision = Decision(Action.REPLACE, "repair")
        elif page.url in self.rebuild and decision.action is Action.SKIP_UNCHANGED:
            decision = Decision(Action.REPLACE, rewrite_reason(REBUILD_MARK))
        elif page.pending_hash is not None and decision.action is Action.SKIP_UNCHANGED:
            # A pending mark: what the collection holds for this page is not known (a write
            # or purge cut short, a rebuild not reached yet, points lost): rewritten.
            decision = Decision(Action.REPLACE, rewrite_reason(page.pending_hash))
        elif decision.action is Action.SKIP_UNCHANGED and (title or "") != (page.title or ""):
            # Every point carries the title, which the hash (of the markdown) does not cover:
            # a page whose title alone changed is rewritten, each chunk's vector reused.
            decision = Decision(Action.REPLACE, "title changed")
        if not decision.writes:
            page.etag, page.last_modified = result.validators.etag, result.validators.last_modified
            self._reschedule(page, changed=False)
            page.failures, page.last_error = 0, None
            self._record(page, decision)
            self.skips.append(page)
            if len(self.skips) >= 256:
                self._flush_skips()
            return
        # Chunking happens only for a real change.
        chunks = self.splitter.split(extracted.markdown)
        cap = self.cfg.max_chunks_per_page
        if cap is not None and len(chunks) > cap:
            reason = (f"{len(chunks)} chunks, over the cap of {cap} per page (--max-chunks-per-page); "
                      "its points are kept as they were")
            log.warning("skipped %s: %s", page.url, reason)
            self._skip(page, reason, reason)
            return
        item = _Pending(page, decision, result, new_hash, title or "", chunks)
        if (decision.action is Action.REPLACE and decision.reason == "content changed"
                and may_be_broken(page.chunk_count, len(chunks), len(extracted.markdown))):
            # A collapse or a short text: written (or held) once the guard has seen the pass.
            self.suspects[page.url] = (item, extracted.markdown)
            return
        await self._enqueue(item, extracted.markdown)

    async def _enqueue(self, item: _Pending, markdown: str) -> None:
        """Queue a decided change for its vectors and write: its stored vectors read first
        (reuse), then each chunk given a known vector or made a model input."""
        page, chunks = item.page, item.chunks
        self._hold_text(page.url, markdown)
        stored: dict[str, list[float]] = {}
        # A new page may have points all the same: the state was lost or replaced while the
        # collection stayed (a deleted state.db, a fresh CI cache). Looked up unless the
        # collection was empty when the pass began (a first index reads nothing).
        known = page.indexed or page.pending_hash is not None
        if (self.read_stored and chunks and (known or not self.store_was_empty)
                and page.url not in self.rebuild):  # a lost collection holds nothing to reuse
            # Read before anything of this page is written (its write comes at a later flush).
            stored = await self._read_vectors(page.url)
        keys = None
        if self.leaving_on and (self.leaving_todo or self.leaving_keys):
            # Texts neither its own points nor the pass hold: maybe a page leaving this pass does.
            model_id = self.embedder.model_id
            keys = [reuse_key(model_id, text) for text in chunks]
            missing = [k for k in keys if k not in stored and k not in self.cache]
            if missing:
                stored = {**stored, **await self._leaving_vectors(missing)}
        self._assign(item, stored, keys)
        self.queue.append(item)
        self.queued_chunks += len(chunks)

    async def _read_vectors(self, url: str) -> dict[str, list[float]]:
        """The url's stored vectors made by this pass's embedder (reuse key -> vector).

        Reuse only saves work, so it never fails a page: when the store cannot be read, the
        rest of the pass embeds every chunk, as without reuse (a store that is really down
        fails the write anyway, which keeps the old points and retries the page).
        """
        try:
            return await asyncio.to_thread(self.store.vectors_for_url, url, embedder=self.embedder.model_id)
        except PagesyncError as exc:
            log.warning("could not read stored vectors (%s); this pass embeds every chunk of changed pages", exc)
            self.read_stored = False
            return {}

    async def _leaving_vectors(self, keys: Sequence[str]) -> dict[str, list[float]]:
        """Vectors for `keys` from pages leaving this pass (reuse key -> vector), also put
        in the pass's cache.

        The leaving pages' keys are read first, without vectors, the first time a written
        page lacks a text (and again for pages found leaving since), within
        `reuse_leaving_chunks`; then the vectors of only the leaving pages holding one of
        `keys`, each page once. All before `_apply_purges` deletes them. A failed read
        ends this reuse for the pass, never the pass: the texts are embedded.
        """
        if self.leaving_todo and self.leaving_on:
            todo, self.leaving_todo = self.leaving_todo, []
            urls, self.leaving_budget, over = within_budget(todo, self.leaving_budget)
            if over:
                if not self.leaving_over:
                    log.info("vector reuse: pages leaving this pass past %s chunks are not read for reuse",
                             self.cfg.reuse_leaving_chunks)
                self.leaving_over += over
            if urls:
                model_id = self.embedder.model_id
                try:
                    pairs = await asyncio.to_thread(
                        lambda: list(self.store.reuse_keys_for_urls(urls, embedder=model_id)))
                except PagesyncError as exc:
                    log.warning("could not read the chunks of pages leaving this pass (%s); their texts "
                                "are embedded again where new pages hold them", exc)
                    self.leaving_on, self.leaving_keys = False, {}
                    return {}
                for key, url in pairs:
                    self.leaving_keys.setdefault(key, url)
        urls = sorted({u for k in keys if (u := self.leaving_keys.get(k)) is not None and u not in self.leaving_read})
        out: dict[str, list[float]] = {}
        dim = self.embedder.dimension
        for url in urls:
            if not self.read_stored:  # a read failed: the rest is embedded
                break
            self.leaving_read.add(url)
            for key, vec in (await self._read_vectors(url)).items():
                if len(vec) == dim:
                    out[key] = vec
                    self.cache.put(key, vec)
        return out

    async def _late_reuse(self, batch: list[_Pending], to_embed: dict[str, str]) -> None:
        """Before a batch's model call: its inputs that the pass has come to know since
        they were queued (a 301 or 404 met later whose page held the text, another page's
        stored vectors) take that vector and leave the inputs. The first chunk of each
        such text, the one that made it an input, now counts as reused."""
        if not self.cfg.reuse_vectors or not to_embed:
            return
        dim = self.embedder.dimension
        found: dict[str, Sequence[float]] = {}
        for key in to_embed:
            vec = self.cache.get(key) if key in self.cache else None
            if vec is not None and len(vec) == dim:
                found[key] = vec
        if self.leaving_on and (self.leaving_todo or self.leaving_keys):
            found.update(await self._leaving_vectors([k for k in to_embed if k not in found]))
        if not found:
            return
        for key in found:
            del to_embed[key]
        first: set[str] = set()
        for item in batch:
            for i, key in enumerate(item.keys):
                if item.vectors[i] is None and key in found:
                    item.vectors[i] = found[key]
                    if key not in first:
                        first.add(key)
                        item.reused += 1

    async def _remember_vectors(self, page: PageState) -> None:
        """A moved page's stored vectors into the pass's cache: its text under the new URL
        is not embedded again."""
        if not (self.read_stored and (page.indexed or page.pending_hash is not None)):
            return
        self.leaving_read.add(page.url)  # read here, not again as a leaving page
        stored = await self._read_vectors(page.url)
        for key, vec in stored.items():
            if len(vec) == self.embedder.dimension:
                self.cache.put(key, vec)

    def _assign(self, item: _Pending, stored: dict[str, list[float]], keys: Sequence[str] | None = None) -> None:
        """Give each chunk a known vector (this page's stored ones or a leaving page's, then
        the pass's), or make its text one of this batch's model inputs, unless the batch
        already has it. `keys`: the chunks' reuse keys, when the caller has them already."""
        model_id, dim = self.embedder.model_id, self.embedder.dimension
        for key, vec in stored.items():
            if len(vec) == dim:
                self.cache.put(key, vec)
        dedup = self.cfg.reuse_vectors
        if keys is None:
            keys = [reuse_key(model_id, text) for text in item.chunks]
        for text, key in zip(item.chunks, keys, strict=True):
            vec = stored.get(key)
            if vec is None or len(vec) != dim:
                vec = self.cache.get(key)
            item.keys.append(key)
            item.vectors.append(vec)
            if vec is not None or (dedup and (key in self.to_embed or key in self.inflight_keys)):
                item.reused += 1  # None until its batch starts (in flight) or ends (this batch)
            else:
                # Without reuse every chunk is a model input of its own (the old behaviour).
                self.to_embed[key if dedup else f"{key}#{len(self.to_embed)}"] = text

    async def _flush(self) -> None:
        """Start the model call of the queued pages' new texts (one call spanning pages, each
        text once) in a worker thread, and return: the consumer extracts and chunks the next
        pages meanwhile. The batch in flight before is finished first (`_drain`), so one
        batch at most is in flight and writes keep queue order."""
        if not self.queue:
            return
        await self._drain()
        batch, self.queue, self.queued_chunks = self.queue, [], 0
        to_embed, self.to_embed = self.to_embed, {}
        await self._late_reuse(batch, to_embed)  # a dry run too: its would-be counts follow
        if self.cfg.dry_run:
            # Nothing is embedded or reused: what a real pass would do goes to the would-be counters.
            self.report.chunks_would_reuse += sum(item.reused for item in batch)
            self.report.chunks_would_embed += sum(len(item.chunks) - item.reused for item in batch)
            for key in to_embed:  # later batches count these as a real pass would
                self.cache.put(key, array("f"))
            for item in batch:
                self._record(item.page, item.decision, len(item.chunks), item.reused)
            return
        if self.cfg.reuse_vectors:
            # Chunks that waited on the batch just finished (its texts were in flight when they
            # were queued): its vectors now, or, if its model call failed, inputs of this batch.
            for item in batch:
                for i, (key, vec) in enumerate(zip(item.keys, item.vectors)):
                    if vec is None and key not in to_embed:
                        known = self.last_fresh.get(key)
                        if known is None:
                            to_embed[key] = item.chunks[i]
                            item.reused -= 1
                        else:
                            item.vectors[i] = known
        texts = list(to_embed.values())
        # A daemon thread, not the default executor: a pass cancelled by Ctrl-C does not wait
        # for the model to finish the batch (`sync.threads`).
        call = in_daemon_thread(self.embedder.embed, texts, name="pagesync-embed") if texts else None
        self.inflight, self.inflight_keys = (batch, to_embed, call), to_embed

    async def _drain(self) -> None:
        """Finish the batch in flight: wait for its vectors, then write its pages (steps 2-4 of
        the module docstring, in queue order)."""
        if self.inflight is None:
            return
        batch, to_embed, call = self.inflight
        self.inflight, self.inflight_keys, self.last_fresh = None, {}, {}
        texts = list(to_embed.values())
        try:
            vectors = await call if call is not None else []
            if len(vectors) != len(texts):
                raise PagesyncError(f"embedder returned {len(vectors)} vectors for {len(texts)} texts")
        except Exception as exc:
            # Nothing was deleted yet: every page keeps its old points and is retried.
            for item in batch:
                self._fail(item.page, f"embedding failed: {exc}")
            return
        self.report.chunks_embedded += len(texts)
        self.report.chunks_reused += sum(item.reused for item in batch)
        fresh = dict(zip(to_embed, vectors))
        for key, vec in fresh.items():
            self.cache.put(key, vec)
        self.last_fresh = fresh if self.cfg.reuse_vectors else {}
        pos = 0
        for item in batch:
            if self.cfg.reuse_vectors:
                item.vectors = [fresh[k] if v is None else v for k, v in zip(item.keys, item.vectors)]
            else:  # every chunk was an input of its own, in queue order
                item.vectors = list(vectors[pos : pos + len(item.chunks)])
                pos += len(item.chunks)
        for i in range(0, len(batch), self.cfg.write_batch):
            await self._write(batch[i : i + self.cfg.write_batch])


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
