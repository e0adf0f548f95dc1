"""HTTP at the edge: conditional GETs of pages and plain GETs of sitemaps.

The `httpx.AsyncClient` is injected (a `MockTransport` in unit tests, a real socket in
integration tests). httpx exceptions never escape: a page visit always returns a
`FetchResult`, a sitemap fetch raises `FetchError`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from .decision import Outcome
from .errors import FetchError
from .sitemaps import MAX_SITEMAP_BYTES

__all__ = [
    "Validators",
    "FetchResult",
    "Fetcher",
    "conditional_headers",
    "classify_status",
    "DEFAULT_USER_AGENT",
    "DEFAULT_MAX_BYTES",
    "make_client",
]

DEFAULT_USER_AGENT = "pagesync/0.1 (+https://pypi.org/project/pagesync/)"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
_TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/markdown", "text/x-markdown", "text/plain")


@dataclass(frozen=True)
class Validators:
    """What the server gave us last time to ask 'has it changed?' (stored exactly as received)."""

    etag: str | None = None
    last_modified: str | None = None


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
    url: str
    outcome: Outcome
    status: int | None = None
    body: bytes = b""
    content_type: str = ""
    validators: Validators = Validators()
    error: str | None = None
    bytes_downloaded: int = 0
    final_url: str | None = None

    @property
    def answered(self) -> bool:
        """The server sent an HTTP answer (any status)."""
        return self.status is not None


def make_client(
    *, user_agent: str = DEFAULT_USER_AGENT, timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The client pagesync uses by default: redirects followed (at most 5), explicit timeouts."""
    return httpx.AsyncClient(
        follow_redirects=True,
        max_redirects=5,
        timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
        headers={"User-Agent": user_agent},
        transport=transport,
        limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
    )


class Fetcher:
    """Bounded-concurrency fetching over an injected client (`per_host` requests at once per host)."""

    def __init__(self, client: httpx.AsyncClient, *, per_host: int = 4, max_bytes: int = DEFAULT_MAX_BYTES):
        self._client = client
        self._per_host = per_host
        self._max_bytes = max_bytes
        self._sems: dict[str, asyncio.Semaphore] = defaultdict(lambda: asyncio.Semaphore(self._per_host))

    def _sem(self, url: str) -> asyncio.Semaphore:
        try:
            host = urlsplit(url).netloc.lower()
        except ValueError:
            host = ""  # a malformed URL fails in the request below, under a shared bound
        return self._sems[host]

    async def _get(self, url: str, headers: dict[str, str], max_bytes: int) -> tuple[httpx.Response, bytes, bool]:
        """GET with a size cap; returns (response, body, truncated)."""
        async with self._client.stream("GET", url, headers=headers) as resp:
            chunks: list[bytes] = []
            size = 0
            truncated = False
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    truncated = True
                    break
                chunks.append(chunk)
            return resp, b"".join(chunks), truncated

    async def fetch_page(self, url: str, validators: Validators | None = None) -> FetchResult:
        """One conditional GET. Never raises for network or HTTP trouble."""
        async with self._sem(url):
            try:
                resp, body, truncated = await self._get(url, conditional_headers(validators), self._max_bytes)
            except httpx.TooManyRedirects:
                return FetchResult(url, Outcome.ERROR, error="too many redirects")
            except httpx.TimeoutException:
                return FetchResult(url, Outcome.ERROR, error="timeout")
            except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
                return FetchResult(url, Outcome.ERROR, error=f"{type(exc).__name__}: {exc}".rstrip(": "))
        status = resp.status_code
        outcome = classify_status(status)
        ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
        new_validators = Validators(resp.headers.get("etag"), resp.headers.get("last-modified"))
        if status == 304:
            # A 304 refreshes validators it carries and keeps the ones it does not.
            old = validators or Validators()
            new_validators = Validators(new_validators.etag or old.etag, new_validators.last_modified or old.last_modified)
        result = FetchResult(
            url,
            outcome,
            status=status,
            body=body if outcome is Outcome.OK else b"",
            content_type=ctype,
            validators=new_validators,
            bytes_downloaded=resp.num_bytes_downloaded,
            final_url=str(resp.url),
        )
        if outcome is Outcome.ERROR:
            result.error = f"HTTP {status}"
        elif outcome is Outcome.OK:
            if truncated:
                result.outcome, result.error = Outcome.ERROR, f"larger than {self._max_bytes} bytes"
            elif ctype and not ctype.startswith(_TEXT_TYPES):
                result.outcome, result.error = Outcome.ERROR, f"unsupported content type {ctype}"
        return result

    async def fetch_bytes(self, url: str) -> tuple[bytes, int]:
        """Plain GET for sitemaps; raises FetchError unless the answer is a 2xx."""
        async with self._sem(url):
            try:
                resp, body, truncated = await self._get(url, {}, MAX_SITEMAP_BYTES)
            except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
                raise FetchError(f"{url[:200]}: {type(exc).__name__}: {exc}") from exc
        if not 200 <= resp.status_code < 300:
            raise FetchError(f"{url}: HTTP {resp.status_code}")
        if truncated:
            raise FetchError(f"{url}: larger than {MAX_SITEMAP_BYTES} bytes")
        return body, resp.num_bytes_downloaded
