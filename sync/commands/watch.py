"""`pagesync watch`: a long-running loop of passes. Every poll it reads the sitemaps and the
change feeds the last pass found with conditional GETs (a changed body is a deploy seen), runs a pass when a deploy was seen or a
page fell due, and sleeps until then. Between passes it holds neither the state lock nor the
store, so readers are never refused. The decisions are `sync.core.watching`'s; the clock,
the sleep, the pass and the probe are given, so the loop is tested without a site or a clock."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import select
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator, Mapping, Protocol
from urllib.parse import urljoin, urlsplit

import httpx

from ..core.deploys import feed_urls
from ..core.sitemaps import MAX_SITEMAP_BYTES, parse_sitemap
from ..core.watching import Step, WatchState, after_pass, after_probe, decide
from ..errors import SitemapError

__all__ = [
    "PassOutcome",
    "Probe",
    "SitemapProbe",
    "WatchCounters",
    "Watcher",
    "StopSignals",
    "next_due_after",
    "run_watch",
]

log = logging.getLogger("pagesync")
MAX_REDIRECTS = 5
MAX_CHILDREN = 1000  # sitemap files of an index read per poll at most (a pass reads as many)
_ROBOTS_SITEMAP = re.compile(r"^\s*sitemap:\s*(\S+)", re.IGNORECASE | re.MULTILINE)


@dataclass
class PassOutcome:
    """What a pass left for the watcher: the state's next due time (read before the state was
    closed) and the figures `--metrics` writes (the report's and the freshness ones)."""

    next_due: datetime | None
    report: Mapping[str, object] = field(default_factory=dict)
    status: Mapping[str, object] = field(default_factory=dict)
    summary: str = ""


class Probe(Protocol):
    def __call__(self) -> bool:
        """Read the sitemaps; True when one of them changed since the last read (a deploy)."""
        ...


def next_due_after(next_due: datetime | None, still_due: int, now: datetime, poll: timedelta) -> datetime | None:
    """The wake-up time a pass leaves: the state's earliest due time after `now`; pages still
    due after the pass (left by --max-fetches, or pending) are served a poll later, not at once."""
    times = [t for t in (next_due, now + poll if still_due else None) if t is not None]
    return min(times, default=None)


class SitemapProbe:
    """Conditional GETs of the sitemaps: their ETag and Last-Modified are sent back, a 304 or
    the same bytes is no change, other bytes are a deploy. The first read only learns. The
    files a sitemap index (or a robots.txt given as --sitemap) names are read the same way,
    one level down, and so are the change feeds the last pass found (`feeds`, set after each
    pass from its report: the pass discovers them). A file that cannot be read, or a feed
    larger than a sitemap may be, is no change (the pass reports it)."""

    def __init__(
        self,
        urls: list[str],
        client: httpx.Client,
        headers: Callable[[str], dict[str, str]],
        feeds: list[str] | None = None,
    ):
        self.urls = urls
        self.client = client
        self.headers = headers  # the --header fields for a URL of the run's sites
        self.feeds: list[str] = list(feeds or [])  # change feeds to re-read (`sync.core.deploys.feed_urls`)
        self.seen: dict[str, tuple[str | None, str | None, str]] = {}  # url -> (etag, last-modified, sha256)
        self.children: dict[str, list[str]] = {}  # an index's (or robots.txt's) sitemap files, as last read

    def __call__(self) -> bool:
        changed = False
        for url in self.urls:
            changed = self._try(url) or changed
            for child in self.children.get(url, []):
                changed = self._try(child) or changed
        for url in self.feeds:
            if url not in self.urls:
                changed = self._try(url) or changed
        return changed

    def _try(self, url: str) -> bool:
        try:
            return self._read(url)
        except httpx.HTTPError as exc:
            log.warning("watch: %s %s not read: %s", "change feed" if url in self.feeds else "sitemap", url, exc)
            return False

    def _read(self, url: str) -> bool:
        old = self.seen.get(url)
        cond = {}
        if old and old[0]:
            cond["If-None-Match"] = old[0]
        if old and old[1]:
            cond["If-Modified-Since"] = old[1]
        origin = urlsplit(url)[:2]
        target = url
        for _ in range(MAX_REDIRECTS + 1):
            # The site's headers go to its own host only, never to where a redirect leads off to.
            extra = self.headers(target) if urlsplit(target)[:2] == origin else {}
            with self.client.stream("GET", target, headers={**extra, **cond}) as resp:
                if resp.is_redirect and "location" in resp.headers:
                    target = urljoin(target, resp.headers["location"])
                    continue
                if resp.status_code == 304:
                    return False
                if resp.status_code != 200:
                    log.warning("watch: sitemap %s answered HTTP %d", url, resp.status_code)
                    return False
                digest, body, size = hashlib.sha256(), bytearray(), 0
                feed = url in self.feeds and url not in self.urls
                for chunk in resp.iter_bytes():
                    digest.update(chunk)
                    size += len(chunk)
                    if feed and size > MAX_SITEMAP_BYTES:  # bounded as the pass reads it: not read
                        log.warning("watch: change feed %s: larger than %d bytes", url, MAX_SITEMAP_BYTES)
                        return False
                    if len(body) <= MAX_SITEMAP_BYTES:  # kept for its list of files; past it only hashed
                        body += chunk
                self.seen[url] = (resp.headers.get("etag"), resp.headers.get("last-modified"), digest.hexdigest())
                if url in self.urls and len(body) <= MAX_SITEMAP_BYTES:
                    self.children[url] = _files_named(target, bytes(body))
                return old is not None and old[2] != digest.hexdigest()
        log.warning("watch: sitemap %s: more than %d redirects", url, MAX_REDIRECTS)
        return False


def _files_named(url: str, body: bytes) -> list[str]:
    """The sitemap files a sitemap index or a robots.txt names (none for a plain sitemap)."""
    if urlsplit(url).path.endswith("/robots.txt"):
        text = body.decode("utf-8", "replace")
        return _ROBOTS_SITEMAP.findall(text)[:MAX_CHILDREN]
    try:
        return parse_sitemap(body).sitemaps[:MAX_CHILDREN]
    except SitemapError:
        return []


@dataclass
class WatchCounters:
    """The watcher's own figures, for `--metrics` beside the last pass's."""

    passes: int = 0
    failures: int = 0
    deploys: int = 0
    polls: int = 0
    consecutive_failures: int = 0
    last_success: datetime | None = None

    def metrics(self) -> dict[str, tuple[str, float]]:
        """name (after `pagesync_`) -> (help, value); `_total` names are counters."""
        out = {
            "watch_passes_total": ("passes the watcher ran (done or failed)", float(self.passes)),
            "watch_pass_failures_total": ("passes that failed and are retried with backoff", float(self.failures)),
            "watch_deploys_seen_total": ("sitemap changes seen by the poll (deploys)", float(self.deploys)),
            "watch_polls_total": ("sitemap reads by the poll", float(self.polls)),
            "watch_consecutive_failures": (
                "failed passes in a row (0 after a pass that ran)",
                float(self.consecutive_failures),
            ),
        }
        if self.last_success is not None:
            out["watch_last_success_timestamp_seconds"] = (
                "when the last pass that ran ended (Unix time)",
                self.last_success.timestamp(),
            )
        return out


class Watcher:
    """The loop. `run_pass(now)` runs one pass and returns its `PassOutcome` (raising when the
    pass failed); `probe()` reads the sitemaps; `write_metrics(outcome, counters)` rewrites
    --metrics (the last outcome that ran, or None). `clock` and `sleep` are the real ones in
    the CLI and fakes in tests; `stopped()` is checked before every step."""

    def __init__(
        self,
        *,
        poll: timedelta,
        run_pass: Callable[[datetime], PassOutcome],
        probe: Probe,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None],
        stopped: Callable[[], bool],
        write_metrics: Callable[[PassOutcome | None, WatchCounters], None] | None = None,
        max_passes: int | None = None,
    ):
        self.poll = poll
        self.run_pass = run_pass
        self.probe = probe
        self.clock = clock
        self.sleep = sleep
        self.stopped = stopped
        self.write_metrics = write_metrics
        self.max_passes = max_passes  # tests: end after this many passes
        self.state = WatchState()
        self.counters = WatchCounters()
        self.last: PassOutcome | None = None

    def step(self) -> Step:
        """Decide at the clock's now and do it (one probe, one pass or one sleep)."""
        now = self.clock()
        step = decide(now, self.state, self.poll)
        if step.probe:
            seen = bool(self.probe())
            self.counters.polls += 1
            if seen:
                self.counters.deploys += 1
                log.info("watch: a sitemap or change feed changed: a deploy, a pass is due")
            self.state = after_probe(self.state, now, seen)
        elif step.run:
            self._pass(now, step.reason)
        else:
            self.sleep(step.sleep.total_seconds())
        return step

    def _pass(self, now: datetime, reason: str) -> None:
        log.info("watch: pass started (%s)", reason)
        self.counters.passes += 1
        try:
            outcome = self.run_pass(now)
        except Exception as exc:  # noqa: BLE001 (any failure of a pass is retried; the watcher goes on)
            self.counters.failures += 1
            self.counters.consecutive_failures += 1
            self.state = after_pass(self.state, self.clock(), False, None, self.poll)
            wait = (self.state.retry_at - self.clock()).total_seconds() if self.state.retry_at else 0.0
            said = f"watch: pass failed: {str(exc) or type(exc).__name__} (retry in {wait:.0f} s)"
        else:
            self.last = outcome
            self.counters.consecutive_failures = 0
            ended = self.clock()
            self.counters.last_success = ended
            self.state = after_pass(self.state, ended, True, outcome.next_due, self.poll)
            due = outcome.next_due.isoformat() if outcome.next_due else "none"
            said = f"watch: pass done: {outcome.summary or 'ok'}; next due: {due}"
        # The figures first, then the line: whoever reads the line finds the file up to date.
        if self.write_metrics is not None:
            try:
                self.write_metrics(self.last, self.counters)
            except OSError as exc:
                log.error("watch: --metrics not written: %s", exc)
        (log.error if said.startswith("watch: pass failed") else log.info)("%s", said)

    def run(self) -> int:
        """Steps until stopped (or, in tests, `max_passes` passes). Exit code 0."""
        while not self.stopped():
            if self.max_passes is not None and self.counters.passes >= self.max_passes:
                break
            self.step()
        return 0


