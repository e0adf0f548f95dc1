"""Test helpers: page builders and a harness that runs passes like the CLI does."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from chunking import Splitter
from demo.site_server import Site, SiteServer, render_page
from embedders import HashEmbedder
from sync.engine import PassConfig, arun_pass
from sync.edges.fetcher import Fetcher, make_client
from sync.edges.state import StateDB
from sync.edges.client_store import ClientStore
from sync.edges.edge_store import EdgeStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def page_html(title: str, paragraphs: list[str], nav: list[str] | None = None, footer: str = "© Acme") -> str:
    body = "".join(f"<h2>Section {i}</h2><p>{p}</p>" for i, p in enumerate(paragraphs))
    return render_page(title, body, nav=nav, footer=footer)


def para(seed: str, words: int = 60) -> str:
    """Deterministic prose-like text, distinct per seed."""
    import hashlib

    vocab = ("alpha beta gamma delta install configure deploy server client request response cache token "
             "index vector page sitemap chunk embed store query filter update delete schedule retry error").split()
    h = hashlib.sha256(seed.encode()).digest()
    out = []
    for i in range(words):
        out.append(vocab[(h[i % 32] + i * 7) % len(vocab)])
        if i % 11 == 10:
            out[-1] += "."
    return seed.replace("/", " ") + " " + " ".join(out) + "."


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

    def __init__(self, site: Site, tmp: Path, embedder=None, splitter=None, collection: str = "pages",
                 state: str = "sqlite", stamp_site: bool = True):
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

    def run(self, *, full: bool = False, dry_run: bool = False, advance: timedelta = timedelta(0), store=None,
            state_path: Path | None = None, embedder=None, sitemaps=None, urls=(), fetcher_kw=None, **cfg):
        self.now += advance
        store = store or self.open_store()
        pc = PassConfig(sitemaps=[self.sitemap()] if sitemaps is None else sitemaps, urls=list(urls), now=self.now,
                        full=full, dry_run=dry_run, **cfg)

        async def go():
            async with make_client(timeout=5) as client:
                return await arun_pass(pc, fetcher=Fetcher(client, **(fetcher_kw or {})), store=store, state=st,
                                       embedder=embedder or self.embedder, splitter=self.splitter)

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


def store_clock(on_sleep):
    """A stand-in for the `time` module of `sync.edges.shard_lock` alone (monkeypatch it in as
    `store_mod.time`): the real clocks, and `on_sleep(seconds)` instead of a wait for a held
    shard's lock. Raise from `on_sleep` to prove an opener decided without waiting."""
    import types

    return types.SimpleNamespace(monotonic=time.monotonic, time=time.time, sleep=on_sleep)

