"""HTTP at the edge: conditional GETs of pages and sitemaps, robots.txt.

The `httpx.AsyncClient` is injected (a `MockTransport` in unit tests, a real socket in
integration tests). httpx exceptions never escape: a page visit always returns a
`FetchResult`, a sitemap fetch raises `FetchError`.

An optional `FetchCache` (the engine hands it the page state) carries robots.txt answers
and sitemap copies from one pass to the next; without one every pass asks afresh.
A Fetcher composes its GETs hop by hop (`sync.edges.hops`), its hosts' bounds and pacing
(`sync.edges.host_pacing`) and the deadlines of its page answers (`sync.edges.deadlines`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Callable, Generic, Iterable, Mapping, TypeVar
from urllib.parse import urlsplit

import httpx

from ..core.decision import Outcome
from ..errors import FetchError
from .httpcache import FetchCache, RobotsAnswer, keep_sitemap, refresh_sitemap, robots_cacheable, robots_fresh
from ..core.robots import MAX_ROBOTS_BYTES, RobotsRules, rules_from_response
from ..core.scheduler import MAX_INTERVAL
from ..core.scope import url_host
from ..core.sitemaps import MAX_SITEMAP_BYTES
from .deadlines import Deadlines
from .hops import Answer, Refused, get_following
from .host_pacing import HostPacing, HostState

__all__ = [
    "Validators",
    "FetchResult",
    "Fetcher",
    "HostQueue",
    "conditional_headers",
    "classify_status",
    "DEFAULT_USER_AGENT",
    "DEFAULT_MAX_BYTES",
    "make_client",
    "parse_retry_after",
    "MAX_REDIRECTS",
    "MAX_RETRY_AFTER",
]

DEFAULT_USER_AGENT = "pagesync/0.1 (+https://pypi.org/project/pagesync/)"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
MAX_REDIRECTS = 5
# The longest wait a Retry-After can impose: the revisit interval's ceiling (60 d).
MAX_RETRY_AFTER = MAX_INTERVAL.total_seconds()
_TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/markdown", "text/x-markdown", "text/plain")


@dataclass(frozen=True)
class Validators:
    """What the server gave us last time to ask 'has it changed?' (stored exactly as received)."""

    etag: str | None = None
    last_modified: str | None = None


_NO_VALIDATORS = Validators()


def conditional_headers(v: Validators | None) -> dict[str, str]:
    """If-None-Match from the ETag, If-Modified-Since from Last-Modified.

    Both are sent when both are known: RFC 9110 makes the server ignore
    If-Modified-Since when If-None-Match is present, so the ETag takes precedence.
    """
    if v is None:
        return {}
    h: dict[str, str] = {}
    if v.etag:
        h["If-None-Match"] = v.etag
    if v.last_modified:
        h["If-Modified-Since"] = v.last_modified
    return h


def classify_status(status: int) -> Outcome:
    """200-class: OK; 304: not modified; 404/410: gone; anything else: error (keep points)."""
    if status == 304:
        return Outcome.NOT_MODIFIED
    if status in (404, 410):
        return Outcome.GONE
    if 200 <= status < 300:
        return Outcome.OK
    return Outcome.ERROR


@dataclass
class FetchResult:
    """One page's answer: its outcome, body, validators and redirects."""

    url: str
    outcome: Outcome
    status: int | None = None
    body: bytes = b""
    content_type: str = ""  # the media type alone, lowercase
    charset: str | None = None  # the Content-Type header's charset parameter, if any
    validators: Validators = Validators()
    error: str | None = None
    bytes_downloaded: int = 0
    final_url: str | None = None
    redirects: list[tuple[int, str]] = field(default_factory=list)  # (status, target) per hop
    retry_after: float | None = None  # seconds the server asked us to wait (429/503)

    @property
    def moved_permanently(self) -> bool:
        """Every hop was a 301/308: the target replaces the URL (RFC 9110 15.4)."""
        return bool(self.redirects) and all(s in (301, 308) for s, _ in self.redirects)

    @property
    def answered(self) -> bool:
        """The server sent an HTTP answer (any status)."""
        return self.status is not None


