"""The watcher's loop on a fake clock (passes, probes and sleeps given), the sitemap probe on
`httpx.MockTransport`, and the watcher's figures in the --metrics file."""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from sync.commands.watch import PassOutcome, SitemapProbe, WatchCounters, Watcher, next_due_after
from sync.core.watching import BACKOFF_BASE
from sync.edges.metrics import write_metrics
from sync.errors import StoreUnavailableError

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
POLL = timedelta(seconds=60)


class Clock:
    """The loop's clock: moves only when the loop sleeps or a pass takes time."""

    def __init__(self) -> None:
        self.now = T0
        self.sleeps: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds)


def watcher(clock: Clock, passes, probes, max_passes: int, **kw) -> Watcher:
    """A Watcher whose pass outcomes (or exceptions) and probe answers come from lists."""
    log: list[tuple[str, datetime]] = []

    def run_pass(now: datetime) -> PassOutcome:
        log.append(("pass", now))
        result = passes.pop(0)
        if isinstance(result, Exception):
            raise result
        return result

    def probe() -> bool:
        log.append(("probe", clock.now))
        return probes.pop(0) if probes else False

    w = Watcher(
        poll=POLL,
        run_pass=run_pass,
        probe=probe,
        clock=clock,
        sleep=clock.sleep,
        stopped=lambda: False,
        max_passes=max_passes,
        **kw,
    )
    w.log = log  # type: ignore[attr-defined]
    return w


def test_a_pass_at_start_then_one_per_deploy_and_none_in_between():
    clock = Clock()
    quiet = PassOutcome(next_due=None)
    w = watcher(clock, [quiet, quiet], [False, False, False, True], max_passes=2)
    assert w.run() == 0
    assert [(what, (t - T0).total_seconds()) for what, t in w.log] == [
        ("probe", 0),
        ("pass", 0),
        ("probe", 60),
        ("probe", 120),
        ("probe", 180),
        ("pass", 180),
    ]
    assert w.counters.passes == 2 and w.counters.deploys == 1 and w.counters.polls == 4
    assert max(clock.sleeps) <= POLL.total_seconds()


def test_a_page_falling_due_wakes_the_watcher_before_the_poll():
    clock = Clock()
    w = watcher(clock, [PassOutcome(next_due=T0 + timedelta(seconds=25)), PassOutcome(next_due=None)], [], max_passes=2)
    w.run()
    assert [(what, (t - T0).total_seconds()) for what, t in w.log] == [("probe", 0), ("pass", 0), ("pass", 25)]
    assert clock.sleeps == [25.0]


def test_a_failing_pass_is_retried_with_a_growing_backoff_and_the_watcher_goes_on():
    clock = Clock()
    down = StoreUnavailableError("Qdrant at http://q:6333 does not answer")
    written: list[WatchCounters] = []
    w = watcher(
        clock,
        [down, down, PassOutcome(next_due=None)],
        [],
        max_passes=3,
        write_metrics=lambda last, c: written.append(WatchCounters(**vars(c))),
    )
    w.run()
    times = [(t - T0).total_seconds() for what, t in w.log if what == "pass"]
    base = BACKOFF_BASE.total_seconds()
    assert times == [0, base, base + 2 * base]
    assert [(c.passes, c.failures, c.consecutive_failures) for c in written] == [(1, 1, 1), (2, 2, 2), (3, 2, 0)]
    assert written[-1].last_success == T0 + timedelta(seconds=3 * base)


def test_a_pass_leaving_pages_due_does_not_loop_at_once():
    assert next_due_after(None, 3, T0, POLL) == T0 + POLL
    assert next_due_after(T0 + timedelta(seconds=5), 3, T0, POLL) == T0 + timedelta(seconds=5)
    assert next_due_after(T0 + timedelta(hours=5), 0, T0, POLL) == T0 + timedelta(hours=5)
    assert next_due_after(None, 0, T0, POLL) is None


def test_stopped_ends_the_loop_before_the_next_step():
    clock = Clock()
    w = Watcher(
        poll=POLL,
        run_pass=lambda now: PassOutcome(next_due=None),
        probe=lambda: False,
        clock=clock,
        sleep=clock.sleep,
        stopped=lambda: True,
    )
    assert w.run() == 0 and w.counters.passes == 0


# -- the sitemap probe ---------------------------------------------------------------------
SITEMAP = "https://docs.example.com/sitemap.xml"


def site(bodies: list[bytes], seen: list[httpx.Request]):
    """A sitemap served as a static file: an ETag per body, 304 to a matching If-None-Match."""

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/old-sitemap.xml":
            return httpx.Response(301, headers={"location": SITEMAP})
        body = bodies[0]
        etag = f'"{hash(body) & 0xFFFF:x}"'
        if request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers={"etag": etag})
        return httpx.Response(200, content=body, headers={"etag": etag})

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_the_probe_learns_first_then_sees_a_changed_body_as_a_deploy():
    bodies, seen = [b"<urlset>a</urlset>"], []
    probe = SitemapProbe([SITEMAP], site(bodies, seen), headers=lambda u: {"Authorization": "Bearer t"})
    assert probe() is False  # the first read only learns
    assert probe() is False  # 304
    assert seen[-1].headers["if-none-match"] and seen[-1].headers["authorization"] == "Bearer t"
    bodies[0] = b"<urlset>b</urlset>"
    assert probe() is True
    assert probe() is False


