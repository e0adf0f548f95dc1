"""How a store's failures reach the user: one pagesync error per failure, in one line, with
no secret in it. `qdrant_boundary` maps what qdrant-client raises (for the client store, the
Qdrant state and the catalog), `edge_boundary` what Qdrant Edge and the file system raise;
`is_transient` says which client errors are worth another try."""

from __future__ import annotations

import contextlib
import errno
import json
from pathlib import Path
from typing import Iterator, Sequence

from ..core.secrets import redact as _redact
from ..errors import (
    ConfigError,
    PagesyncError,
    StateError,
    StateUnusableError,
    StoreError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from .disk_space import full_error, out_of_space

__all__ = ["Secrets", "redact", "qdrant_boundary", "error_cause", "is_transient", "edge_boundary", "read_only_error"]

# What a Qdrant client must never print: its API key, and the userinfo of its URL.
Secrets = str | tuple[str, ...] | None


def redact(text: str, secret: str | Sequence[str | None] | None) -> str:
    """`text` with every form of the secret(s) a server or library may echo (as is,
    JSON-escaped, URL-encoded, repr'd, base64) and every URL's userinfo replaced by ***
    (`sync.core.secrets.redact`)."""
    return _redact(text, secret)


@contextlib.contextmanager
def qdrant_boundary(what: str, secret: Secrets, error: type[PagesyncError] = StoreError) -> Iterator[None]:
    """Map anything qdrant-client raises to one pagesync error, "<what> failed: <cause>",
    the secrets redacted (`redact`) and a server's answer said by its status and message,
    never its raw body (`error_cause`). `from None`: the original may carry request headers
    (the key). Pagesync's own errors pass through unchanged."""
    try:
        yield
    except PagesyncError:
        raise
    except Exception as exc:
        cls = _UNAVAILABLE.get(error, error) if _unreachable(exc) else error
        raise cls(redact(f"{what} failed: {error_cause(exc)}", secret)) from None


def error_cause(exc: BaseException) -> str:
    """What went wrong, in one line: a server's answer as `HTTP 403 (Forbidden): <its
    status.error>` (at most 200 characters of it, never the raw body qdrant-client's
    message quotes), anything else as its message."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    if not isinstance(exc, UnexpectedResponse):
        return " ".join(str(exc).split()) or type(exc).__name__
    said = ""
    try:
        body = json.loads(exc.content)
        status = body.get("status") if isinstance(body, dict) else None
        err = status.get("error") if isinstance(status, dict) else None
        said = err if isinstance(err, str) else ""
    except (ValueError, TypeError):
        pass
    said = " ".join("".join(c if c.isprintable() else " " for c in said).split())[:200]
    head = f"HTTP {exc.status_code} ({exc.reason_phrase or 'unrecognised status'})"
    return f"{head}: {said}" if said else head


# An error of the server's reach, not of one operation: a configuration/environment error (exit 2).
_UNAVAILABLE: dict[type, type[PagesyncError]] = {StoreError: StoreUnavailableError, StateError: StateUnusableError}


def _unreachable(exc: BaseException) -> bool:
    """The server does not answer (connection refused, DNS, timeout) or refuses the API key."""
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in (401, 403)
    return isinstance(exc, (ResponseHandlingException, httpx.TransportError, ConnectionError, TimeoutError))


def is_transient(exc: BaseException) -> bool:
    """Worth another try: connection trouble, timeouts, 429 and 502-504 answers."""
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in (429, 502, 503, 504)
    return isinstance(exc, (ResponseHandlingException, httpx.TransportError, ConnectionError, TimeoutError))


@contextlib.contextmanager
def edge_boundary(where: str, what: str) -> Iterator[None]:
    """Map what Qdrant Edge or the file system raises during `what` on the store `where` to
    one pagesync error: out of space is `StoreFullError`, another `OSError` (a --qdrant-path
    that cannot hold a shard: missing, read-only, ...) `StoreUnavailableError`, anything else
    `StoreError`. Pagesync's store and configuration errors pass through unchanged."""
    try:
        yield
    except (StoreError, ConfigError):
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise full_error(where, what, exc) from exc
        raise StoreUnavailableError(f"{where}: {what} failed: {exc}") from exc
    except Exception as exc:
        if out_of_space(exc):  # Qdrant Edge's own I/O errors
            raise full_error(where, what, exc) from exc
        raise StoreError(f"{where}: {what} failed: {exc}") from exc


def read_only_error(shard_dir: Path, cause: object) -> StoreReadOnlyError:
    """An embedded store this user cannot write, which also means it cannot read it."""
    return StoreReadOnlyError(
        f"embedded store ({shard_dir}) is not writable for this user ({cause}): Qdrant Edge opens a shard "
        f"read-write even to read it (it maps its files and locks its write-ahead log), so it cannot be used "
        f"in place; make it writable, or copy it somewhere writable and point --qdrant-path there"
    )
