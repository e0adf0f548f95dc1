"""A pass killed mid-way while other commands hit the same embedded store loses nothing.

The reported case: a collection left with 13 of the 144 points a fresh index of the site
has, after a `pagesync run` whose parent was killed (kill -9) mid-pass while `status`,
`audit` and a second `run` ran against the same data directory. The state recorded every
page as written; the shard had lost the points of all but the last page written.

The cause: Qdrant Edge's `EdgeShard.load` maps and loads a shard's segment files
read-write before it tries the write-ahead log's lock, so a load attempt on a shard that
another process has open (which then fails with WouldBlock, and which `EdgeStore` used to
repeat every 50 ms for up to 10 s) raced that process's writes and flushes. `EdgeStore`
now takes `<shard>/pagesync.lock` before Qdrant Edge touches any file of the shard.

Each iteration here: the site is edited, `run` starts under a parent shell, the parent
only (the pass goes on as an orphan) or the whole process group is killed with SIGKILL at
a random moment while `status`, `audit` and a second `run` start at random moments, then a
clean `run --full`; the collection must then equal a fresh full index of the site (point
ids, payloads but `fetched_at`, vectors). bench/kill_stress.py is the long version.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from sync.errors import StoreError
from sync.edges.edge_store import EdgeStore
from sync.edges.store import StoredPoint
from tests.cli_helpers import ROOT
from tests.helpers import group_alive, page_html, para, without_fetched_at

# Each iteration kills at another moment; three cover both kills (parent only, whole group)
# and both search pool sizes. bench/kill_stress.py runs hundreds.
ITERATIONS = 3
PAGES = 14


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    e["HF_HUB_OFFLINE"] = "1"
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return e


def where(work: Path) -> list[str]:
    return ["--qdrant-path", str(work / "q"), "--state", str(work / "s.db")]


def difference(synced: dict, fresh: dict) -> str | None:
    """Why the synced collection is not a fresh full index, or None."""
    if synced.keys() != fresh.keys():
        by_url: dict[str, list[int]] = {}
        for pid in fresh.keys() - synced.keys():
            by_url.setdefault(fresh[pid][0]["url"], []).append(fresh[pid][0]["chunk_index"])
        return (
            f"{len(synced)} points against {len(fresh)}: {len(synced.keys() - fresh.keys())} extra, "
            f"missing {sorted((u, len(c)) for u, c in by_url.items())}"
        )
    for pid, (payload, vector) in synced.items():
        if payload != fresh[pid][0]:
            return f"payload of {payload.get('chunk_id')} differs"
        if max((abs(a - b) for a, b in zip(vector, fresh[pid][1])), default=0.0) > 1e-4:
            return f"vector of {payload.get('chunk_id')} differs"
    return None


def edit(site, rng: random.Random, it: int) -> None:
    for path in rng.sample(site.pages(), k=len(site.pages()) - 2):  # most pages: many writes in the pass
        n = rng.randint(2, 10)  # grows or shrinks the page
        site.set(path, page_html(path, [para(f"{path}-s{j}-v{it if j % 2 else 0}", 80) for j in range(n)]))
    if it % 3 == 2:
        site.set(f"/docs/n{it}.html", page_html(f"New {it}", [para(f"n{it}-s{j}", 80) for j in range(5)]))
    if it % 3 == 1 and len(site.pages()) > PAGES - 2:
        site.remove(rng.choice(site.pages()))


# -- the rule: no Qdrant Edge load attempt on a shard that is open elsewhere -----------------------
class CountingEdge(types.ModuleType):
    """qdrant_edge, with every `EdgeShard.load` call recorded."""

    def __init__(self, real):
        super().__init__("qdrant_edge")
        self.real, self.loads = real, []
        outer = self

        class EdgeShard:
            create = staticmethod(real.EdgeShard.create)

            @staticmethod
            def load(path, config=None):
                outer.loads.append(path)
                return real.EdgeShard.load(path, config)

        self.EdgeShard = EdgeShard

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.fixture
def counting_edge(monkeypatch):
    import qdrant_edge

    proxy = CountingEdge(qdrant_edge)
    monkeypatch.setitem(sys.modules, "qdrant_edge", proxy)
    return proxy


def test_a_shard_open_in_this_process_is_waited_for_without_load_attempts(tmp_path, counting_edge):
    holder = EdgeStore(tmp_path, "c")
    holder.ensure_collection(4)
    holder.upsert([StoredPoint("00000000-0000-0000-0000-000000000001", {"url": "u"}, [1.0, 0, 0, 0])])
    try:
        with pytest.raises(StoreError, match="open in another process"):
            EdgeStore(tmp_path, "c", lock_wait=0.3).count()
        assert counting_edge.loads == [], "a load attempt on a held shard maps its segments read-write"
    finally:
        holder.close()
    assert EdgeStore(tmp_path, "c", lock_wait=1).count() == 1
    assert len(counting_edge.loads) == 1


def test_a_shard_open_in_another_process_is_loaded_once_when_released(tmp_path, counting_edge):
    code = (
        "import sys, time\n"
        "from sync.edges.edge_store import EdgeStore\nfrom sync.edges.store import StoredPoint\n"
        f"s = EdgeStore({str(tmp_path)!r}, 'c')\n"
        "s.ensure_collection(4)\n"
        "s.upsert([StoredPoint('00000000-0000-0000-0000-000000000001', {'url': 'u'}, [1.0, 0, 0, 0])])\n"
        "print('open', flush=True)\n"
        "time.sleep(1.5)\n"
        "s.upsert([StoredPoint('00000000-0000-0000-0000-000000000002', {'url': 'u'}, [0, 1.0, 0, 0])])\n"
        "s.close()\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], env=env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        waiter = EdgeStore(tmp_path, "c", lock_wait=30)
        try:
            assert waiter.count() == 2  # after the holder's close: both points
        finally:
            waiter.close()
    finally:
        holder.wait(timeout=30)
    assert holder.returncode == 0
    assert len(counting_edge.loads) == 1, f"{len(counting_edge.loads)} load attempts while the shard was held"


# -- the reported scenario, repeated ------------------------------------------------------------
def fresh_points(site, tmp: Path) -> dict:
    """A fresh full index of the site as it is now, made in-process exactly as `pagesync run
    --embedder fake` makes it (same splitter, same embedder)."""
    from chunking import Splitter
    from embedders import make_embedder
    from tests.helpers import Harness

    h = Harness(
        site, tmp, embedder=make_embedder("fake"), splitter=Splitter(), stamp_site=False
    )  # CLI passes: wall clock
    h.run()
    return points_at(h.store_path)


def points_at(qdrant_path: Path) -> dict:
    store = EdgeStore(qdrant_path, "pages")
    try:
        return {p.id: (without_fetched_at(p.payload), p.vector or []) for p in store.scroll(with_vectors=True)}
    finally:
        store.close()


def started(cmd: list[str], work: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=work, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
def test_a_killed_pass_with_concurrent_commands_leaves_a_collection_equal_to_a_fresh_index(site, tmp_path):
    rng = random.Random(20261130)
    for i in range(PAGES):
        site.set(f"/docs/p{i}.html", page_html(f"Page {i}", [para(f"/docs/p{i}.html-s{j}-v0", 80) for j in range(8)]))
    sitemap = site.server.url("/sitemap.xml")
    work = tmp_path / "work"
    work.mkdir()
    run = [sys.executable, "-m", "sync", "run", "--sitemap", sitemap, "--embedder", "fake", "-q", *where(work)]
    assert subprocess.run(run, cwd=work, env=env(), capture_output=True, timeout=60).returncode == 0
    log = []
    for it in range(ITERATIONS):
        edit(site, rng, it)
        for p in site.pages():
            site.slow(p, 0.1)
        # One page at a time (--workers 1, --embed-batch 1): the pass holds the shard while
        # it writes for a second or two. Under a shell that is its parent (`; exit` keeps sh
        # from exec-ing it), in a process group of its own.
        cmd = run + ["--full", "--embed-batch", "1", "--workers", "1"]
        main = started(["sh", "-c", shlex.join(cmd) + "; exit $?"], work, start_new_session=True)
        kill_group = it % 3 == 2  # else the parent only: the pass goes on, an orphan
        kill_at = rng.uniform(1.0, 2.2)
        plan = sorted((rng.uniform(0.6, 1.6), what) for what in ("status", "audit", "run", "status", "audit"))
        others = []
        t0 = time.monotonic()
        while plan or kill_at is not None:
            now = time.monotonic() - t0
            if kill_at is not None and now >= kill_at:
                kill_at = None
                with contextlib.suppress(ProcessLookupError):
                    (os.killpg if kill_group else os.kill)(main.pid, signal.SIGKILL)
            if plan and now >= plan[0][0]:
                what = plan.pop(0)[1]
                args = (
                    ["run", "--sitemap", sitemap, "--embedder", "fake", "--wait-lock", "0"] if what == "run" else [what]
                )
                others.append(started([sys.executable, "-m", "sync", *args, *where(work)], work))
            time.sleep(0.01)
        main.wait(timeout=60)
        deadline = time.monotonic() + 60
        while group_alive(main.pid) and time.monotonic() < deadline:  # the orphaned pass, if the shell died alone
            time.sleep(0.05)
        assert not group_alive(main.pid)
        for p in others:
            p.wait(timeout=60)
        log.append(
            f"iteration {it}: kill {'group' if kill_group else 'parent'}, "
            f"concurrent exits {[p.returncode for p in others]}"
        )
        # Another search pool size opens the shard between commands (its config is rewritten).
        other = EdgeStore(work / "q", "pages", search_threads=2 if it % 2 else None)
        try:
            other.count()
        finally:
            other.close()
        for p in site.pages():
            site.slow(p, 0.0)
        rec = subprocess.run(
            run + ["--full", "--allow-mass-delete"], cwd=work, env=env(), capture_output=True, text=True, timeout=60
        )
        assert rec.returncode == 0, rec.stderr
        diff = difference(points_at(work / "q"), fresh_points(site, tmp_path / f"fresh{it}"))
        assert diff is None, f"iteration {it}: {diff}\n" + "\n".join(log)


# -- the same for a link crawl ------------------------------------------------------------------
def _crawl_site(site, linked: list[int], it: int, rng: random.Random) -> None:
    links = "".join(f'<li><a href="/docs/p{i}.html">Page {i}</a></li>' for i in linked)
    site.set(
        "/docs/index.html",
        "<!doctype html><html><head><title>Docs</title></head><body><main><h1>Docs</h1>"
        f"<p>{para('index', 40)}</p><ul>{links}</ul></main></body></html>",
    )
    for i in linked:
        n = rng.randint(2, 8)
        site.set(
            f"/docs/p{i}.html", page_html(f"Page {i}", [para(f"c{i}-s{j}-v{it if j % 2 else 0}", 80) for j in range(n)])
        )


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
def test_a_killed_crawl_pass_settles_on_a_fresh_crawl_within_two_clean_passes(site, tmp_path):
    """A crawl pass killed (kill -9) at a random moment while links are dropped and added:
    two clean passes a revisit interval apart give the points a fresh crawl of the site gives."""
    rng = random.Random(20261203)
    linked = list(range(PAGES))
    _crawl_site(site, linked, 0, rng)
    start = site.server.url("/docs/index.html")
    work = tmp_path / "work"
    work.mkdir()

    def crawl_cmd(now: str, where_: list[str]) -> list[str]:
        return [
            sys.executable,
            "-m",
            "sync",
            "run",
            "--crawl",
            start,
            "--embedder",
            "fake",
            "-q",
            "--now",
            now,
            *where_,
        ]

    assert (
        subprocess.run(
            crawl_cmd("2031-01-01T00:00:00Z", where(work)), cwd=work, env=env(), capture_output=True, timeout=60
        ).returncode
        == 0
    )
    for it in range(ITERATIONS):
        day = 8 * (it + 1)
        gone = rng.sample(linked, k=2)
        linked = [i for i in linked if i not in gone] + [PAGES + it]  # two unlinked (still 200), one new
        _crawl_site(site, linked, it + 1, rng)
        for p in site.pages():
            site.slow(p, 0.1)
        cmd = crawl_cmd(f"2031-01-{day:02d}T00:00:00Z", where(work)) + ["--embed-batch", "1", "--workers", "1"]
        main = started(["sh", "-c", shlex.join(cmd) + "; exit $?"], work, start_new_session=True)
        kill_at = time.monotonic() + rng.uniform(0.5, 1.8)
        while main.poll() is None and time.monotonic() < kill_at:
            time.sleep(0.01)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(main.pid, signal.SIGKILL)
        main.wait(timeout=60)
        deadline = time.monotonic() + 60
        while group_alive(main.pid) and time.monotonic() < deadline:  # the pass, until the kernel reaps it
            time.sleep(0.05)
        assert not group_alive(main.pid)
        for p in site.pages():
            site.slow(p, 0.0)
        for now in (f"2031-01-{day + 1:02d}T00:00:00Z", f"2031-01-{day + 4:02d}T00:00:00Z"):  # 3 days apart
            rec = subprocess.run(
                crawl_cmd(now, where(work)), cwd=work, env=env(), capture_output=True, text=True, timeout=60
            )
            assert rec.returncode == 0, rec.stderr
        fresh = tmp_path / f"fresh{it}"
        fresh.mkdir()
        assert (
            subprocess.run(
                crawl_cmd(f"2031-01-{day + 4:02d}T00:00:00Z", where(fresh)),
                cwd=fresh,
                env=env(),
                capture_output=True,
                timeout=60,
            ).returncode
            == 0
        )
        diff = difference(points_at(work / "q"), points_at(fresh / "q"))
        assert diff is None, f"iteration {it}: {diff}"
