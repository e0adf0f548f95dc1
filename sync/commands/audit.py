"""`pagesync audit`: compare the collection with the page state, and repair it.

One scroll over the collection (payload fields only, in pages), folded into per-URL
summaries, so memory grows with the number of pages, not of points. Findings:

- orphans: points whose `url` is not a live tracked page;
- stale: points whose `content_hash` is not the page's recorded hash (an old generation),
  and points of the current generation whose `title` is not the page's recorded title
  (a title-only rewrite that did not finish: the hash does not cover the title);
- broken: a live page whose current points have gaps or duplicates in `chunk_index`, a
  `chunk_id` that is not `sha256(url)_cN`, or a point id not derived from its `chunk_id`;
- missing: live pages with no points, or fewer than their recorded chunk count;
- foreign: points with no `url` payload, or with a `url` on a site (host and port) this
  state never tracked (written by something else: another state sharing the
  collection): reported, and touched only with `include_foreign`;
- metadata: current, well-formed points whose `metadata` object is missing or is not a
  copy of their own `url`, `title`, `chunk_id`, `chunk_index` and `fetched_at`
  (`sync.core.payload`; a collection written before points carried it);
- keywords: points without a BM25 keyword vector (every point of a collection built before
  them, which has no sparse vector at all).

A repair deletes orphan points and old generations (and foreign points when asked), and
re-indexes broken and missing pages and pages with an old title through a repair pass. An
old title's points are the page's current chunks: they are rewritten with the page as a
unit, never deleted first (a re-fetch that fails then leaves them in place). A point's
`metadata` is set from its own payload in place: nothing fetched, nothing embedded, the
vector kept. Keyword vectors are added the same way: the collection gains the sparse
vector and each point without one gets it, computed from its stored text and headings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence

from chunking.split import embedded_text

from ..core.ids import point_id as make_point_id
from ..core.ids import url_digest
from ..core.payload import METADATA_FIELDS, METADATA_KEY, metadata_is_current, point_metadata
from ..core.plural import plural
from ..core.scope import url_host
from ..edges.state_protocol import State
from ..edges.store import Store

if TYPE_CHECKING:
    from ..core.page import PageState

__all__ = ["AuditReport", "audit_collection", "fix_collection", "restore_metadata", "run_audit", "CATEGORIES"]

CATEGORIES = ("orphans", "stale", "broken", "missing", "foreign", "metadata", "keywords", "too_long")
_FIELDS = ["url", "chunk_id", "chunk_index", "content_hash", "title", "fetched_at", "headings", METADATA_KEY]


class _Pages(Protocol):
    """What the audit reads of a state: its pages (a `State`, or the pages a reindex plans)."""

    def all_pages(self) -> list[PageState]: ...


class _UrlSummary:
    """What the scan saw of one live url's points."""

    __slots__ = (
        "content_hash",
        "title",
        "chunk_prefix",
        "indexes",
        "bad_ids",
        "stale_ids",
        "old_titles",
        "stored_title",
        "no_metadata",
        "too_long",
        "model_input",
    )

    def __init__(self, url: str, content_hash: str | None, title: str | None):
        self.content_hash = content_hash
        self.title = title or ""  # as the points carry it: a page without a title has ""
        self.chunk_prefix = f"{url_digest(url)}_c"  # chunk_id(url, i) is this + f"{i}": one sha256 a url
        self.indexes: dict[int, int] = {}  # chunk_index -> count (current generation)
        self.bad_ids: list[str] = []
        self.stale_ids: list[str] = []
        # Well-formed current points whose title is not the page's: a count and the first
        # title seen, not their ids (the fix rewrites the page), so memory stays per page.
        self.old_titles = 0
        self.stored_title: Any = None
        self.no_metadata = 0  # current, well-formed points whose `metadata` is not their own
        self.too_long = 0  # current points whose embedded text is longer than their model reads
        self.model_input: int | None = None  # what that model reads, in tokens


