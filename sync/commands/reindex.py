"""`pagesync reindex`: rebuild the collection with the current embedder and chunker beside
the live one, verify it, and switch an alias to it. Readers query the alias and never
see a half-built index. This is how a collection changes models.

Steps (`run_reindex`), holding the state lock throughout so no pass writes meanwhile:

1. Plan. The name given (`--collection`) is an alias or a plain collection; what it points
   at is the *source*. The new physical collection is `<alias>__<UTC yyyymmddThhmmss>`.
   Each live page's text comes from, in order of preference (`sync.commands.reindex_texts`):
   - `state`: the extracted markdown the state kept when the page was last written
     (only while its hash is the page's, and not extracted under another selector than
     the page's site rules name now), split with the current chunker;
   - `points`: the source collection's chunk texts of that page, ordered by `chunk_index`
     and used as they are, when they were cut by the current extractor (with the page's
     selector) and chunker (the page's fingerprint is `page_fingerprint(<their embedder>,
     ...)`) and form exactly the page's current generation;
   - `fetch`: one unconditional GET through the Fetcher (the site's text as of now), with
     the site's headers, extracted with its selector (`ReindexConfig.site_rules`).
2. Build: through the pass's embed queue (`sync.stages.embed.EmbedQueue`), in batches that
   span pages, each distinct chunk text embedded once in the whole reindex (its cache is a
   `VectorMemo` on disk: the same text on many pages is one model input), the model working
   on one batch while the next pages are read; upserted into the new collection (ids and
   payload exactly as a pass writes them).
3. Verify the new collection: the point count is the sum of the pages' chunk counts,
   the audit against the (updated) page state is clean (every live page has exactly its
   chunks 0..n-1, ids derived from chunk ids, one content hash, nothing else), the vector
   size is the embedder's, and a stored vector finds its own point.
4. Switch the alias atomically. Any failure before this point leaves the alias where it
   was; the half-built collection is kept for inspection (or dropped with `drop_failed`).
5. Update the state: every page's pipeline fingerprint becomes the new one, with its
   site's selector (the next `pagesync run` with the new `--embedder` and the same site
   rules embeds nothing and fetches conditionally), re-fetched pages whose
   text had changed take their new hash, and the reindex is recorded in the run history.
6. With `drop_old`, delete the previous physical collection (never before the switch).

First switch of a plain collection: on the embedded store an alias may carry the name of
a shard directory, so `pages` simply starts to mean `pages__...` (the old directory stays
until `--drop-old`). A Qdrant server refuses an alias with the name of an existing
collection: this needs `drop_old` (the old collection is deleted and the alias created
right after: a short gap, measured and reported) or another alias name (`alias`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from chunking import EXTRACTOR_ID, GUIDE, Splitter
from embedders.base import Embedder

from .audit import audit_collection
from ..edges.catalog import Catalog
from ..stages.fingerprints import Fingerprints
from ..stages.embed import EmbedQueue
from ..stages.write import build_points
from ..errors import ConfigError, PagesyncError
from ..core.plural import plural
from ..core.report import Report
from ..core.scope import Scope
from ..core.site_rules import SiteRuleSet, headers_in_scope
from ..edges.state import PageState
from ..edges.httpcache import FetchCache
from ..edges.state_protocol import State, TextKeeper
from ..edges.store import Store
from ..edges.vector_memo import VectorMemo
from .reindex_texts import TEXT_SOURCES, Harvest, PageTexts, TextItem

__all__ = [
    "ReindexConfig",
    "ReindexReport",
    "ReindexFailed",
    "run_reindex",
    "arun_reindex",
    "TEXT_SOURCES",
    "new_collection_name",
    "verify_built",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")


class ReindexFailed(PagesyncError):
    """The new collection could not be built or verified; the alias was not touched (exit 1)."""

    exit_code = 1

    def __init__(self, message: str, report: "ReindexReport"):
        super().__init__(message)
        self.report = report


@dataclass
class ReindexConfig:
    alias: str | None = None  # the alias to switch (default: the collection name given)
    drop_old: bool = False  # delete the previous physical collection after the switch
    drop_failed: bool = False  # delete a collection that failed to build or verify
    dry_run: bool = False  # plan and report; write nothing, fetch nothing
    embed_batch: int = 64  # chunks per model call; batches span pages
    workers: int = 8  # concurrent re-fetches
    now: datetime | None = None  # the clock: new collection's name, fetched_at of changed pages
    wait_lock: float = 0.0  # seconds to wait for another pass holding the state lock
    # The site rules `run` reads pages with (selector, headers; `sync.core.site_rules`): a
    # re-fetched page is extracted with its site's selector and fetched with its headers, and
    # every page's fingerprint names its selector, as a pass records it. Includes and
    # excludes select nothing here: every live page is rebuilt, and the next pass purges
    # the pages the rules now exclude.
    site_rules: SiteRuleSet = field(default_factory=SiteRuleSet)


@dataclass
class ReindexReport:
    started_at: str = ""
    finished_at: str = ""
    seconds: float = 0.0
    dry_run: bool = False
    ok: bool = False
    error: str | None = None
    now: str = ""
    collection: str = ""  # the name given
    alias: str = ""  # the alias switched
    source: str = ""  # the physical collection the alias pointed at (read, then kept or dropped)
    target: str = ""  # the new physical collection
    embedder: str = ""
    dimension: int = 0
    pages: int = 0
    chunks: int = 0  # in the new collection (dry run: expected, see chunks_estimated)
    chunks_estimated: bool = False  # dry run: re-fetched pages counted at their recorded size
    text_sources: dict[str, int] = field(default_factory=lambda: {s: 0 for s in TEXT_SOURCES})
    pages_fetched: int = 0
    pages_changed: int = 0  # re-fetched pages whose text changed since their last pass
    pages_failed: int = 0
    chunks_embedded: int = 0  # texts sent through the model: each distinct text once
    chunks_reused: int = 0  # chunks whose text was met before in this reindex: its vector reused
    chunks_written: int = 0
    bytes_downloaded: int = 0
    tokens_embedded: int = 0  # as a remote embedder's provider counted them (0 with a local model)
    errors: list[dict[str, str]] = field(default_factory=list)
    verify: dict[str, Any] | None = None
    drop_old: bool = False
    switched: bool = False
    replaced_collection: bool = False  # server, first time: the old collection was deleted to free its name
    gap_seconds: float | None = None  # ... and readers had no collection for this long
    kept: list[str] = field(default_factory=list)  # previous or half-built collections left in place
    dropped: list[str] = field(default_factory=list)
    plan: list[dict[str, Any]] = field(default_factory=list)  # dry run: {url, source, chunks}

    def to_dict(self) -> dict[str, Any]:
        # The run report's keys too: the run history (status, CI) reads every entry alike.
        base = Report(
            dry_run=self.dry_run,
            now=self.now,
            collection=self.collection,
            embedder=self.embedder,
            started_at=self.started_at,
            finished_at=self.finished_at,
            pages_fetched=self.pages_fetched,
            pages_changed=self.pages_changed,
            pages_failed=self.pages_failed,
            chunks_embedded=self.chunks_embedded,
            chunks_reused=self.chunks_reused,
            chunks_written=self.chunks_written,
            bytes_downloaded=self.bytes_downloaded,
            tokens_embedded=self.tokens_embedded,
            seconds=self.seconds,
        ).to_dict()
        base.update(dataclasses.asdict(self))
        base["kind"] = "reindex"
        return base

    def summary(self) -> str:
        src = ", ".join(f"{self.text_sources[s]} {_SOURCE_WORDS[s]}" for s in TEXT_SOURCES)
        if self.dry_run:
            approx = "about " if self.chunks_estimated else ""
            line = (
                f"dry run: would build {self.target!r} from {self.source!r} with {self.embedder} "
                f"({self.dimension}-d): {plural(self.pages, 'page')}, {approx}{plural(self.chunks, 'chunk')} (text: {src}); "
                f"then point alias {self.alias!r} at it"
            )
            if self.drop_old:
                line += f" and delete {self.source!r}"
            return line
        line = (
            f"reindexed {plural(self.pages, 'page')}, {plural(self.chunks, 'chunk')} into {self.target!r} with {self.embedder} "
            f"({self.dimension}-d; text: {src}); verified; alias {self.alias!r} -> {self.target!r}"
        )
        if self.replaced_collection:
            line += f" (collection {self.source!r} deleted first to free the name: {self.gap_seconds:.3f}s without it)"
        if self.chunks_reused:
            line += f"; {plural(self.chunks_embedded, 'distinct text')} embedded for them"
        if self.pages_changed:
            line += f"; {plural(self.pages_changed, 're-fetched page')} had changed"
        if self.kept:
            line += f"; kept {', '.join(repr(k) for k in self.kept)} (delete with --drop-old)"
        if self.dropped:
            line += f"; deleted {', '.join(repr(d) for d in self.dropped)}"
        return line + f"; {self.seconds:.1f}s"


_SOURCE_WORDS = {"state": "kept in the state", "points": "from the old points", "fetch": "re-fetched"}


def new_collection_name(alias: str, now: datetime, taken: set[str]) -> str:
    """`<alias>__<UTC yyyymmddThhmmss>` (lowercase t), made unique against `taken`."""
    stamp = now.astimezone(timezone.utc).strftime("%Y%m%dt%H%M%S")
    base = f"{alias}__{stamp}"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    if len(name) > 255:
        raise ConfigError(f"alias {alias!r} is too long to name a new collection after it")
    return name


class _Planned:
    """The page state as it will be after the switch: what the new collection is audited against."""

    def __init__(self, pages: dict[str, PageState]):
        self._pages = pages

    def all_pages(self) -> list[PageState]:
        return [self._pages[u] for u in sorted(self._pages)]


def verify_built(
    store: Store, size: int | None, pages: dict[str, PageState], dimension: int, sample: tuple[str, list[float]] | None
) -> tuple[dict[str, Any], list[str]]:
    """What a built collection (`store`, of vector size `size`) shows before the alias switches
    to it: as many points as `pages` have chunks, a clean audit, the embedder's `dimension`,
    and, when all of that holds, a stored vector (`sample`) finding its own point. Returns the
    report's `verify` figures and the problems found (none: it may go live)."""
    problems = []
    expected = sum(p.chunk_count for p in pages.values())
    n = store.count()
    audit = audit_collection(store, _Planned(pages), examples=3)
    verify: dict[str, Any] = {"points": n, "expected": expected, "vector_size": size, "audit": audit.to_dict()}
    if n != expected:
        problems.append(f"{plural(n, 'point')} where the pages have {plural(expected, 'chunk')}")
    if not audit.ok:
        found = ", ".join(f"{c} {k}" for k, c in audit.counts.items() if c)
        problems.append(f"audit found {found}")
    if size != dimension:
        problems.append(f"vector size {size}, the embedder makes {dimension}")
    if sample is not None and not problems:
        _pid, vec = sample
        hits = store.search(vec, limit=1)
        ok = bool(hits) and hits[0][0] >= 0.99
        verify["search_check"] = ok
        if not ok:
            problems.append("a stored vector does not find its own point")
    return verify, problems