def make_client(
    *, user_agent: str = DEFAULT_USER_AGENT, timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The client pagesync uses by default: explicit timeouts, an identifying User-Agent.

    Redirects are followed by the Fetcher itself, one hop at a time, so that every hop
    is checked against the scope and permanent moves can be told from temporary ones.
    """
    return httpx.AsyncClient(
        follow_redirects=False,
        timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
        headers={"User-Agent": user_agent},
        transport=transport,
        limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
    )


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds to wait: delta-seconds or an HTTP-date (RFC 9110 10.2.3),
    at most `MAX_RETRY_AFTER` (a server asking for years is asking for the longest wait
    there is, which every schedule can hold); None when unreadable. Never raises."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        wait = (when - (now or datetime.now(timezone.utc))).total_seconds()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(max(0.0, wait), MAX_RETRY_AFTER)


class Fetcher:
    """Polite, bounded fetching over an injected client.

    Per host: at most `per_host` requests at once, robots.txt honoured (read at most once
    per Fetcher, i.e. per pass, and with a `cache` reused across passes for 24 h), its
    Crawl-delay kept (capped at `max_crawl_delay`), and a 429/503 with Retry-After backs
    the host off. `scope(url) -> reason | None` vets every URL and every redirect hop
    before a request is sent; `site_headers(url)` gives the extra headers of the URL's site
    for every hop (robots.txt and sitemaps too). `now` is the pass clock that dates and ages cached answers
    (the real clock when None). Every answer (a page's, a sitemap's, robots.txt's), all of
    it, must arrive within `deadline` seconds (by default the client's read timeout).
    `ready_in(url)` says how long a page would wait on its host; `HostQueue` uses it to
    give workers pages of hosts that can send.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        per_host: int = 4,
        max_bytes: int = DEFAULT_MAX_BYTES,
        scope: Callable[[str], str | None] | None = None,
        respect_robots: bool = True,
        max_crawl_delay: float = 10.0,
        max_retry_wait: float = 30.0,
        max_redirects: int = MAX_REDIRECTS,
        cache: FetchCache | None = None,
        now: datetime | None = None,
        deadline: float | None = None,
        site_headers: Callable[[str], Mapping[str, str]] | None = None,
    ):
        self._client = client
        # What `for_pass` builds a pass's Fetcher with, beside the pass's own scope, cache and clock.
        self._settings = dict(
            per_host=per_host,
            max_bytes=max_bytes,
            respect_robots=respect_robots,
            max_crawl_delay=max_crawl_delay,
            max_retry_wait=max_retry_wait,
            max_redirects=max_redirects,
            deadline=deadline,
        )
        # A whole answer (redirect hops and body) of a page, a sitemap or robots.txt:
        # `deadline` seconds, by default the client's read timeout (`--timeout`), None for no bound.
        self._deadline = deadline if deadline is not None else client.timeout.read
        # Pages share one timer for it (`Deadlines`); a sitemap or robots.txt, rare, has an asyncio.timeout.
        self._deadlines = Deadlines(self._deadline)
        self._hosts = HostPacing(per_host)
        self._max_bytes = max_bytes
        self.scope = scope
        # url -> the extra request headers of its site (--header), {} for a URL of no site.
        # Asked at every hop, so a header never follows a redirect to another host.
        self.site_headers = site_headers
        # url -> why the site rules keep it out (--exclude), or None: a redirect to such a
        # page is not followed (a permanent one is answered as the move itself).
        self.unwanted: Callable[[str], str | None] | None = None
        self._robots_on = respect_robots
        self._max_crawl_delay = max_crawl_delay
        self._max_retry_wait = max_retry_wait
        self._max_redirects = max_redirects
        self.user_agent = client.headers.get("user-agent", DEFAULT_USER_AGENT)
        self.cache = cache
        self.now = now
        self.robots_bytes = 0
        self.sitemaps_not_modified = 0

    def for_pass(
        self,
        *,
        scope: Callable[[str], str | None],
        site_headers: Callable[[str], Mapping[str, str]],
        unwanted: Callable[[str], str | None],
        cache: FetchCache | None,
        now: datetime,
    ) -> Fetcher:
        """A Fetcher for one pass: this one's client and settings, with the pass's scope,
        headers, site rules, cache and clock. This one is left as it was built, so a caller's
        loop of passes gives each pass its own (robots.txt read afresh, its own pacing and
        counters)."""
        # arg-type: `_settings` holds the constructor's own keyword values, each of its type.
        f = Fetcher(self._client, scope=scope, cache=cache, now=now, site_headers=site_headers, **self._settings)  # type: ignore[arg-type]
        f.unwanted = unwanted
        return f

    def _now(self) -> datetime:
        return self.now or datetime.now(timezone.utc)

    async def _get(
        self,
        url: str,
        headers: dict[str, str],
        max_bytes: int,
        *,
        prefix_ok: bool = False,
        moved_headers: Callable[[str], dict[str, str]] | None = None,
    ) -> Answer:
        """`hops.get_following` with this Fetcher's client, redirect bound, scope, site rules and headers."""
        return await get_following(
            self._client,
            url,
            headers,
            max_bytes,
            max_redirects=self._max_redirects,
            scope=self.scope,
            unwanted=self.unwanted,
            site_headers=self.site_headers,
            prefix_ok=prefix_ok,
            moved_headers=moved_headers,
        )

    async def _robots(self, url: str, host: HostState) -> RobotsRules:
        if host.robots is not None:  # read already: set once per pass, never changed after
            return host.robots
        async with host.robots_lock:  # the first pages of a host wait for one read
            if host.robots is None:
                host.robots = await self._read_robots(url)
            return host.robots

    async def _read_robots(self, url: str) -> RobotsRules:
        """The rules for `url`'s origin: a cached answer younger than 24 h, else a GET.

        Only answers that describe the site are cached (`robots_cacheable`); a failure
        disallows all for this pass only, and the next pass asks again.
        """
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}".lower()
        now = self._now()
        kept = self.cache.cached_robots(origin) if self.cache is not None else None
        if kept is not None and robots_fresh(kept, now):
            rules = rules_from_response(kept.status, kept.body)
            rules.reason += ", cached"
            return rules
        try:
            async with asyncio.timeout(self._deadline):  # a trickled robots.txt is no answer
                ans = await self._get(
                    f"{parts.scheme}://{parts.netloc}/robots.txt", {}, MAX_ROBOTS_BYTES, prefix_ok=True
                )
        except (Refused, httpx.HTTPError, httpx.InvalidURL, ValueError, TimeoutError) as exc:
            rules = rules_from_response(None, b"")
            rules.reason += f" ({type(exc).__name__})"
            rules.unavailable = f"robots.txt got no answer ({type(exc).__name__})"
            return rules
        self.robots_bytes += ans.wire
        status = ans.resp.status_code
        if self.cache is not None and robots_cacheable(status):
            body = ans.body[:MAX_ROBOTS_BYTES] if 200 <= status < 300 else b""  # only 2xx bodies carry rules
            self.cache.cache_robots(origin, RobotsAnswer(status, body, now))
        return rules_from_response(status, ans.body)

    @staticmethod
    def _backing_off(url: str, blocked: float) -> FetchResult:
        """A page not requested because its host asked (Retry-After) for more than the wait we allow."""
        return FetchResult(
            url, Outcome.ERROR, error=f"host backing off (Retry-After), {blocked:.0f}s left", retry_after=blocked
        )

    def ready_in(self, url: str) -> float | None:
        """How long `fetch_page(url)` would wait on its host before sending: 0.0 when it
        would send at once (or answer without a request: out of scope, disallowed, backing
        off), the seconds left of a Crawl-delay or a short Retry-After, or None while it
        would wait for a request under way on the host to end (the per-host bound is full,
        or the host's robots.txt is being read)."""
        key, host = self._hosts.host(url)
        if self._robots_on and key and host.robots is None:
            # Read by a request under way: wait for it, unless no request would be sent.
            return None if host.robots_lock.locked() and not (self.scope and self.scope(url)) else 0.0
        now = asyncio.get_running_loop().time()
        blocked = host.blocked(now)
        wait = host.wait(now)
        if wait == 0.0:
            return 0.0  # the common case, decided without the scope and robots checks
        # A page fetch_page answers without a request never waits for the host.
        if self.scope and self.scope(url):
            return 0.0
        robots = host.robots  # not None here when robots are on (the None case returned above)
        if (
            self._robots_on
            and key
            and robots is not None
            and (robots.unavailable is not None or not robots.allows(url, self.user_agent))
        ):
            return 0.0
        if blocked > self._max_retry_wait:
            return 0.0
        return wait

    async def request_ended(self, timeout: float | None = None) -> None:
        """Return when a request of this Fetcher ends (a host may be ready now), or after `timeout` seconds."""
        await self._hosts.request_ended(timeout)

    async def fetch_page(
        self,
        url: str,
        validators: Validators | None = None,
        moved_validators: Callable[[str], Validators | None] | None = None,
    ) -> FetchResult:
        """One conditional GET. Never raises for network or HTTP trouble.

        `validators` are never sent past a 301/308 hop: the target is asked with
        `moved_validators(target)` (its own, when the caller knows them), else without.
        """
        try:
            return await self._fetch_page(url, validators, moved_validators)
        finally:
            # After the host's state is settled (bound released, robots.txt known,
            # Retry-After recorded): HostQueues look again.
            self._hosts.end_request()

    async def _fetch_page(
        self, url: str, validators: Validators | None, moved_validators: Callable[[str], Validators | None] | None
    ) -> FetchResult:
        reason = self.scope(url) if self.scope else None
        if reason:
            return FetchResult(url, Outcome.SKIPPED, error=f"out of scope: {reason}")
        key, host = self._hosts.host(url)
        loop = asyncio.get_running_loop()
        if self._robots_on and key:
            rules = await self._robots(url, host)
            if rules.unavailable is not None:
                # Disallow all for now (what is indexed stays), but as a failure, not a skip:
                # the pass must not look successful, and the pages are retried soon.
                return FetchResult(url, Outcome.ERROR, error=f"{rules.unavailable}: host not crawled this pass")
            if not rules.allows(url, self.user_agent):
                # rules.reason is "robots.txt" or "robots.txt, cached": say the file once.
                how = rules.reason.removeprefix("robots.txt").strip(" ,")
                return FetchResult(
                    url, Outcome.SKIPPED, error="disallowed by robots.txt" + (f" ({how} copy)" if how else "")
                )
            delay = min(rules.crawl_delay(self.user_agent) or 0.0, self._max_crawl_delay)
        else:
            delay = 0.0
        blocked = host.blocked(loop.time())
        if blocked > self._max_retry_wait:
            return self._backing_off(url, blocked)
        # For a host `ready_in` calls ready, nothing up to the request suspends (a free lock
        # or semaphore is taken at once), so its place in the bound and its Crawl-delay start
        # are taken before any other task runs: HostQueue.get relies on it.
        async with host.sem:
            # Checked again: a Retry-After may have come while this request waited for the
            # per-host bound; only a short one is slept out here, never a long one.
            blocked = host.blocked(loop.time())
            if blocked > self._max_retry_wait:
                return self._backing_off(url, blocked)
            if blocked > 0:
                await asyncio.sleep(blocked)
            if delay > 0:
                await host.pace(delay)
            sent = [validators]  # the validators of the request that got the final answer

            def moved_headers(target: str) -> dict[str, str]:
                sent[0] = moved_validators(target) if moved_validators is not None else None
                return conditional_headers(sent[0])

            try:
                # httpx's timeouts bound each connect and each read; the deadline bounds the
                # whole answer, so a server trickling bytes cannot hold the pass for long.
                async with self._deadlines.bound():
                    ans = await self._get(
                        url, conditional_headers(validators), self._max_bytes, moved_headers=moved_headers
                    )
            except Refused as exc:
                return FetchResult(url, Outcome.ERROR, error=str(exc))
            except (httpx.TimeoutException, TimeoutError):
                return FetchResult(url, Outcome.ERROR, error="timeout")
            except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
                return FetchResult(url, Outcome.ERROR, error=f"{type(exc).__name__}: {exc}".rstrip(": "))
        resp, fields = ans.resp, ans.fields
        status = resp.status_code
        outcome = classify_status(status)
        retry_after = None
        if status in (429, 503):
            retry_after = parse_retry_after(fields.get("retry-after"))
            if retry_after is not None:
                host.back_off(loop.time(), retry_after)
        content_type = fields.get("content-type")
        ctype = content_type.split(";")[0].strip().lower() if content_type is not None else ""
        etag, last_modified = fields.get("etag"), fields.get("last-modified")
        if status == 304:
            # A 304 refreshes validators it carries and keeps the ones it does not.
            old = sent[0] or _NO_VALIDATORS
            etag, last_modified = etag or old.etag, last_modified or old.last_modified
        result = FetchResult(
            url,
            outcome,
            status=status,
            body=ans.body if outcome is Outcome.OK else b"",
            content_type=ctype,
            # What `resp.charset_encoding` gives, without its second look for the field.
            charset=resp.charset_encoding if content_type is not None else None,
            validators=Validators(etag, last_modified),
            bytes_downloaded=ans.wire,
            final_url=str(resp.url),
            redirects=ans.redirects,
            retry_after=retry_after,
        )
        if outcome is Outcome.ERROR:
            result.error = f"HTTP {status}" + (f" (Retry-After {retry_after:.0f}s)" if retry_after is not None else "")
        elif outcome is Outcome.OK:
            if ans.truncated:
                result.outcome, result.error = Outcome.SKIPPED, f"larger than {self._max_bytes} bytes"
            elif ctype and not ctype.startswith(_TEXT_TYPES):
                result.outcome, result.error = Outcome.SKIPPED, f"unsupported content type {ctype}"
        if result.outcome is Outcome.SKIPPED:
            result.body = b""
        return result

    async def fetch_bytes(self, url: str) -> tuple[bytes, int]:
        """A sitemap file (or a robots.txt read for its Sitemap lines) as (body, wire bytes).

        With a cache the GET is conditional on the validators of the copy kept from an
        earlier pass, and a 304 returns that copy's body: the caller parses exactly what a
        200 would have carried, at the 304's wire cost. A 304 whose copy cannot be read
        falls back to one unconditional GET, never to an empty sitemap. Raises FetchError
        unless a whole body was obtained.
        """
        kept = self.cache.cached_sitemap(url) if self.cache is not None else None
        headers = conditional_headers(Validators(kept.etag, kept.last_modified)) if kept is not None else {}
        ans = await self._get_sitemap(url, headers)
        wire = ans.wire
        if ans.resp.status_code == 304 and kept is not None and headers:
            body = kept.body(MAX_SITEMAP_BYTES)
            if body is not None:
                self.sitemaps_not_modified += 1
                if self.cache is not None:
                    refresh_sitemap(
                        self.cache,
                        url,
                        kept,
                        ans.resp.headers.get("etag"),
                        ans.resp.headers.get("last-modified"),
                        self._now(),
                    )
                return body, wire
            ans = await self._get_sitemap(url, {})
            wire += ans.wire
        if not 200 <= ans.resp.status_code < 300:
            raise FetchError(f"{url}: HTTP {ans.resp.status_code}")
        if ans.truncated:
            raise FetchError(f"{url}: larger than {MAX_SITEMAP_BYTES} bytes")
        if self.cache is not None:
            keep_sitemap(
                self.cache,
                url,
                kept,
                ans.body,
                ans.resp.headers.get("etag"),
                ans.resp.headers.get("last-modified"),
                self._now(),
            )
        return ans.body, wire

    async def _get_sitemap(self, url: str, headers: dict[str, str]) -> Answer:
        _key, host = self._hosts.host(url)
        try:
            async with host.sem:
                try:
                    async with asyncio.timeout(self._deadline):  # the whole answer, as for a page
                        return await self._get(url, headers, MAX_SITEMAP_BYTES)
                except Refused as exc:
                    raise FetchError(f"{url[:200]}: {exc}") from None
                except TimeoutError:
                    raise FetchError(f"{url[:200]}: timeout") from None
                except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
                    raise FetchError(f"{url[:200]}: {type(exc).__name__}: {exc}") from exc
        finally:
            self._hosts.end_request()  # it held a place in the host's bound, which HostQueues watch


T = TypeVar("T")


class HostQueue(Generic[T]):
    """Items to fetch (pages), queued per host in the order given, for workers sharing one
    Fetcher.

    `get` hands out the earliest-queued item whose host can take a request now
    (`Fetcher.ready_in`), so a host's Crawl-delay, Retry-After or full per-host bound
    never holds a worker while another host has pages ready; a worker waits only when no
    host can send, until the first one can. Within a host the order is kept; with one
    host, or none waiting, it is the order given.
    """

    def __init__(self, fetcher: Fetcher, items: Iterable[T], url: Callable[[T], str]):
        self._fetcher = fetcher
        self._url = url
        self._hosts: dict[str, deque[tuple[int, T]]] = {}
        for i, item in enumerate(items):
            self._hosts.setdefault(url_host(url(item))[0], deque()).append((i, item))

    async def get(self) -> T | None:
        """The next item, as soon as its host can take it; None when none are left.

        The caller must call `fetch_page` for it straight away, awaiting nothing before:
        fetch_page takes the host's place (per-host bound, Crawl-delay start) before it
        first suspends, so the next `get` already sees the host as busy."""
        while self._hosts:
            best: str | None = None
            wait: float | None = None  # the soonest a host with items can send (None: when a request ends)
            for key, q in self._hosts.items():
                ready = self._fetcher.ready_in(self._url(q[0][1]))
                if ready == 0.0:
                    if best is None or q[0][0] < self._hosts[best][0][0]:
                        best = key
                elif ready is not None:
                    wait = ready if wait is None else min(wait, ready)
            if best is not None:
                q = self._hosts[best]
                item = q.popleft()[1]
                if not q:
                    del self._hosts[best]
                return item
            await self._fetcher.request_ended(wait)
        return None