@dataclass
class AuditReport:
    """What `audit` found in the collection against the state, and what `--fix` repaired."""

    points_scanned: int = 0
    pages_live: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CATEGORIES})
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    # what a fix acts on
    delete_ids: list[str] = field(default_factory=list)
    foreign_ids: list[str] = field(default_factory=list)
    reindex_urls: list[str] = field(default_factory=list)
    metadata_urls: list[str] = field(default_factory=list)  # pages with points whose `metadata` is set in place
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def note(self, category: str, n: int, example: dict[str, Any], limit: int) -> None:
        self.counts[category] += n
        if len(self.examples[category]) < limit:
            self.examples[category].append(example)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "points_scanned": self.points_scanned,
            "pages_live": self.pages_live,
            "counts": self.counts,
            "examples": self.examples,
            "seconds": self.seconds,
        }

    def render(self) -> str:
        lines = [f"scanned {plural(self.points_scanned, 'point')} against {plural(self.pages_live, 'live page')}"]
        lines.append(f"{'category':<10} {'count':>8}  example")
        for c in CATEGORIES:
            ex = self.examples[c][0] if self.examples[c] else None
            shown = _describe(c, ex) if ex else ""
            lines.append(f"{c:<10} {self.counts[c]:>8}  {shown[:110]}")
        lines.append("clean" if self.ok else "problems found")
        return "\n".join(lines)


def _describe(category: str, ex: dict[str, Any]) -> str:
    """One example in words. A page's `points` in the JSON are its well-formed points of the
    current generation; its stale points and points with a bad id or index are counted apart."""
    if category in ("broken", "missing"):
        text = f"{plural(ex['points'], 'good current point')} of {ex['expected']} recorded"
        if ex.get("bad_ids"):
            text += f" + {ex['bad_ids']} with a bad id or chunk index"
        return f"{text}: {ex['url']}"
    if category == "stale":
        if "stored_title" in ex:
            return f"{plural(ex['points'], 'point')} with an old title ({ex['stored_title']!r}, not {ex['title']!r}): {ex['url']}"
        return f"{plural(ex['points'], 'point')} of an old generation: {ex['url']}"
    if category == "metadata":
        return f"{plural(ex['points'], 'point')} without a current metadata object: {ex['url']}"
    if category == "keywords":
        return f"{plural(ex['points'], 'point')} without a keyword vector ({ex['vector']!r})"
    if category == "too_long":
        return f"{plural(ex['points'], 'point')} longer than the model reads ({ex['limit']} tokens): {ex['url']}"
    return ", ".join(f"{k}={v}" for k, v in ex.items())