_WRITE_BATCH = 16  # pages per upsert into the new collection


class _NewCollection:
    """The embed queue's sink in a reindex: each batch's points upserted into the new collection,
    laid out exactly as a pass writes them. A page that got no vector fails the reindex."""

    def __init__(self, store: Store, embedder_id: str):
        self.store, self.embedder_id = store, embedder_id
        self.written = 0
        self.sample: tuple[str, list[float]] | None = None  # (point id, vector) for the search check

    def hold(self, item: TextItem) -> None:
        """Nothing to hold: the build keeps the texts that changed until the switch."""

    def would_write(self, items: Sequence[TextItem]) -> None:
        raise AssertionError("a dry run of reindex embeds nothing")

    def fail(self, page: PageState, message: str) -> None:
        raise PagesyncError(message)

    async def write(self, items: Sequence[TextItem]) -> None:
        points = []
        for item in items:
            vectors = [v for v in item.vectors if v is not None]
            assert len(vectors) == len(item.chunks), item.page.url  # the queue gave each chunk one
            points += build_points(
                item.page.url,
                item.chunks,
                vectors,
                hash_=item.page.content_hash or "",
                title=item.page.title or "",
                fetched_at=item.fetched_at,
                embedder_id=self.embedder_id,
                headings=item.headings or None,
                page_kind=item.page.page_kind or GUIDE,  # as its last pass told it (a re-fetch: told again)
            )
        if points:
            await asyncio.to_thread(self.store.upsert, points)
            if self.sample is None:
                self.sample = (points[0].id, list(points[0].vector or []))
        self.written += len(points)


