"""Per-host pacing within one fetcher: each host's bound on requests at once, its Crawl-delay
between request starts and its Retry-After back-off; and the wake-up of those waiting for
a request to end (`HostQueue`), so a waiting host holds no worker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..core.robots import RobotsRules
from ..core.scope import url_host

__all__ = ["HostState", "HostPacing"]


@dataclass
class HostState:
    """One host's bounds and rules for one fetcher: the per-host semaphore, the next
    request start its Crawl-delay allows, the loop time its Retry-After backs it off
    until, and its robots.txt rules once read (under `robots_lock`, read once)."""

    sem: asyncio.Semaphore
    pace_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    next_start: float = 0.0
    blocked_until: float = 0.0
    robots: RobotsRules | None = None
    robots_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def blocked(self, now: float) -> float:
        """Seconds of a Retry-After still to wait at loop time `now` (<= 0: none)."""
        return self.blocked_until - now

    def back_off(self, now: float, seconds: float) -> None:
        """A Retry-After of `seconds` at loop time `now`; a longer one already set stands."""
        self.blocked_until = max(self.blocked_until, now + seconds)

    def wait(self, now: float) -> float | None:
        """Seconds before a request could start (Crawl-delay, Retry-After), or None while
        the per-host bound is full."""
        return None if self.sem.locked() else max(0.0, self.blocked(now), self.next_start - now)

    async def pace(self, delay: float) -> None:
        """Keep `delay` seconds between request starts on this host (Crawl-delay)."""
        if delay <= 0:
            return
        loop = asyncio.get_running_loop()
        async with self.pace_lock:
            wait = self.next_start - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self.next_start = loop.time() + delay


class HostPacing:
    """The hosts a fetcher has sent to, each with at most `per_host` requests at once."""

    def __init__(self, per_host: int):
        self.per_host = per_host
        self._hosts: dict[str, HostState] = {}
        # Set, then replaced, whenever a request ends while someone waits for a host
        # (`_waiting` of them): wakes them.
        self._ended = asyncio.Event()
        self._waiting = 0

    def host(self, url: str) -> tuple[str, HostState]:
        """The URL's host key (its netloc, lower-cased, `url_host`) and that host's bounds and rules."""
        key = url_host(url)[0]  # "" for a malformed URL: it fails in the request, under a shared bound
        host = self._hosts.get(key)
        if host is None:
            host = self._hosts[key] = HostState(asyncio.Semaphore(self.per_host))
        return key, host

    async def request_ended(self, timeout: float | None = None) -> None:
        """Return when a request ends (a host may be ready now), or after `timeout` seconds."""
        self._waiting += 1  # before anything suspends: a request ending from here on wakes us
        ended = self._ended
        try:
            async with asyncio.timeout(timeout):
                await ended.wait()
        except TimeoutError:
            pass
        finally:
            self._waiting -= 1

    def end_request(self) -> None:
        """A request ended: wake whoever waits in `request_ended`."""
        if self._waiting:  # with no one waiting, an Event set and replaced is not seen by anyone
            self._ended.set()  # wakes every waiter of this round
            self._ended = asyncio.Event()