def audit_collection(
    store: Store, state: _Pages, *, examples: int = 5, batch: int = 1024, counter_of: Callable[[str], Any] | None = None
) -> AuditReport:
    """Scan the collection once and compare it with the state (read-only). `counter_of`:
    a point's embedder id -> its token counter (`embedders.tokens`) or None; with it the
    texts are read too, and current points whose embedded text is longer than their model
    reads are `too_long` (a collection chunked before chunks were sized in tokens)."""
    import time

    t0 = time.monotonic()
    rep = AuditReport()
    pages = state.all_pages()
    live = {p.url: p for p in pages if p.indexed}
    rep.pages_live = len(live)
    # The sites (host and port) this state has ever tracked: a point of another site is
    # another writer's (a second state sharing the collection), not an orphan of ours.
    sites = {url_host(p.url)[0] for p in pages}
    seen: dict[str, _UrlSummary] = {}
    scanned = 0
    # The hot loop: one pass of plain tuples and dicts, the per-url work (page lookup, url
    # digest) done once per url; per point only the point id's uuid5 is computed.
    seen_get, live_get, point_id = seen.get, live.get, make_point_id
    fields = [*_FIELDS, "text", "embedder"] if counter_of is not None else _FIELDS
    for rows in _payload_pages(store, batch, fields):
        scanned += len(rows)
        for pid, pl in rows:
            url = pl.get("url")
            if not isinstance(url, str):
                rep.note("foreign", 1, {"id": pid}, examples)
                rep.foreign_ids.append(pid)
                continue
            summary = seen_get(url)
            if summary is None:
                page = live_get(url)
                if page is None:
                    if sites and url_host(url)[0] not in sites:
                        rep.note("foreign", 1, {"id": pid, "url": url}, examples)
                        rep.foreign_ids.append(pid)
                    else:
                        rep.note("orphans", 1, {"id": pid, "url": url}, examples)
                        rep.delete_ids.append(pid)
                    continue
                summary = seen[url] = _UrlSummary(url, page.content_hash, page.title)
            if pl.get("content_hash") != summary.content_hash:
                summary.stale_ids.append(pid)
                continue
            idx = pl.get("chunk_index")
            if (
                not isinstance(idx, int)
                or idx < 0
                or pl.get("chunk_id") != f"{summary.chunk_prefix}{idx}"
                or pid != point_id(pl["chunk_id"])
            ):
                summary.bad_ids.append(pid)
                continue
            indexes = summary.indexes
            indexes[idx] = indexes.get(idx, 0) + 1
            # A current, well-formed point (it counts above, so its page is neither missing
            # nor broken for it) whose title is not the page's: stale as well. Else one
            # whose `metadata` is not its own (a point with an old title is rewritten whole).
            title = pl.get("title")
            if (title or "") != summary.title:
                if not summary.old_titles:
                    summary.stored_title = title
                summary.old_titles += 1
            elif not metadata_is_current(pl):
                summary.no_metadata += 1
            if counter_of is not None and (limit := _over_model_input(pl, counter_of)) is not None:
                summary.too_long += 1
                summary.model_input = limit
    rep.points_scanned = scanned

    for url, page in live.items():
        s = seen.get(url)
        if s is not None and s.stale_ids:
            rep.note("stale", len(s.stale_ids), {"url": url, "points": len(s.stale_ids)}, examples)
            rep.delete_ids.extend(s.stale_ids)
        current = sum(s.indexes.values()) if s is not None else 0
        if current < page.chunk_count and not (s is not None and (s.bad_ids or _has_gaps_or_dupes(s.indexes))):
            rep.note("missing", 1, {"url": url, "points": current, "expected": page.chunk_count}, examples)
            rep.reindex_urls.append(url)
        elif s is not None and (s.bad_ids or _has_gaps_or_dupes(s.indexes) or current > page.chunk_count):
            rep.note(
                "broken",
                1,
                {"url": url, "points": current, "expected": page.chunk_count, "bad_ids": len(s.bad_ids)},
                examples,
            )
            rep.reindex_urls.append(url)
        if s is not None and s.old_titles:
            rep.note(
                "stale",
                s.old_titles,
                {"url": url, "points": s.old_titles, "title": s.title, "stored_title": s.stored_title},
                examples,
            )
            if not rep.reindex_urls or rep.reindex_urls[-1] != url:  # once, if not broken or missing already
                rep.reindex_urls.append(url)
        if s is not None and s.no_metadata:
            rep.note("metadata", s.no_metadata, {"url": url, "points": s.no_metadata}, examples)
            if not rep.reindex_urls or rep.reindex_urls[-1] != url:  # a re-indexed page gets it anyway
                rep.metadata_urls.append(url)
        if s is not None and s.too_long:
            rep.note("too_long", s.too_long, {"url": url, "points": s.too_long, "limit": s.model_input}, examples)
            if not rep.reindex_urls or rep.reindex_urls[-1] != url:  # re-chunked by the repair pass
                rep.reindex_urls.append(url)
    missing_keywords = getattr(store, "keywords_missing", None)  # (a Store from before keyword vectors: none)
    no_keywords = missing_keywords() if callable(missing_keywords) and scanned else 0
    if no_keywords:
        from ..edges.keywords import SPARSE_VECTOR

        rep.note("keywords", no_keywords, {"points": no_keywords, "vector": SPARSE_VECTOR}, examples)
    rep.seconds = round(time.monotonic() - t0, 3)
    return rep


