"""Test helpers shared by the test modules: page and site builders, a harness that runs passes
like the CLI does (and what tests do with one: reindex it, damage its collection), page states,
clocks, and a probe of what an import loads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from chunking import Splitter
from demo.site_server import Site, SiteServer, render_page
from embedders import HashEmbedder
from sync.core.ids import chunk_id, point_id
from sync.engine import PassConfig, arun_pass
from sync.edges.fetcher import Fetcher, make_client
from sync.edges.state import LIVE, PageState, StateDB
from sync.edges.client_store import ClientStore
from sync.edges.edge_store import EdgeStore
from sync.edges.store import StoredPoint

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

# The run report's keys every pass report carries (the report page of the docs lists them).
REPORT_KEYS = {
    "started_at",
    "finished_at",
    "pages_in_sitemaps",
    "pages_fetched",
    "pages_not_modified",
    "pages_unchanged",
    "pages_changed",
    "pages_added",
    "pages_removed",
    "pages_failed",
    "chunks_embedded",
    "chunks_deleted",
    "chunks_written",
    "bytes_downloaded",
    "tokens_embedded",
    "errors",
}
T0_NOON = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)  # the page-state tests' clock (`full_page`)
EMB16, EMB32 = HashEmbedder(16), HashEmbedder(32)  # fake models of two sizes (a reindex onto another model)


def page_html(title: str, paragraphs: list[str], nav: list[str] | None = None, footer: str = "© Acme") -> str:
    """A docs page titled `title`, a "Section i" heading over each paragraph, in `render_page`'s boilerplate."""
    body = "".join(f"<h2>Section {i}</h2><p>{p}</p>" for i, p in enumerate(paragraphs))
    return render_page(title, body, nav=nav, footer=footer)


def para(seed: str, words: int = 60) -> str:
    """Deterministic prose-like text, distinct per seed."""
    import hashlib

    vocab = (
        "alpha beta gamma delta install configure deploy server client request response cache token "
        "index vector page sitemap chunk embed store query filter update delete schedule retry error"
    ).split()
    h = hashlib.sha256(seed.encode()).digest()
    out = []
    for i in range(words):
        out.append(vocab[(h[i % 32] + i * 7) % len(vocab)])
        if i % 11 == 10:
            out[-1] += "."
    return seed.replace("/", " ") + " " + " ".join(out) + "."


def build_pages(site, n: int = 4, sections: int = 3, words: int = 60) -> list[str]:
    """`n` pages /p0.html, /p1.html... on the site, each of `sections` sections of `para` prose
    seeded "p{i}-s{j}" (`words` words each); their URLs."""
    for i in range(n):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}", words) for j in range(sections)]))
    return [site.server.url(f"/p{i}.html") for i in range(n)]


def build_long_pages(site, n: int = 4, sections: int = 4) -> list[str]:
    """`build_pages` with four sections of 80 words each: more chunks a page (the reindex tests' site)."""
    return build_pages(site, n, sections, words=80)


@contextlib.contextmanager
def second_site():
    """Another docs site on 127.0.0.1 (its own port): two pages, b0 and b1."""
    other = Site()
    with SiteServer(other) as server:
        other.server = server  # type: ignore[attr-defined]
        for i in range(2):
            other.set(f"/b{i}.html", page_html(f"B {i}", [para(f"b{i}")]))
        yield other, server


# A small Sphinx-like docs site with no sitemap, for the link crawl.
DOCS = ["index", "quickstart", "options", "commands", "api", "changes", "advanced/testing", "advanced/utils"]