class StopSignals:
    """SIGTERM and SIGINT end the watcher. Between passes they set the flag and wake the
    sleep. During a pass (`passing`) SIGINT is Python's own again, so `asyncio.run` stops the
    pass the way Ctrl-C stops `run` (its task cancelled at an await point, a store write in
    flight confirmed first), and SIGTERM is turned into that SIGINT. The handlers take no lock
    (a handler runs on the main thread, which may hold the lock it would wait for): they set
    a flag and write a byte to a pipe the sleep waits on. As a context manager: installed on
    entry; on exit the handlers found on entry are put back, then the pipe is closed."""

    def __init__(self) -> None:
        self.stop = False
        self.reading = False  # a sitemap read in flight: a signal ends it at once
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    def __enter__(self) -> StopSignals:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in zip((signal.SIGINT, signal.SIGTERM), self._before):
            if handler is not None:  # None: a handler not set from Python, left as it is
                signal.signal(signum, handler)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._between)
        signal.signal(signal.SIGTERM, self._between)

    def _wake(self) -> None:
        self.stop = True
        try:
            os.write(self._wake_w, b"\0")
        except BlockingIOError:  # the pipe is full: the sleep is woken already
            pass

    def _between(self, signum: int, frame: object) -> None:  # noqa: ARG002 (signal handler signature)
        self._wake()
        if self.reading:
            raise KeyboardInterrupt

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """A read (the sitemap probe) a signal ends at once: it writes nothing."""
        self.reading = True
        try:
            if self.stop:
                raise KeyboardInterrupt
            yield
        finally:
            self.reading = False

    def _in_pass(self, signum: int, frame: object) -> None:  # noqa: ARG002 (signal handler signature)
        self._wake()
        signal.raise_signal(signal.SIGINT)

    @contextmanager
    def passing(self) -> Iterator[None]:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, self._in_pass)
        try:
            # A signal that came between the decision and the swap above: no pass starts.
            if self.stop:
                raise KeyboardInterrupt
            yield
        finally:
            self.install()

    def stopped(self) -> bool:
        return self.stop

    def sleep(self, seconds: float) -> None:
        """Up to `seconds`, less when a signal comes (its handler writes to the pipe)."""
        end = time.monotonic() + seconds
        while not self.stop and (left := end - time.monotonic()) > 0:
            if select.select([self._wake_r], [], [], left)[0]:
                try:  # a byte without the flag is an old signal's: drained, then slept on
                    os.read(self._wake_r, 4096)
                except BlockingIOError:
                    pass