def _over_model_input(pl: dict[str, Any], counter_of: Callable[[str], Any]) -> int | None:
    """What the point's model reads, when its embedded text (`headings` and `text`) is
    longer; None when it fits (or its model's tokens are not known here)."""
    text, embedder = pl.get("text"), pl.get("embedder")
    if not isinstance(text, str) or not isinstance(embedder, str):
        return None
    counter = counter_of(embedder)
    if counter is None or counter.limit is None:
        return None
    headings = pl.get("headings")
    if isinstance(headings, list) and all(isinstance(h, str) for h in headings):
        text = embedded_text(text, headings)
    return counter.limit if counter.count(text) > counter.limit else None


def model_counters() -> Callable[[str], Any]:
    """Embedder id -> the token counter of that model as pagesync runs it (memoised; None
    for a model pagesync does not have, or one with no tokenizer here). Nothing is loaded
    but a tokenizer file; a remote model's counter is its offline bound."""
    memo: dict[str, Any] = {}

    def counter_of(model_id: str) -> Any:
        if model_id not in memo:
            memo[model_id] = None
            try:
                from embedders import make_embedder, name_for_model_id
                from embedders.tokens import counter_for

                name = name_for_model_id(model_id)
                if name is not None and not name.startswith("openai:"):  # the byte bound overcounts
                    memo[model_id] = counter_for(make_embedder(name))
            except Exception:  # noqa: BLE001 - an audit of a model not installed checks the rest
                memo[model_id] = None
        return memo[model_id]

    return counter_of