def sphinx_page(name: str, pages: list[str], body: str | None = None, head: str = "") -> str:
    """A page the way Sphinx's basic theme writes one: relative links in a toctree sidebar,
    headerlinks, genindex/search in the related bar, fragments on the same page."""
    depth = name.count("/")
    up = "../" * depth
    toc = "".join(
        f'<li class="toctree-l1"><a class="reference internal" href="{up}{p}.html">{p}</a></li>' for p in pages
    )
    text = body or f"<p>{para(name)}</p><p>{para(name + ' more')}</p>"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{name} - Demo docs</title>{head}</head><body>"
        f'<div class="related"><a href="{up}genindex.html">index</a> <a href="{up}search.html">search</a></div>'
        f'<div class="body" role="main"><section id="s"><h1>{name}<a class="headerlink" href="#s">¶</a></h1>'
        f'{text}<p><a href="#s">this section</a></p></section></div>'
        f'<div class="sphinxsidebar"><ul>{toc}</ul></div></body></html>'
    )


def build_docs(site, pages=DOCS, linked=None):
    """The Sphinx-like docs site: `pages` (each linking to `linked`, all of them unless told),
    plus Sphinx's genindex and search pages."""
    linked = pages if linked is None else linked
    for p in pages:
        site.set(f"/{p}.html", sphinx_page(p, linked))
    site.set("/genindex.html", sphinx_page("genindex", linked, body="<p>Index</p>"))
    site.set("/search.html", sphinx_page("search", linked, body="<p>Please activate JavaScript.</p>"))


def by_url(points: dict[str, dict]) -> dict[str, list[dict]]:
    """Points ({id: payload}) grouped by page URL, each page's in chunk order."""
    out: dict[str, list[dict]] = {}
    for p in points.values():
        out.setdefault(p["url"], []).append(p)
    return {u: sorted(ps, key=lambda p: p["chunk_index"]) for u, ps in out.items()}


def without_fetched_at(payload: dict) -> dict:
    """A payload minus `fetched_at`, at the top and in its `metadata` object (when a page was
    last written differs by design between two indexes of the same site)."""
    out = {k: v for k, v in payload.items() if k != "fetched_at"}
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = without_fetched_at(out["metadata"])
    return out


