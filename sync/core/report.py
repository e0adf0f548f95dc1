"""The run report: the contract's keys, counted by the engine, written as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .budget import failed_share, within_failure_budget
from .plural import plural

__all__ = ["Report", "OVERFLOW_PASSES_EXIT", "overflow_passes"]

# Passes in a row whose crawl found more than --max-pages lets it track, this one included,
# from which the pass is exit 1: the crawl keeps finding more than it may hold.
OVERFLOW_PASSES_EXIT = 2


def overflow_passes(last: dict, *, crawled: bool, overflowed: bool) -> int:
    """This pass's `crawl_overflow_passes`, from the last recorded run's (`last`): one more
    when its crawl overflowed, 0 when it held all it found; a pass without a crawl carries it."""
    before = last.get("crawl_overflow_passes")
    if not isinstance(before, int) or isinstance(before, bool) or before < 0:
        before = 1 if last.get("crawl_overflow") else 0  # a run recorded before the key was kept
    if not crawled:
        return before
    return before + 1 if overflowed else 0


@dataclass
class Report:
    """What one pass did, page and chunk counts by outcome; `to_dict` gives the report keys."""

    started_at: str = ""
    finished_at: str = ""
    pages_in_sitemaps: int = 0
    pages_fetched: int = 0  # requests that got an HTTP answer
    pages_not_modified: int = 0  # 304
    pages_unchanged: int = 0  # 200, same content hash
    pages_changed: int = 0
    pages_added: int = 0
    pages_removed: int = 0
    pages_failed: int = 0
    chunks_embedded: int = 0  # texts sent through the model (a text met again in the pass is not sent again)
    chunks_deleted: int = 0
    chunks_written: int = 0
    bytes_downloaded: int = 0
    # Tokens the embedder sent, as its provider counted them (a remote embedder's `usage`);
    # 0 when nothing was sent, and for the local models, which bill nothing.
    tokens_embedded: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    # beyond the contract
    # Chunks of changed/added pages that got a vector without being a model input of their
    # own: the page's stored vector for the same text (same embedder), or the same text
    # embedded earlier in the pass. A pass writes chunks_embedded + chunks_reused chunks
    # (minus any whose write failed). Like every chunks_* counter, 0 in a dry run (nothing
    # is embedded, reused or written); the would-be numbers are chunks_would_*.
    chunks_reused: int = 0
    # A dry run's counterparts of chunks_embedded and chunks_reused: the model inputs and the
    # reused chunks a real pass would have had (0 in a real pass).
    chunks_would_embed: int = 0
    chunks_would_reuse: int = 0
    # Estimates of the tokens a re-embed of every visited page would have sent on top:
    # the chunks of unchanged pages (304, same hash) and the reused chunks, each at this
    # pass's tokens per embedded chunk (else the last such pass's, else chunk size / 4).
    tokens_saved_by_skip: int = 0
    tokens_saved_by_reuse: int = 0
    tokens_per_chunk: float | None = None  # tokens_embedded / chunks_embedded when tokens were counted
    # --max-embed-tokens: the pass stopped before a batch would have passed it; the pages it
    # did not embed (pages_over_token_budget) keep their points and state, due next pass.
    embed_budget_reached: bool = False
    pages_over_token_budget: int = 0
    # Chunks written whose embedded text (heading path and chunk) is longer than the
    # embedder reads (its tokens): 0, the splitter sizes every chunk to fit.
    chunks_over_model_input: int = 0
    dry_run: bool = False
    now: str = ""
    collection: str = ""
    embedder: str = ""
    policy: str = ""  # the revisit policy the pass scheduled with (--policy)
    revisit_interval_s: float | None = None  # uniform's one interval (--revisit-interval), in seconds; None otherwise
    # Pages whose due time this pass recomputed because the policy or --revisit-interval
    # differs from the last pass's (0 on every other pass).
    pages_rescheduled: int = 0
    pages_tracked: int = 0
    pages_due: int = 0
    # Pages whose fetch this pass got to (answered or not): the base of pages_failed_share.
    pages_visited: int = 0
    pages_deferred: int = 0  # due, but past --max-fetches: next pass
    pages_skipped: int = 0  # robots.txt, out of scope (sitemap entries included), too large, not text, over --max-chunks-per-page: not fetched (a fetched page skipped keeps its points; an indexed page out of scope now is purged)
    sitemaps_skipped: int = 0  # child sitemaps not read (out of scope); pages_skipped + this = len(skipped)
    pages_out_of_scope: int = 0  # sitemap URLs on other hosts, other schemes, private addresses
    # Sitemap URLs the site rules keep out (--include, --exclude, the default excludes):
    # never fetched, and a tracked one leaves as if the sitemap no longer listed it.
    pages_excluded: int = 0
    # Sitemap <url> entries whose <loc> is no absolute http(s) URL (relative, mailto:, ftp:,
    # empty, malformed): never tracked; counted in pages_skipped too, each in `skipped`.
    pages_invalid_loc: int = 0
    # The collection was missing or empty at the pass's start while the state recorded
    # indexed pages with chunks (a deleted --qdrant-path, a new server, another --collection):
    # those pages (pages_rebuilt) were fetched unconditionally and rewritten this pass.
    collection_lost: bool = False
    pages_rebuilt: int = 0
    # The store's point count fell short of the chunks the state records (checked every
    # pass where counting is cheap): the points missing and the pages lacking them, marked
    # to be rewritten (this pass on a server, the next one on the embedded store).
    points_missing: int = 0
    pages_points_missing: int = 0
    mass_delete_blocked: int = 0  # purges held back by the mass-deletion guard
    robots_bytes: int = 0
    sitemaps_not_modified: int = 0  # sitemap files answered 304: their kept copy was parsed
    sitemap_errors: int = 0
    lastmod_trusted: bool | None = None
    # What the sitemaps' lastmod said (sync.core.sitemaps.lastmod_state): "none" (no URL has one),
    # "same" (one stamp on every URL: ignored), "varied" (usable); None without sitemap URLs.
    lastmod_state: str | None = None
    # With bulk-edit detection on (PassConfig.bulk_edits): per host, the evidence of the
    # last passes and the bulk edit under way, if any (sync.core.bulk_edits.bulk_state_to_json).
    # The next pass reads it back from the last run.
    bulk_edits: dict[str, Any] = field(default_factory=dict)
    # Deploy-aware scheduling and change feeds (sync.core.deploys, sync.core.feeds): the
    # change feed's kind when one was read (None: no feed), whether every host's feed is
    # still trusted (None: no feed), the pages its changed texts made due, whether a deploy
    # was seen, the pages visited for a deploy, those --changed named, and per host the
    # schedule the next pass reads back from the last run.
    feed: str | None = None
    feed_trusted: bool | None = None
    pages_due_by_feed: int = 0
    deploy_seen: bool = False
    pages_due_by_deploy: int = 0
    pages_changed_given: int = 0
    host_schedule: dict[str, Any] = field(default_factory=dict)
    # A crawl (--crawl): the pages it reached (admitted to its frontier, at most --max-pages),
    # whether it saw all it links to (no failure, no bound hit: only then may it purge the
    # pages it no longer reaches; None without a crawl), and its refused links by reason.
    pages_crawled: int = 0
    crawl_complete: bool | None = None
    # An incomplete crawl that read every page it reached healthy but could not hold all it
    # found (over --max-pages, a page's links cut): its unreached pages leave when several agree.
    crawl_bounded: bool = False
    crawl_refused: dict[str, int] = field(default_factory=dict)
    # New URLs a crawl found but did not track: its pages were at --max-pages.
    crawl_overflow: int = 0
    # Passes in a row, this one included, whose crawl overflowed (`overflow_passes`): 0 once a
    # crawl holds all it finds; a pass without --crawl carries it. A crawl that overflows for
    # the OVERFLOW_PASSES_EXIT-th pass in a row (this one and the one before) is exit 1.
    crawl_overflow_passes: int = 0
    crawl_start_errors: int = 0  # --crawl start pages that answered 404/410: the pass is not ok (exit 1)
    seconds: float = 0.0
    changes: list[dict[str, Any]] = field(default_factory=list)  # {url, action, reason, chunks}
    skipped: list[dict[str, str]] = field(default_factory=list)  # {url, reason}

    def error(self, url: str, message: str) -> None:
        self.errors.append({"url": url, "error": message})

    def skip(self, url: str, reason: str) -> None:
        self.skipped.append({"url": url, "reason": reason})

    @property
    def ok(self) -> bool:
        return (
            self.pages_failed == 0
            and self.sitemap_errors == 0
            and self.mass_delete_blocked == 0
            and not self.embed_budget_reached
            and not self.crawl_overflows_every_pass
            and self.crawl_start_errors == 0
        )

    @property
    def crawl_overflows_every_pass(self) -> bool:
        """This pass's crawl overflowed, and so did the one before (exit 1)."""
        return bool(self.crawl_overflow) and self.crawl_overflow_passes >= OVERFLOW_PASSES_EXIT

    @property
    def pages_failed_share(self) -> float:
        """pages_failed over pages_visited (what --max-failed-share bounds)."""
        return failed_share(self.pages_failed, self.pages_visited)

    def ok_within(self, max_failed_share: float) -> bool:
        """`ok`, but with up to `max_failed_share` of the visited pages failed allowed: every
        other reason `ok` has to fail a pass still does."""
        otherwise_ok = replace(self, pages_failed=0).ok
        return within_failure_budget(
            pages_failed=self.pages_failed,
            pages_visited=self.pages_visited,
            otherwise_ok=otherwise_ok,
            max_failed_share=max_failed_share,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "pages_failed_share": self.pages_failed_share}

    def summary(self) -> str:
        verb = "would " if self.dry_run else ""
        if self.dry_run:
            chunks = f"would embed {self.chunks_would_embed}, would reuse {self.chunks_would_reuse}"
        else:
            chunks = (
                f"{self.chunks_embedded} embedded, {self.chunks_reused} reused, "
                f"{self.chunks_written} written, {self.chunks_deleted} deleted"
            )
        n = self.sitemaps_skipped
        sitemaps = f" (and {plural(n, 'sitemap')})" if n else ""
        # Due pages left for the next pass by --max-fetches: said only when there are some.
        deferred = f", {self.pages_deferred} deferred (--max-fetches)" if self.pages_deferred else ""
        if self.pages_excluded:
            deferred += f", {self.pages_excluded} excluded"
        # A sitemap that failed makes the pass not ok: the line says so, not only the exit code.
        if self.sitemap_errors:
            deferred += f", {plural(self.sitemap_errors, 'sitemap error')}"
        if self.crawl_start_errors:  # as a sitemap error: the line says why the pass is not ok
            deferred += f", {plural(self.crawl_start_errors, 'crawl start page')} gone"
        if self.crawl_overflows_every_pass:  # why the pass is not ok, on its own line too
            deferred += (
                f", crawl over --max-pages {plural(self.crawl_overflow_passes, 'pass', 'passes')} in a row "
                f"({self.crawl_overflow} more found)"
            )
        if self.embed_budget_reached:
            deferred += f", {self.pages_over_token_budget} left by --max-embed-tokens"
        if self.tokens_embedded:  # said only when an embedder counts tokens (a remote one)
            chunks += f", {plural(self.tokens_embedded, 'token')}"
        if self.crawl_complete is not None:  # a crawl ran: how far it got
            deferred += f", crawl reached {plural(self.pages_crawled, 'page')}" + (
                ""
                if self.crawl_complete
                else " (incomplete: an unreached page leaves only when several crawls agree)"
                if self.crawl_bounded
                else " (incomplete: nothing purged for not being linked)"
            )
        return (
            f"{self.pages_fetched} fetched, {self.pages_not_modified} not modified, "
            f"{self.pages_unchanged} unchanged, {verb}add {self.pages_added}, {verb}change {self.pages_changed}, "
            f"{verb}remove {self.pages_removed}, {self.pages_skipped} skipped{sitemaps}, {self.pages_failed} failed"
            f"{deferred}; "
            f"chunks: {chunks}; "
            f"{plural(self.bytes_downloaded, 'byte')} in {self.seconds:.1f}s"
        )