def _payload_pages(
    store: Store, batch: int, fields: Sequence[str] = _FIELDS
) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Pages of (point id, payload `fields`: the audit's by default): the store's lean scan,
    or its plain scroll for a Store written before `scroll_payloads` existed."""
    lean = getattr(store, "scroll_payloads", None)
    if lean is not None:
        yield from lean(list(fields), batch=batch)
        return
    for p in store.scroll(batch=batch, payload_fields=list(fields)):
        yield [(p.id, p.payload)]


def _has_gaps_or_dupes(indexes: dict[int, int]) -> bool:
    if not indexes:
        return False
    n = len(indexes)
    return any(c != 1 for c in indexes.values()) or min(indexes) != 0 or max(indexes) != n - 1


def restore_metadata(store: Store, urls: Sequence[str], *, batch: int = 1024) -> int:
    """Set the `metadata` object of these urls' points from their own payload, in place
    (one lean scan of the collection; vectors untouched, nothing embedded). Returns the
    points it set."""
    wanted = set(urls)
    if not wanted:
        return 0
    todo: list[tuple[Any, dict[str, Any]]] = []
    done = 0
    for rows in _payload_pages(store, batch, [*METADATA_FIELDS, METADATA_KEY]):
        for pid, pl in rows:
            if pl.get("url") in wanted and not metadata_is_current(pl):
                todo.append((pid, {METADATA_KEY: point_metadata(pl)}))
        if len(todo) >= batch:
            store.set_payloads(todo)
            done, todo = done + len(todo), []
    if todo:
        store.set_payloads(todo)
        done += len(todo)
    return done


async def fix_collection(
    store: Store,
    state: State,
    report: AuditReport,
    *,
    fetcher: Any,
    embedder: Any,
    include_foreign: bool = False,
    now: Any = None,
    wait_lock: float = 0.0,
    max_embed_tokens: int | None = None,
    site_rules: Any = None,
) -> Any:
    """Repair what `report` found: delete orphan and stale points (and foreign ones when
    asked), set the `metadata` of points lacking it and the keyword vector of points
    lacking one in place, then re-index broken and
    missing pages with a repair pass (fetched again and rewritten as a unit). `site_rules`
    (a `SiteRuleSet`: the ones `run` uses) make the repair read pages as a pass does: each
    site's selector and its headers. Returns that pass's run report, or None when nothing
    needed it."""
    from datetime import datetime, timezone

    from ..engine import PassConfig, arun_pass

    doomed = report.delete_ids + (report.foreign_ids if include_foreign else [])
    if doomed:
        store.delete_points(doomed)
    restore_metadata(store, report.metadata_urls)
    if report.counts.get("keywords"):
        store.add_keywords()  # before the repair pass: its pages are then written with theirs
    if not report.reindex_urls:
        return None
    rules = {"site_rules": site_rules} if site_rules is not None else {}
    cfg = PassConfig(
        repair=list(report.reindex_urls),
        urls=list(report.reindex_urls),
        now=now or datetime.now(timezone.utc),
        wait_lock=wait_lock,
        max_embed_tokens=max_embed_tokens,
        **rules,
    )
    return await arun_pass(cfg, fetcher=fetcher, store=store, state=state, embedder=embedder)


def run_audit(
    store: Store,
    state: State,
    *,
    fix: bool = False,
    include_foreign: bool = False,
    embedder_name: str | None = None,
    timeout: float = 30.0,
    examples: int = 5,
    wait_lock: float = 0.0,
    now: Any = None,
    embed_dimensions: int | None = None,
    embed_concurrency: int | None = None,
    max_embed_tokens: int | None = None,
    site_rules: Any = None,
) -> tuple[dict, bool, str]:
    """What `pagesync audit` does: audit; with `fix`, repair and audit again.

    Holds the state lock throughout (a fix writes, and even a read-only audit must not
    race a pass), handing it to the repair pass while that runs. Returns the JSON
    document, whether the final audit is clean, and the human rendering. `wait_lock`:
    seconds to wait for another pass's lock before refusing. `embed_dimensions`,
    `embed_concurrency` (a remote embedder's), `max_embed_tokens` and `site_rules` (the
    configuration's `SiteRuleSet`, as `run` builds it) go to the repair pass.
    """
    import asyncio

    state.lock(wait=wait_lock)
    counters = model_counters()
    first = audit_collection(store, state, examples=examples, counter_of=counters)
    out: dict[str, Any] = {"audit": first.to_dict()}
    text = first.render()
    final = first
    if fix and not first.ok:
        from ..edges.fetcher import Fetcher, make_client
        from .checks import choose_embedder

        # Before anything is deleted: an embedder that cannot fill this collection is exit 2
        # with nothing written. Without --embedder: the one the points name, when known.
        # Only a re-index embeds: deletes and metadata set in place need no model (nor a
        # remote embedder's key).
        embedder = (
            choose_embedder(
                embedder_name, store, why="audit --fix", dimensions=embed_dimensions, concurrency=embed_concurrency
            )
            if first.reindex_urls
            else None
        )

        async def repair() -> Any:
            async with make_client(timeout=timeout) as client:
                return await fix_collection(
                    store,
                    state,
                    first,
                    fetcher=Fetcher(client),
                    embedder=embedder,
                    include_foreign=include_foreign,
                    now=now,
                    wait_lock=wait_lock,
                    max_embed_tokens=max_embed_tokens,
                    site_rules=site_rules,
                )

        state.unlock()  # the repair pass takes the lock itself
        rep = asyncio.run(repair())
        state.lock(wait=wait_lock)
        final = audit_collection(store, state, examples=examples, counter_of=counters)
        deleted = len(first.delete_ids) + (len(first.foreign_ids) if include_foreign else 0)
        out["fix"] = {
            "deleted_points": deleted,
            "reindexed_pages": len(first.reindex_urls),
            "metadata_pages": len(first.metadata_urls),
            "keyword_points": first.counts["keywords"],
            "pass": rep.to_dict() if rep else None,
        }
        out["after_fix"] = final.to_dict()
        text += (
            f"\n\nfix: deleted {plural(deleted, 'point')}, re-indexed {plural(len(first.reindex_urls), 'page')}, "
            f"set metadata in place on {plural(len(first.metadata_urls), 'page')}, "
            f"keyword vectors on {plural(first.counts['keywords'], 'point')}; "
            f"audit again:\n{final.render()}"
        )
    return out, final.ok, text
