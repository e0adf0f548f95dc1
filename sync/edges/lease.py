"""Who holds the pass lock, and the pure rules of a lease.

Both states describe a holder the same way in their refusal: host, pid, when the pass
started and when its claim ends (a lease's expiry, or "when that process exits" for the
SQLite state's OS file lock).

The lease rules are a pure function of (the lease read back, my token, now), so they are
tested with tables and an injected clock; the I/O lives in `sync.edges.qdrant_state`.
"""

from __future__ import annotations

import enum
import json
import os
import socket
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any

__all__ = ["Holder", "LeaseStatus", "lease_status", "may_take", "claim", "locked_message", "iso", "this_process"]


def iso(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Holder:
    """One pass's claim on a state: who, since when, until when."""

    hostname: str
    pid: int
    started_at: float  # epoch seconds
    expires_at: float | None = None  # None: until the process exits (an OS file lock)
    token: str = ""  # a lease's random token (not shown: it proves nothing to a reader)

    def describe(self) -> str:
        until = (
            f"expires at {iso(self.expires_at)}" if self.expires_at is not None else "released when that process exits"
        )
        return f"host {self.hostname}, pid {self.pid}, started at {iso(self.started_at)}, {until}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Holder":
        return cls(
            hostname=str(d.get("hostname", "?")),
            pid=int(d.get("pid", 0)),
            started_at=float(d.get("started_at", 0.0)),
            expires_at=None if d.get("expires_at") is None else float(d["expires_at"]),
            token=str(d.get("token", "")),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def this_process(now: float, *, token: str = "", expires_at: float | None = None) -> Holder:
    return Holder(socket.gethostname(), os.getpid(), now, expires_at, token)


def locked_message(what: str, holder: Holder | str | None) -> str:
    """The one-line refusal both states raise (`StateLockedError`, exit 2)."""
    shown = holder.describe() if isinstance(holder, Holder) else (holder or "")
    return (
        f"another pagesync pass is using {what}"
        + (f" ({shown})" if shown else "")
        + "; try again later, or wait for it with --wait-lock SECONDS"
    )


class LeaseStatus(enum.Enum):
    FREE = "free"  # no lease at all
    EXPIRED = "expired"  # someone's lease ran out: a crashed or stalled pass
    MINE = "mine"  # the lease carries my token
    HELD = "held"  # someone else's live lease


def lease_status(current: Holder | None, token: str, now: float) -> LeaseStatus:
    """Pure: what the lease read back means for the pass holding `token` at `now`.

    A lease is live while `now < expires_at`; at `expires_at` exactly it has expired.
    """
    if current is None:
        return LeaseStatus.FREE
    if current.token and current.token == token:
        return LeaseStatus.MINE
    if current.expires_at is not None and now >= current.expires_at:
        return LeaseStatus.EXPIRED
    return LeaseStatus.HELD


def may_take(status: LeaseStatus) -> bool:
    return status is not LeaseStatus.HELD


def claim(current: Holder | None, me: Holder, now: float, lease_seconds: float) -> Holder:
    """Pure: the lease to write when taking or renewing. A renewal keeps its start time."""
    started = current.started_at if current is not None and current.token == me.token else now
    return replace(me, started_at=started, expires_at=now + lease_seconds)