class _Reindex:
    def __init__(
        self,
        catalog: Catalog,
        collection: str,
        state: State,
        embedder: Embedder,
        splitter: Splitter,
        cfg: ReindexConfig,
        fetcher: Any,
        client_factory: Callable[[], Any] | None,
    ):
        self.catalog, self.collection, self.state = catalog, collection, state
        self.embedder, self.splitter, self.cfg = embedder, splitter, cfg
        self.fetcher, self.client_factory = fetcher, client_factory
        self.now = cfg.now or datetime.now(timezone.utc)
        self.now_iso = self.now.isoformat()
        self.rules = cfg.site_rules
        # The pass's own fingerprints: what the next pass compares the rebuilt pages with.
        self.fingerprints = Fingerprints(
            cfg.site_rules,
            embedder_id=embedder.model_id,
            extractor_id=EXTRACTOR_ID,
            splitter_settings=splitter.settings,
        )
        self.report = ReindexReport(
            dry_run=cfg.dry_run,
            now=self.now_iso,
            collection=collection,
            embedder=embedder.model_id,
            dimension=embedder.dimension,
            drop_old=cfg.drop_old,
        )
        self.t0 = time.monotonic()
        self.after: dict[str, PageState] = {}  # url -> page as recorded after the switch
        self.texts: list[tuple[str, str, str]] = []  # re-fetched texts that changed: kept after the switch
        self.sink: _NewCollection | None = None  # where the build writes (set up in `_build`)
        self.memo: VectorMemo | None = None  # the vectors made so far, by reuse key (set up in `run`)
        self.by_url: dict[str, PageState] = {}  # the live pages (set in `run`)
        # Where each page's text comes from, cut and fingerprinted as a pass would (`reindex_texts`).
        self.sources = PageTexts(
            self.fingerprints, cfg.site_rules, splitter, embedder_id=embedder.model_id, now=self.now, report=self.report
        )

    # -- plan ---------------------------------------------------------------------------------
    def _plan_names(self) -> tuple[str, str, bool]:
        aliases, colls = self.catalog.aliases(), self.catalog.collections()
        alias = self.cfg.alias or self.collection
        if not _NAME_RE.match(alias):
            raise ConfigError(f"invalid alias name {alias!r} (letters, digits, _ . - only)")
        source = aliases.get(self.collection, self.collection)
        if source not in colls:
            if self.collection in aliases:
                raise ConfigError(f"alias {self.collection!r} points at {source!r}, which does not exist")
            raise ConfigError(
                f"collection {self.collection!r} does not exist: nothing to reindex (run 'pagesync run' first)"
            )
        # A physical collection carries the alias's name: the first switch of a plain collection.
        replace = alias in colls and alias not in aliases
        if replace and alias != source:
            raise ConfigError(f"--alias {alias!r} is the name of another collection; choose another alias")
        if replace and not self.catalog.alias_may_shadow and not self.cfg.drop_old:
            raise ConfigError(
                f"{alias!r} is a collection, not an alias, and Qdrant cannot create an alias with the name of an "
                f"existing collection: run with --drop-old (it is deleted right before the alias is created: "
                f"readers find no {alias!r} for that moment) or with --alias NEW_NAME (then point readers at it)"
            )
        target = new_collection_name(alias, self.now, colls | set(aliases))
        self.report.alias, self.report.source, self.report.target = alias, source, target
        return source, target, replace and not self.catalog.alias_may_shadow

    def _plan_sources(
        self, pages: list[PageState], source: str, tmpdir: str
    ) -> tuple[list[tuple[PageState, str]], Harvest | None]:
        last = self.state.last_run()
        if isinstance(last, dict) and isinstance(last.get("embedder"), str):
            self.sources.embedders_seen.add(last["embedder"])
        kept = self.state.text_hashes() if isinstance(self.state, TextKeeper) else {}
        # A kept text extracted under another selector than the page's now is no text to use.
        kept = {u: h for u, h in kept.items() if u not in self.by_url or self.sources.text_is_current(self.by_url[u])}
        plan: list[tuple[PageState, str]] = []
        need = [p for p in pages if kept.get(p.url) != p.content_hash]
        harvest = None
        if need:
            harvest = Harvest(tmpdir)
            store = self.catalog.open(source)
            try:
                harvest.fill(store, {p.url for p in need})
            finally:
                store.close()  # embedded: other processes may open the source again at once
            self.sources.embedders_seen |= harvest.embedders
        for p in pages:
            if kept.get(p.url) == p.content_hash:
                plan.append((p, "state"))
            else:
                usable = (
                    harvest is not None and harvest.page(p, partial(self.sources.fingerprint_of, url=p.url)) is not None
                )
                plan.append((p, "points" if usable else "fetch"))
        return plan, harvest

    # -- build ---------------------------------------------------------------------------------
    async def _build(self, plan: list[tuple[PageState, str]], harvest: Harvest | None, store: Store) -> None:
        """Each page's text (`PageTexts.text_of`) into the embed queue, which embeds each distinct
        text once in the whole reindex (its cache is the `VectorMemo` on disk) and hands the
        batches to the new collection (`_NewCollection`), while the next pages are read."""
        assert self.memo is not None  # made before the build (`run`)
        sink = self.sink = _NewCollection(store, self.embedder.model_id)
        counts = Report()  # the queue's counters, carried into the reindex's report below
        queue: EmbedQueue[TextItem] = EmbedQueue(
            store,
            self.embedder,
            sink,
            counts,
            batch=self.cfg.embed_batch,
            write_batch=_WRITE_BATCH,
            reuse_vectors=True,
            reuse_cache=0,
            reuse_leaving_chunks=0,
            read_stored=False,  # the new collection is empty; the old one may hold another model's vectors
            max_embed_tokens=None,
            dry_run=False,
            store_was_empty=True,
            cache=self.memo,
        )
        sem = asyncio.Semaphore(max(1, self.cfg.workers))
        window = max(16, 2 * self.cfg.workers)
        try:
            for i in range(0, len(plan), window):
                part = plan[i : i + window]
                kept = self._texts([p.url for p, s in part if s == "state"])
                items = await asyncio.gather(*(self.sources.text_of(p, s, kept, harvest, sem) for p, s in part))
                self._keep_same_texts(items)
                for item in items:
                    if item is None:
                        continue
                    self._record(item)
                    await queue.enqueue(item)
                    if queue.full():
                        await queue.flush()  # returns while the model works on the batch
            await queue.flush()
            await queue.drain()
        except BaseException:
            queue.cancel()  # a batch in flight is not written
            raise
        finally:
            r = self.report
            r.chunks_embedded, r.chunks_reused = counts.chunks_embedded, counts.chunks_reused
            r.tokens_embedded, r.chunks_written = counts.tokens_embedded, sink.written

    def _keep_same_texts(self, items: Sequence[TextItem | None]) -> None:
        """Re-fetched texts equal to the recorded ones are kept at once (right whatever becomes
        of this reindex); changed ones wait for the switch (they are few)."""
        same = [
            (i.page.url, i.page.content_hash or "", i.markdown)
            for i in items
            if i is not None and i.markdown is not None and i.page.content_hash == i.old_hash
        ]
        if same and isinstance(self.state, TextKeeper):
            self.state.put_texts(same)

    def _record(self, item: TextItem) -> None:
        """The page as the state records it after the switch, and its text if it changed."""
        item.page.chunk_count = len(item.chunks)  # a new chunker may cut the same text otherwise
        if item.markdown is not None:
            item.page.text_chars = len(item.markdown)
        self.report.text_sources[item.source] += 1
        self.after[item.page.url] = item.page
        if item.markdown is not None and item.page.content_hash != item.old_hash:
            self.texts.append((item.page.url, item.page.content_hash or "", item.markdown))

    def _texts(self, urls: list[str]) -> dict[str, tuple[str, str]]:
        return self.state.get_texts(urls) if urls and isinstance(self.state, TextKeeper) else {}

    # -- verify --------------------------------------------------------------------------------
    def _verify(self, store: Store, target: str) -> list[str]:
        self.report.verify, problems = verify_built(
            store,
            self.catalog.vector_size(target),
            self.after,
            self.embedder.dimension,
            self.sink.sample if self.sink is not None else None,
        )
        return problems

    # -- the whole ---------------------------------------------------------------------------------
    async def run(self) -> ReindexReport:
        r = self.report
        r.started_at = datetime.now(timezone.utc).isoformat()
        source, target, replace = self._plan_names()
        pages = [p for p in self.state.all_pages() if p.indexed]
        self.by_url = {p.url: p for p in pages}
        if not pages:
            raise ConfigError(
                "the page state records no indexed pages: nothing to reindex "
                "(is --state the one this collection was built with?)"
            )
        r.pages = len(pages)
        with tempfile.TemporaryDirectory(prefix="pagesync-reindex-") as tmpdir:
            plan, harvest = self._plan_sources(pages, source, tmpdir)
            self.memo = VectorMemo(Path(tmpdir) / "vectors.db")
            try:
                if self.cfg.dry_run:
                    await self._dry(plan, harvest)
                else:
                    await self._build_verify_switch(plan, harvest, source, target, replace)
            finally:
                self.memo.close()
                if harvest is not None:
                    harvest.close()
        return self._finish()

    async def _dry(self, plan: list[tuple[PageState, str]], harvest: Harvest | None) -> None:
        r = self.report
        kept = self._texts([p.url for p, s in plan if s == "state"])
        for page, source in plan:
            if source == "state" and page.url in kept:
                n = len(await asyncio.to_thread(self.splitter.split, kept[page.url][1]))
            else:
                n = page.chunk_count
                r.chunks_estimated |= source == "fetch"
            r.text_sources[source] += 1
            r.chunks += n
            r.plan.append({"url": page.url, "source": source, "chunks": n})
        r.ok = True

    async def _build_verify_switch(self, plan, harvest, source: str, target: str, replace: bool) -> None:
        r = self.report
        if target in self.catalog.collections():  # never write into a collection that exists
            raise ConfigError(f"collection {target!r} exists already; try again in a second")
        store = self.catalog.open(target)
        try:
            try:
                store.ensure_collection(self.embedder.dimension)
                # A Fetcher is at hand even when no page is planned to be fetched: a kept
                # text or old points that turn out unusable fall back to a re-fetch.
                await self._with_fetcher(lambda: self._build(plan, harvest, store))
                if r.errors:
                    first = r.errors[0]
                    raise PagesyncError(
                        f"{len(r.errors)} page(s) could not be read again (first: {first['url']}: {first['error']})"
                    )
                problems = self._verify(store, target)
                if problems:
                    raise PagesyncError("verification failed: " + "; ".join(problems))
            finally:
                store.close()  # embedded: flushed, and free for readers once the alias points here
        except PagesyncError as exc:
            self._fail(str(exc), target)
        r.chunks = r.chunks_written
        # -- the switch: nothing before this line has touched what readers see.
        if replace:  # a server, first time: the name must be free before an alias can carry it
            t = time.monotonic()
            self.catalog.drop(source)
            r.dropped.append(source)
            try:
                self.catalog.switch(r.alias, target, exists=False)  # no lookup inside the gap
            except PagesyncError as exc:
                raise PagesyncError(
                    f"collection {source!r} was deleted but alias {r.alias!r} could not be created "
                    f"({exc}); create alias {r.alias!r} -> {target!r} by hand"
                ) from None
            r.gap_seconds = round(time.monotonic() - t, 3)
            r.replaced_collection = True
        else:
            self.catalog.switch(r.alias, target)
        r.switched = True
        # -- the state follows the collection the alias now names.
        try:
            self.state.put_many(self.after[u] for u in sorted(self.after))
            if self.texts and isinstance(self.state, TextKeeper):
                self.state.put_texts(self.texts)
        except PagesyncError as exc:
            raise PagesyncError(
                f"alias {r.alias!r} now points at {target!r}, but the page state could not be "
                f"updated ({exc}); the next pass will re-embed every page"
            ) from None
        if source not in r.dropped:
            others = [a for a, c in self.catalog.aliases().items() if c == source and a != r.alias]
            if self.cfg.drop_old and not others:
                self.catalog.drop(source)
                r.dropped.append(source)
            else:
                r.kept.append(source)
                if others:
                    r.errors.append(
                        {
                            "url": "(reindex)",
                            "error": f"{source!r} kept: alias(es) {', '.join(others)} still point at it",
                        }
                    )
        if (
            self.cfg.drop_old
            and self.catalog.alias_may_shadow
            and r.alias not in r.dropped
            and r.alias != target
            and r.alias in self.catalog.collections()
            and r.alias not in self.catalog.aliases().values()
        ):
            # Embedded: a plain collection the alias has shadowed since a first reindex that kept
            # it; nothing can reach it by name any more.
            self.catalog.drop(r.alias)
            r.dropped.append(r.alias)
        r.ok = True

    async def _with_fetcher(self, body):
        """Run `body` with a Fetcher at hand (made here, in this event loop, unless given)."""
        if self.fetcher is not None:
            self.sources.fetcher = self.fetcher
            return await body()
        from ..edges.fetcher import Fetcher, make_client

        scope = Scope.from_urls([p.url for p in self.state.all_pages() if p.indexed])
        cache = self.state if isinstance(self.state, FetchCache) else None
        async with self.client_factory() if self.client_factory else make_client() as client:
            # Each site's --header goes to its own hosts only, as in a pass (`headers_in_scope`).
            self.sources.fetcher = Fetcher(
                client,
                scope=scope.check,
                cache=cache,
                now=self.now,
                site_headers=lambda url: headers_in_scope(self.rules, url, scope.check, scope.plain_http_ok),
            )
            try:
                return await body()
            finally:
                self.sources.fetcher = None

    def _fail(self, reason: str, target: str) -> None:
        r = self.report
        r.ok = False
        where = getattr(self.catalog, "where", lambda n: repr(n))(target)
        if self.cfg.drop_failed:
            try:
                self.catalog.drop(target)
                r.dropped.append(target)
                what = f"the new collection {target!r} was deleted (--drop-failed)"
            except PagesyncError as exc:
                r.kept.append(target)
                what = f"the new collection {target!r} could not be deleted ({exc})"
        else:
            r.kept.append(target)
            what = f"the half-built collection {target!r} is kept for inspection ({where}; delete it when done)"
        r.error = f"reindex failed, alias {r.alias!r} still points at {r.source!r}: {reason}; {what}"
        r.error = " ".join(r.error.split())  # one line
        self._finish()
        raise ReindexFailed(r.error, r)

    def _finish(self) -> ReindexReport:
        r = self.report
        r.finished_at = datetime.now(timezone.utc).isoformat()
        r.seconds = round(time.monotonic() - self.t0, 3)
        if r.ok and not r.dry_run:
            # A reindex schedules nothing and crawls nothing: the last pass's revisit policy goes on
            # (the next pass compares its own with it: `sync.stages.plan.Planner._reschedule_on_switch`),
            # and so does its crawl's overflow count (`sync.core.report.overflow_passes`).
            last = self.state.last_run()
            keys = ("policy", "revisit_interval_s", "crawl_overflow_passes")
            carry = {k: last[k] for k in keys if isinstance(last, dict) and k in last}
            self.state.record_run({**carry, **r.to_dict()})
        return r