def run_watch(
    *,
    poll: timedelta,
    run_pass: Callable[[datetime], PassOutcome],
    sitemaps: list[str],
    headers: Callable[[str], dict[str, str]],
    user_agent: str,
    timeout: float,
    write_metrics: Callable[[PassOutcome | None, WatchCounters], None] | None,
) -> int:
    """The watcher on the real clock and signals, until SIGTERM or SIGINT: exit 0. A signal
    during a pass stops it at a safe point (as Ctrl-C stops `run`); the next pass resumes."""
    with StopSignals() as signals:

        def one_pass(now: datetime) -> PassOutcome:
            with signals.passing():
                outcome = run_pass(now)
            probe.feeds = feed_urls(outcome.report.get("host_schedule"))  # the feeds this pass found
            return outcome

        def read_sitemaps() -> bool:
            with signals.interruptible():
                return probe()

        with httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
            follow_redirects=False,
            headers={"User-Agent": user_agent},
        ) as client:
            probe = SitemapProbe(sitemaps, client, headers)
            watcher = Watcher(
                poll=poll,
                run_pass=one_pass,
                probe=read_sitemaps,
                clock=lambda: datetime.now(timezone.utc),
                sleep=signals.sleep,
                stopped=signals.stopped,
                write_metrics=write_metrics,
            )
            log.info("watch: polling %s every %s", ", ".join(sitemaps) or "no sitemap (due pages only)", _seconds(poll))
            try:
                watcher.run()
            except KeyboardInterrupt:  # a signal during a pass or a sitemap read
                log.info("watch: stopped; what the last pass wrote is consistent, the next pass resumes")
                return 0
        log.info("watch: stopped")
        return 0


def _seconds(d: timedelta) -> str:
    return f"{d.total_seconds():g} s"