class Harness:
    """Runs passes against one site, one store and one state, like the CLI does.

    By default the embedded store and the SQLite state; `state="qdrant"` runs them on
    qdrant-client's local mode (a directory, reopened by every pass like a server
    connection) with the page state in the companion collection (`QdrantState`).
    """

    def __init__(
        self,
        site: Site,
        tmp: Path,
        embedder=None,
        splitter=None,
        collection: str = "pages",
        state: str = "sqlite",
        stamp_site: bool = True,
    ):
        self.site = site
        self.tmp = tmp
        self.embedder = embedder or HashEmbedder(16)
        self.splitter = splitter or Splitter(chunk_size=400, chunk_overlap=0)
        self.collection = collection
        self.store_path = tmp / "qdrant"
        self.state_path = tmp / "state.db"
        self.now = T0
        self.state_kind = state
        # The site's edits are stamped at the pass clock (the time of the last pass, or T0):
        # lastmods then depend on the simulated days only, never on how fast the test ran.
        # The site's first harness sets it (a second one, a fresh index to compare with,
        # keeps the first's clock); `stamp_site=False` leaves the site's clock alone.
        if stamp_site and site.clock is time.time:
            site.clock = lambda: self.now.timestamp()

    def open_store(self):
        if self.state_kind == "qdrant":
            from qdrant_client import QdrantClient

            return ClientStore(QdrantClient(path=str(self.tmp / "qdrant-local")), self.collection)
        return EdgeStore(self.store_path, self.collection)

    def open_state(self, store, state_path: Path | None = None):
        if self.state_kind == "qdrant":
            from sync.edges.qdrant_state import QdrantState

            return QdrantState.for_store(store, settle_seconds=0.0, heartbeat_seconds=0)
        return StateDB(state_path or self.state_path)

    def sitemap(self) -> str:
        return self.site.server.url("/sitemap.xml")  # type: ignore[attr-defined]

    def run(
        self,
        *,
        full: bool = False,
        dry_run: bool = False,
        advance: timedelta = timedelta(0),
        store=None,
        state_path: Path | None = None,
        embedder=None,
        sitemaps=None,
        urls=(),
        fetcher_kw=None,
        checkpoint=None,
        **cfg,
    ):
        self.now += advance
        store = store or self.open_store()
        pc = PassConfig(
            sitemaps=[self.sitemap()] if sitemaps is None else sitemaps,
            urls=list(urls),
            now=self.now,
            full=full,
            dry_run=dry_run,
            **cfg,
        )

        async def go():
            async with make_client(timeout=5) as client:
                return await arun_pass(
                    pc,
                    fetcher=Fetcher(client, **(fetcher_kw or {})),
                    store=store,
                    state=st,
                    embedder=embedder or self.embedder,
                    splitter=self.splitter,
                    checkpoint=checkpoint,
                )

        with self.open_state(store, state_path) as st:
            try:
                return asyncio.run(go())
            finally:
                store.close()

    def points(self, store=None) -> dict[str, dict]:
        store = store or self.open_store()
        try:
            return {p.id: p.payload for p in store.scroll()}
        finally:
            store.close()

    def points_and_vectors(self, store=None) -> tuple[dict[str, dict], dict[str, list[float]]]:
        """`points()` and `vectors()` from one opening of the store."""
        store = store or self.open_store()
        try:
            got = list(store.scroll(with_vectors=True))
            return {p.id: p.payload for p in got}, {p.id: p.vector for p in got}
        finally:
            store.close()

    def vectors(self, store=None) -> dict[str, list[float]]:
        store = store or self.open_store()
        try:
            return {p.id: p.vector for p in store.scroll(with_vectors=True)}
        finally:
            store.close()


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop on a simulated clock, for code whose waits are all timers
    (`asyncio.sleep`, `asyncio.timeout`, `call_at`) against in-process answers
    (httpx.MockTransport): when nothing is ready the clock jumps to the next timer instead
    of waiting for it. Elapsed `loop.time()` is then exactly what the code asked for, on a
    loaded machine too, and takes no wall time. I/O and callbacks from other threads are
    still waited for (only when no timer is due). Starts at `time.monotonic()`, like a
    real loop, so two loops in a row do not share a clock reading."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = time.monotonic()
        self._selector = _JumpingSelector(self._selector, self)

    def time(self) -> float:
        return self._virtual_now


class _JumpingSelector:
    """The loop's selector: ready I/O first; else, with a timer due in `timeout` seconds,
    the loop's clock moves on by that much and nothing is ready."""

    def __init__(self, real, loop: VirtualClockLoop) -> None:
        self._real, self._loop = real, loop

    def select(self, timeout=None):
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer at all: only I/O can wake the loop
            return self._real.select(None)
        self._loop._virtual_now += timeout
        return []

    def __getattr__(self, name):
        return getattr(self._real, name)


def run_virtual(coro):
    """`asyncio.run(coro)` on a `VirtualClockLoop`."""
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        return runner.run(coro)


def group_alive(pgid: int) -> bool:
    """Whether any process of the process group `pgid` is still there (a killed pass's children)."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def lose_collection(h: "Harness") -> None:
    """The collection is gone, the page state kept (a deleted --qdrant-path, a new server)."""
    if h.state_kind == "qdrant":  # drop the pages collection, keep the companion state collection
        store = h.open_store()
        try:
            store.client.delete_collection(h.collection)
        finally:
            store.close()
    else:
        shutil.rmtree(h.store_path)


def reindex(h: "Harness", embedder, catalog=None, collection: str = "pages", splitter=None, **cfg):
    """`run_reindex` of a harness's collection (on its embedded store unless `catalog`) with
    `embedder`; `cfg` are ReindexConfig's fields."""
    from sync.commands.reindex import ReindexConfig, run_reindex
    from sync.edges.catalog import EdgeCatalog

    with StateDB(h.state_path) as st:
        return run_reindex(
            catalog or EdgeCatalog(h.store_path),
            collection,
            state=st,
            embedder=embedder,
            splitter=splitter or h.splitter,
            cfg=ReindexConfig(**cfg),
        )


