"""Where a reindex takes each live page's text from: the state's kept text, the old points, or a re-fetch.

`PageTexts.text_of` gives a page's chunks for the new collection (`TextItem`) from the source
the plan chose (`TEXT_SOURCES`), falling back to a re-fetch when a kept text or the old points
turn out unusable; `Harvest` holds the old collection's chunk texts for the `points` source.
Every page keeps the fingerprint a pass would record for it (`sync.stages.fingerprints`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from chunking import Splitter, extract_page
from chunking.split import Chunk, embedded_text

from ..core.decision import Outcome
from ..core.hashing import content_hash
from ..core.ids import canonical_url
from ..core.page import PageState
from ..core.site_rules import SiteRuleSet
from ..edges.store import Store
from ..stages.fingerprints import Fingerprints

__all__ = ["TEXT_SOURCES", "TextItem", "Harvest", "PageTexts"]

TEXT_SOURCES = ("state", "points", "fetch")
_HARVEST_FIELDS = ["url", "chunk_index", "content_hash", "text", "embedder", "fetched_at", "headings"]


@dataclass
class TextItem:
    """One page's text for the new collection, on its way through the embed queue."""

    page: PageState  # as the state will record it after the switch
    source: str
    chunks: list[str]
    fetched_at: str
    markdown: str | None = None  # re-fetched text, kept in the state
    old_hash: str | None = None  # the page's hash before the reindex
    headings: list[tuple[str, ...]] = dataclasses.field(default_factory=list)  # per chunk: its heading path
    # Per chunk: what the model embeds (its heading path, then the chunk), and what the embed
    # queue fills in (`sync.stages.pending.Embeddable`): its reuse key and its vector.
    inputs: list[str] = dataclasses.field(default_factory=list)
    keys: list[str] = dataclasses.field(default_factory=list)
    vectors: list[Sequence[float] | None] = dataclasses.field(default_factory=list)
    reused: int = 0

    def __post_init__(self) -> None:
        if not self.inputs:
            paths = self.headings or [() for _ in self.chunks]
            self.inputs = [embedded_text(t, h) for t, h in zip(self.chunks, paths, strict=True)]


