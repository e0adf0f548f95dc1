"""One GET followed hop by hop: each redirect vetted, headers chosen per hop, the body read under a cap.

Redirects are never left to httpx: every hop is checked against the scope and the site
rules (a permanent move to an excluded page is answered as the move itself), a loop or too
many hops refuse the request, the site's own headers go to each hop by its host and never
after an https-to-http downgrade, and the body is decoded here under its byte cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping
from urllib.parse import urljoin

import httpx

from ..core.inflate import ACCEPT_ENCODING, BoundedDecoder

__all__ = ["Answer", "Refused", "get_following", "read_bounded", "header_fields", "declared_length"]


def declared_length(fields: dict[str, str]) -> int:
    """The answer's Content-Length (bytes on the wire), or -1 when absent or unreadable."""
    value = fields.get("content-length", "").strip()
    return int(value) if value.isdigit() else -1


def header_fields(resp: httpx.Response) -> dict[str, str]:
    """The answer's header fields by lower-case name, each decoded once; a repeated field
    is joined with ", ", as `Headers.get` joins it. Every `Headers.get` decodes and
    compares every field again, and a page's answer is asked for five of them."""
    return dict(resp.headers.items())


async def read_bounded(resp: httpx.Response, fields: dict[str, str], max_bytes: int) -> tuple[bytes, bool]:
    """The answer's body decoded (`Content-Encoding`), at most `max_bytes` of it, and
    whether there was more. The raw stream is decoded here under the cap, never by httpx,
    which inflates a whole read before anything could count it."""
    try:
        # An answer built in memory (a test transport's `content=`) was decoded when built.
        body = resp.content
        return body[:max_bytes], len(body) > max_bytes
    except httpx.ResponseNotRead:
        pass
    decoder = BoundedDecoder(fields.get("content-encoding"), max_bytes)
    chunks: list[bytes] = []
    size = 0
    async for raw in resp.aiter_raw():
        for piece in decoder.feed(raw):
            chunks.append(piece)
            size += len(piece)
        if decoder.full or size > max_bytes:
            break
    truncated = decoder.full or size > max_bytes
    # Exactly max_bytes kept, trimmed before the join (one copy of the body, not two).
    while size > max_bytes:
        over = size - max_bytes
        last = chunks.pop()
        size -= len(last)
        if len(last) > over:
            chunks.append(last[: len(last) - over])
            size += len(last) - over
    return b"".join(chunks), truncated


class Refused(Exception):
    """A request not sent, or a redirect not followed, with the reason."""


@dataclass
class Answer:
    resp: httpx.Response
    fields: dict[str, str]  # the final answer's header fields (`header_fields`)
    body: bytes
    truncated: bool
    redirects: list[tuple[int, str]]
    wire: int


async def get_following(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    max_bytes: int,
    *,
    max_redirects: int,
    scope: Callable[[str], str | None] | None,
    unwanted: Callable[[str], str | None] | None,
    site_headers: Callable[[str], Mapping[str, str]] | None,
    prefix_ok: bool = False,
    moved_headers: Callable[[str], dict[str, str]] | None = None,
) -> Answer:
    """GET with a size cap, following up to `max_redirects` redirects hop by hop.

    An answer whose Content-Length is over the cap is not read at all (truncated, empty
    body): leaving the stream unread closes its connection rather than pooling it.
    `prefix_ok` (robots.txt, whose first `max_bytes` are what counts) reads up to the
    cap whatever Content-Length says. After a 301/308 hop the request goes on with
    `moved_headers(target)` when given (a permanent redirect gives the target an
    identity of its own); other hops keep `headers` (a temporary redirect's answer is
    the original URL's)."""
    current, redirects, seen, wire = url, [], {url}, 0
    secure = False  # an https hop came before: no secret goes to a plain-http hop after it
    for _hop in range(max_redirects + 1):
        # `client.stream` without its context-manager wrapper (a generator per request):
        # the same request, sent streaming, and the answer closed on every way out.
        # Accept-Encoding: only the codings `read_bounded` decodes under the cap, whatever
        # the injected client would advertise by default.
        # The site's own headers (--header) go to each hop by its host: a redirect to
        # another host gets that host's, none off the sites (`site_headers`).
        # A downgrade (https, then http) never carries them, whatever the site.
        plain = not current[:6].lower().startswith("https:")
        secure = secure or not plain
        site = site_headers(current) if site_headers is not None and not (secure and plain) else {}
        request = client.build_request("GET", current, headers={**site, **headers, "Accept-Encoding": ACCEPT_ENCODING})
        resp = await client.send(request, follow_redirects=False, stream=True)
        try:
            location = resp.headers.get("location") if resp.status_code in (301, 302, 303, 307, 308) else None
            if location:
                wire += resp.num_bytes_downloaded
                target = urljoin(current, location)
                redirects.append((resp.status_code, target))
                if target in seen:
                    raise Refused(f"redirect loop at {target}")
                reason = scope(target) if scope else None
                if reason:
                    raise Refused(f"redirect to {target} not followed: {reason}")
                excluded = unwanted(target) if unwanted is not None else None
                if excluded and resp.status_code in (301, 308):
                    # A permanent move to a page the site rules keep out: the move is
                    # the answer (the old URL leaves), the target is never requested.
                    return Answer(resp, header_fields(resp), b"", False, redirects, wire)
                if excluded:
                    raise Refused(f"redirect to {target} not followed: {excluded}")
                seen.add(target)
                current = target
                if moved_headers is not None and resp.status_code in (301, 308):
                    headers = moved_headers(target)
                continue
            fields = header_fields(resp)
            if not prefix_ok and declared_length(fields) > max_bytes:
                return Answer(resp, fields, b"", True, redirects, wire + resp.num_bytes_downloaded)
            body, truncated = await read_bounded(resp, fields, max_bytes)
            return Answer(resp, fields, body, truncated, redirects, wire + resp.num_bytes_downloaded)
        finally:
            await resp.aclose()
    raise Refused(f"too many redirects (more than {max_redirects})")