def _check_selectors(rules: SiteRuleSet) -> None:
    """ConfigError for a configured selector that is no CSS selector (before any page is read)."""
    from chunking.extract import SelectorError, compile_selector

    for css in rules.selectors:
        try:
            compile_selector(css)
        except SelectorError as exc:
            raise ConfigError(str(exc)) from None


async def arun_reindex(
    catalog: Catalog,
    collection: str,
    *,
    state: State,
    embedder: Embedder,
    splitter: Splitter | None = None,
    cfg: ReindexConfig | None = None,
    fetcher: Any = None,
    client_factory: Callable[[], Any] | None = None,
) -> ReindexReport:
    """Async form of `run_reindex`."""
    if splitter is None:
        from ..stages.chunks import splitter_for

        splitter = splitter_for(embedder)  # as a pass chunks for this embedder
    job = _Reindex(catalog, collection, state, embedder, splitter, cfg or ReindexConfig(), fetcher, client_factory)
    job._plan_names()  # usage errors first, whoever holds the lock; planned again under it
    _check_selectors(job.cfg.site_rules)  # a selector no CSS parser reads: exit 2, nothing read
    check = getattr(embedder, "check", None)
    if callable(check):
        check()  # a model that cannot run here is exit 2 before the lock, like a pass's preflight
    state.lock(wait=job.cfg.wait_lock)
    try:
        return await job.run()
    finally:
        state.unlock()


def run_reindex(
    catalog: Catalog,
    collection: str,
    *,
    state: State,
    embedder: Embedder,
    splitter: Splitter | None = None,
    cfg: ReindexConfig | None = None,
    client_factory: Callable[[], Any] | None = None,
) -> ReindexReport:
    """Rebuild `collection` (an alias or a plain collection) with `embedder` and `splitter`
    into a new collection, verify it, and switch the alias (see the module docstring).

    Returns the report; raises `ReindexFailed` (exit 1; the alias untouched, the report on
    the exception) when the build or the verification fails, `ConfigError` (exit 2) when
    there is nothing to reindex or the switch is impossible as asked.
    """
    return asyncio.run(
        arun_reindex(
            catalog,
            collection,
            state=state,
            embedder=embedder,
            splitter=splitter,
            cfg=cfg,
            client_factory=client_factory,
        )
    )