def test_the_probe_follows_a_redirect_and_a_sitemap_it_cannot_read_is_no_change():
    bodies, seen = [b"<urlset/>"], []
    probe = SitemapProbe(["https://docs.example.com/old-sitemap.xml"], site(bodies, seen), headers=lambda u: {})
    assert probe() is False and seen[-1].url == SITEMAP

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    assert SitemapProbe([SITEMAP], httpx.Client(transport=httpx.MockTransport(refuse)), lambda u: {})() is False


def test_headers_do_not_follow_a_redirect_to_another_host():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.host == "docs.example.com":
            return httpx.Response(302, headers={"location": "https://cdn.example.net/sitemap.xml"})
        return httpx.Response(200, content=b"<urlset/>")

    probe = SitemapProbe(
        [SITEMAP], httpx.Client(transport=httpx.MockTransport(handler)), headers=lambda u: {"Authorization": "Bearer t"}
    )
    probe()
    assert "authorization" in seen[0].headers and "authorization" not in seen[1].headers


# -- the watcher's figures -------------------------------------------------------------------
def test_the_watchers_figures_are_written_beside_the_pass_ones(tmp_path):
    counters = WatchCounters(passes=3, failures=1, deploys=2, polls=9, last_success=T0)
    path = tmp_path / "pagesync.prom"
    write_metrics(path, {"pages_fetched": 4}, {"pages_tracked": 10}, "docs", counters.metrics())
    text = path.read_text()
    for line in (
        'pagesync_watch_passes_total{collection="docs"} 3.0',
        'pagesync_watch_pass_failures_total{collection="docs"} 1.0',
        'pagesync_watch_deploys_seen_total{collection="docs"} 2.0',
        'pagesync_watch_polls_total{collection="docs"} 9.0',
        'pagesync_watch_consecutive_failures{collection="docs"} 0.0',
        'pagesync_pages_fetched{collection="docs"} 4.0',
    ):
        assert line in text
    assert "# TYPE pagesync_watch_passes_total counter" in text and "_created" not in text
    assert 'pagesync_watch_last_success_timestamp_seconds{collection="docs"} 1.7672256e+09' in text
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed")
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_files_of_a_sitemap_index_and_of_a_robots_txt_are_read_too():
    files = {
        "/sitemap.xml": b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap>'
        b"<loc>https://docs.example.com/part-1.xml</loc></sitemap></sitemapindex>",
        "/robots.txt": b"User-agent: *\nSitemap: https://docs.example.com/part-1.xml\n",
        "/part-1.xml": b"<urlset>a</urlset>",
    }
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, content=files[request.url.path])

    for given in ("https://docs.example.com/sitemap.xml", "https://docs.example.com/robots.txt"):
        probe = SitemapProbe([given], httpx.Client(transport=httpx.MockTransport(handler)), lambda u: {})
        assert probe() is False
        assert probe() is False and seen[-1] == "/part-1.xml"
        files["/part-1.xml"] += b" "  # only the named file changed (its index did not)
        assert probe() is True


# -- the change feeds the last pass found ------------------------------------------------------
FEED = "https://docs.example.com/search/search_index.json"


def test_a_change_feed_whose_bytes_changed_is_a_deploy_seen_though_the_sitemap_did_not():
    files = {"/sitemap.xml": b"<urlset>a</urlset>", "/search/search_index.json": b'{"docs": []}'}
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = files[request.url.path]
        etag = f'"{hash(body) & 0xFFFF:x}"'
        if request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers={"etag": etag})
        return httpx.Response(200, content=body, headers={"etag": etag})

    probe = SitemapProbe([SITEMAP], httpx.Client(transport=httpx.MockTransport(handler)), lambda u: {})
    assert probe() is False and [r.url.path for r in seen] == ["/sitemap.xml"]  # no feed known yet
    probe.feeds = [FEED]  # what a pass found
    assert probe() is False  # the feed's first read only learns
    assert probe() is False and seen[-1].url == FEED and seen[-1].headers["if-none-match"]  # conditional: 304
    files["/search/search_index.json"] = b'{"docs": [{"location": "a/", "text": "new"}]}'
    assert probe() is True
    assert probe() is False


def test_a_change_feed_larger_than_a_sitemap_may_be_is_not_read_and_is_no_change(monkeypatch):
    import sync.commands.watch as watch_mod

    monkeypatch.setattr(watch_mod, "MAX_SITEMAP_BYTES", 64)
    bodies = [b"x" * 100]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=bodies[0] if request.url == FEED else b"<urlset/>")

    probe = SitemapProbe([SITEMAP], httpx.Client(transport=httpx.MockTransport(handler)), lambda u: {}, feeds=[FEED])
    assert probe() is False and FEED not in probe.seen
    bodies[0] = b"y" * 100
    assert probe() is False


# A signal handler runs on the main thread between two of its bytecodes, so one that waits
# for a lock the interrupted code holds (a threading.Event's, mid-`wait`) never returns. The
# child process sleeps in short slices while a timer signals it every 2 ms, many thousand
# times over: each handler must return, and the sleep still ends early once stopped.
_SIGNALLED_SLEEPS = """
import signal, sys, time
from sync.commands.watch import StopSignals

with StopSignals() as s:
    signal.signal(signal.SIGALRM, s._between)
    signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
    end = time.monotonic() + 2
    while time.monotonic() < end:
        s.stop = False
        s.sleep(0.00001)
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    s.stop = False
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    t = time.monotonic()
    s.sleep(30)
    print("woken" if s.stopped() and time.monotonic() - t < 5 else "not woken")
"""


def test_the_stop_signal_handler_takes_no_lock_and_wakes_the_sleep():
    import sys

    out = subprocess.run([sys.executable, "-c", _SIGNALLED_SLEEPS], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "woken", out.stderr[-2000:]