class Harvest:
    """Chunk texts read once from the source collection, kept in a temporary SQLite file
    (memory stays flat however large the collection) and read back per page."""

    def __init__(self, tmpdir: str):
        self.db = sqlite3.connect(str(Path(tmpdir) / "harvest.db"), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute(
            "CREATE TABLE chunks (url TEXT, idx INTEGER, hash TEXT, embedder TEXT, fetched_at TEXT, text TEXT, "
            "headings TEXT)"
        )
        self.embedders: set[str] = set()

    def fill(self, store: Store, urls: set[str]) -> int:
        n = 0
        rows = []
        for p in store.scroll(batch=512, payload_fields=_HARVEST_FIELDS):
            pl = p.payload
            if pl.get("url") not in urls:
                continue
            rows.append(
                (
                    pl["url"],
                    pl.get("chunk_index"),
                    pl.get("content_hash"),
                    pl.get("embedder"),
                    pl.get("fetched_at"),
                    pl.get("text"),
                    json.dumps(pl.get("headings")),
                )
            )
            if isinstance(pl.get("embedder"), str):
                self.embedders.add(pl["embedder"])
            n += 1
            if len(rows) >= 2048:
                self._put(rows)
                rows = []
        self._put(rows)
        self.db.execute("CREATE INDEX chunks_url ON chunks(url, idx)")
        return n

    def _put(self, rows: list[tuple]) -> None:
        if rows:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            self.db.execute("COMMIT")

    def page(
        self, page: PageState, fingerprint: Callable[[str], str]
    ) -> tuple[list[str], str | None, list[tuple[str, ...]]] | None:
        """The page's chunk texts, fetched_at and heading paths when its points are exactly its current
        generation, cut by the current extractor (with the page's selector) and chunker:
        `fingerprint(embedder)` is then the page's for one embedder seen; else None."""
        rows = self.db.execute(
            "SELECT idx, hash, embedder, fetched_at, text, headings FROM chunks WHERE url = ? ORDER BY idx", (page.url,)
        ).fetchall()
        if len(rows) != page.chunk_count:
            return None
        if [r[0] for r in rows] != list(range(len(rows))):
            return None
        if any(r[1] != page.content_hash or not isinstance(r[4], str) for r in rows):
            return None
        # Which embedder made them does not matter, only that the extractor and the chunker
        # were the current ones: the page's fingerprint must be (some embedder seen, them).
        made_by = {r[2] for r in rows} if rows else self.embedders
        if not any(isinstance(e, str) and fingerprint(e) == page.fingerprint for e in made_by):
            return None
        paths = [json.loads(r[5]) if r[5] else None for r in rows]
        headings = [tuple(p) if isinstance(p, list) else () for p in paths]
        return [r[4] for r in rows], (rows[0][3] if rows else None), headings

    def close(self) -> None:
        self.db.close()


class PageTexts:
    """Each page's text for the new collection, and the fingerprints that say whether a kept
    text or old points were cut the way a pass cuts now. `report` counts the re-fetches;
    `fetcher` is set while the build runs (a re-fetch needs one)."""

    def __init__(
        self,
        fingerprints: Fingerprints,
        rules: SiteRuleSet,
        splitter: Splitter,
        *,
        embedder_id: str,
        now: datetime,
        report: Any,
    ):
        self.fingerprints, self.rules, self.splitter, self.report = fingerprints, rules, splitter, report
        self.now, self.now_iso = now, now.isoformat()
        self.fetcher: Any = None
        self.embedders_seen: set[str] = {embedder_id}  # who made the pages' fingerprints (`text_is_current`)

    def select(self, url: str) -> str | None:
        return self.fingerprints.select_for(url)

    def fingerprint_of(self, embedder_id: str, url: str, select: Any = ...) -> str:
        """The fingerprint of `url` by `embedder_id`, the current extractor with the page's
        selector (or `select`) and the current chunker: the formula a pass records."""
        return self.fingerprints.of(embedder_id, self.select(url) if select is ... else select)

    def fingerprint_for(self, url: str) -> str:
        """What the state records for `url` after the switch (the next pass compares with it)."""
        return self.fingerprints.for_url(url)

    def text_is_current(self, page: PageState) -> bool:
        """False when the page's fingerprint shows its kept text was extracted under another
        selector than its site's rules name now (none, or another configured one), for an
        embedder seen: that text is read again. Unknown (a new chunker too): the kept text
        is taken as the last pass left it."""
        url = page.url
        select = self.select(url)
        if any(self.fingerprint_of(e, url) == page.fingerprint for e in self.embedders_seen):
            return True
        others = {None, *self.rules.selectors} - {select}
        return not any(
            self.fingerprint_of(e, url, other) == page.fingerprint for e in self.embedders_seen for other in others
        )

    async def text_of(
        self,
        page: PageState,
        source: str,
        kept: dict[str, tuple[str, str]],
        harvest: Harvest | None,
        sem: asyncio.Semaphore,
    ) -> TextItem | None:
        after = dataclasses.replace(page, fingerprint=self.fingerprint_for(page.url))
        if source == "state":
            h, md = kept.get(page.url, (None, ""))
            if h == page.content_hash and content_hash(md) == page.content_hash and self.text_is_current(page):
                pieces = await asyncio.to_thread(self._chunks_of, md, page.title or "")
                stamp = page.last_changed_at.isoformat() if page.last_changed_at else self.now_iso
                return TextItem(after, "state", [c.text for c in pieces], stamp, headings=[c.headings for c in pieces])
            source = "fetch"  # damaged or changed meanwhile: read the page again
        if source == "points":
            got = harvest.page(page, lambda e: self.fingerprint_of(e, page.url)) if harvest is not None else None
            if got is not None:
                chunks, fetched_at, paths = got
                return TextItem(after, "points", chunks, fetched_at or self.now_iso, headings=paths)
            source = "fetch"
        async with sem:
            res = await self.fetcher.fetch_page(page.url, None)
        r = self.report
        r.bytes_downloaded += res.bytes_downloaded
        if res.answered:
            r.pages_fetched += 1
        problem = None
        if res.outcome is not Outcome.OK:
            problem = res.error or (f"HTTP {res.status}" if res.status else res.outcome.value)
            if res.outcome is Outcome.GONE:
                problem += " (gone: run 'pagesync run' to purge it, then reindex)"
        elif res.moved_permanently and canonical_url(res.redirects[-1][1]) != page.url:
            problem = f"moved permanently to {res.redirects[-1][1]} (run 'pagesync run' first)"
        if problem is None:
            try:
                md, title, pieces, after.page_kind = await asyncio.to_thread(
                    self._extract, res.body, res.content_type, page.url, res.charset
                )
                chunks = [c.text for c in pieces]
            except Exception as exc:  # a page the extractor chokes on
                problem = f"extraction failed: {exc}"
        if problem is not None:
            r.pages_failed += 1
            r.errors.append({"url": page.url, "error": f"re-fetch: {problem}"})
            return None
        h = content_hash(md)
        stamp = after.last_changed_at.isoformat() if after.last_changed_at else self.now_iso
        if h != page.content_hash:  # the site moved on since the last pass: index it as it is now
            r.pages_changed += 1
            after.content_hash, after.title, after.chunk_count = h, title, len(chunks)
            after.etag, after.last_modified = res.validators.etag, res.validators.last_modified
            after.last_changed_at = self.now
            stamp = self.now_iso
        return TextItem(
            after,
            "fetch",
            chunks,
            stamp,
            markdown=md,
            old_hash=page.content_hash,
            headings=[c.headings for c in pieces],
        )

    def _chunks_of(self, markdown: str, title: str) -> list[Chunk]:
        """The text's chunks with their heading paths."""
        return self.splitter.chunks(markdown, title)

    def _extract(
        self, body: bytes, ctype: str, url: str, charset: str | None = None
    ) -> tuple[str, str, list[Chunk], str]:
        """The page's markdown, title, chunks and kind, extracted with its site's selector (as a pass does)."""
        select = self.select(url)
        ex = extract_page(body, ctype, url, charset=charset, **({"select": select} if select is not None else {}))
        return ex.markdown, ex.title or "", self._chunks_of(ex.markdown, ex.title or ""), ex.page_kind