def damage(store: EdgeStore, site, vec_dim: int = 16) -> dict[str, str]:
    """Stray points, an old generation's tail left behind, a deleted chunk, a foreign point."""
    v = [1.0] + [0.0] * (vec_dim - 1)
    stray_url = site.server.url("/never-existed.html")
    old_url = site.server.url("/p0.html")
    gap_url = site.server.url("/p1.html")
    points = [
        StoredPoint(
            point_id(chunk_id(stray_url, i)),
            {
                "url": stray_url,
                "chunk_id": chunk_id(stray_url, i),
                "chunk_index": i,
                "content_hash": "x" * 64,
                "text": "stray",
            },
            v,
        )
        for i in range(2)
    ]
    points.append(
        StoredPoint(
            point_id(chunk_id(old_url, 40)),
            {
                "url": old_url,
                "chunk_id": chunk_id(old_url, 40),
                "chunk_index": 40,
                "content_hash": "0" * 64,
                "text": "old",
            },
            v,
        )
    )
    points.append(StoredPoint("00000000-0000-4000-8000-000000000001", {"note": "written by another tool"}, v))
    store.upsert(points)
    store.delete_points([point_id(chunk_id(gap_url, 1))])
    return {"stray": stray_url, "old": old_url, "gap": gap_url}


def full_page(url="https://e.com/a") -> PageState:
    """A page state with every field set to a value unlike its default (round trips check them all)."""
    return PageState(
        url=url,
        status=LIVE,
        source="url",
        in_sitemap=True,
        sitemap_lastmod="2025-12-31T00:00:00+00:00",
        etag='W/"abc-1"',
        last_modified="Wed, 31 Dec 2025 10:00:00 GMT",
        content_hash="c" * 64,
        fingerprint="f" * 16,
        pending_hash="d" * 64,
        chunk_count=7,
        title="Install \u2014 caf\u00e9 docs",
        interval=timedelta(days=2, hours=3, minutes=4, seconds=5, microseconds=678_000),
        due_at=T0_NOON + timedelta(days=2),
        first_seen_at=T0_NOON - timedelta(days=100, microseconds=123_456),
        last_fetched_at=T0_NOON,
        last_changed_at=T0_NOON - timedelta(days=1),
        failures=3,
        last_error="HTTP 503",
        history="[[3600.0,1],[7200.0,0]]",
        lastmod_pending=True,
        moved_to="https://e.com/a-new",
        unlinked_since=T0_NOON - timedelta(hours=5),
        unlinked_by="https://e.com/hub.html",
        unlinked_misses=2,
        text_chars=4321,
        page_kind="reference",
    )


# What importing pagesync must not load (tests/project/test_imports.py, test_layout.py).
HEAVY = (
    "sync.engine",
    "sync.edges.fetcher",
    "sync.edges.edge_store",
    "sync.edges.client_store",
    "sync.commands.audit",
    "sync.edges.qdrant_state",
    "httpx",
    "lxml",
    "qdrant_client",
    "qdrant_edge",
    "torch",
    "sentence_transformers",
    "onnxruntime",
    "trafilatura",
    "langchain_text_splitters",
    "rich",
    "pygments",
)


def loaded_after(code: str) -> dict[str, bool]:
    """Which of the HEAVY modules a fresh interpreter has loaded after running `code`."""
    probe = f"import sys, json\n{code}\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def store_clock(on_sleep):
    """A stand-in for the `time` module of `sync.edges.shard_lock` alone (monkeypatch it in as
    `store_mod.time`): the real clocks, and `on_sleep(seconds)` instead of a wait for a held
    shard's lock. Raise from `on_sleep` to prove an opener decided without waiting."""
    import types

    return types.SimpleNamespace(monotonic=time.monotonic, time=time.time, sleep=on_sleep)
