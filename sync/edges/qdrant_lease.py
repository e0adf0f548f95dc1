"""The pass lock on a Qdrant state collection: one point of kind `lease`, taken, renewed, released.

`lock()` takes a lease (default 10 minutes) and a daemon thread renews it (default every
60 s); `unlock()` releases it; a crashed pass's lease simply expires. Qdrant offers no
compare-and-swap that every server version has, so taking the lease is write-then-verify:

1. read the lease; if another pass's lease is live, wait (`wait` seconds) or refuse
   with `StateLockedError` naming the holder (host, pid, started at, expires at);
2. otherwise write our lease with a random token;
3. wait `settle_seconds` (default 1 s), read it back, and proceed only if our token is
   still there. Two passes racing for a free lease both write; the later write wins and
   both read back the winner's token, so exactly one proceeds.

The remaining race window, honestly: if pass B *read* the lease as free before pass A
wrote it, but B's *write* lands after A's read-back (B stalled between its read and its
write for longer than A's settle time, e.g. a GC pause or a slow network), both proceed.
A's next heartbeat then finds B's token, marks A's lease lost, and A stops at its next
state write with `StateLeaseLostError` (the engine writes the state before every store
write, so A writes no more points after that). So the overlap, when it happens at all,
is bounded by one heartbeat interval, and both passes write pages as units (a page's
points are replaced whole), so an overlap costs duplicate work and possibly a stale
hash on a page that the next pass repairs, not a broken collection. Renewal and release
are conditional on our token (a filtered `set_payload` / delete), so they never extend
or remove a successor's lease. Expiry compares the lease's `expires_at` with the local
clock: machines whose clocks disagree by more than the lease length can take over a
live lease early. Servers that support conditional upserts (`update_mode=insert_only`,
`update_filter`) could make step 2 a true compare-and-swap; they are not used because
not every server has them.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any, Callable, ContextManager

from ..errors import PagesyncError, StateLockedError
from .lease import Holder, LeaseStatus, claim, lease_status, locked_message, may_take, this_process

__all__ = ["QdrantLease", "LEASE_ID"]

log = logging.getLogger("pagesync")

LEASE_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "pagesync:lease"))


class QdrantLease:
    """A state's lease: `take` (write, settle, read back), a heartbeat thread that renews it,
    `release`. `clock` and `sleep` are injectable for tests; the lease uses the wall clock
    (epoch seconds), never a pass's `--now`. `lost` says why, once another pass holds it."""

    def __init__(
        self,
        client: Any,
        collection: str,
        *,
        guard: Callable[[str], ContextManager[None]],
        retrieve: Callable[[str, list[str]], list[dict[str, Any]]],
        ensure: Callable[[], None],
        lease_seconds: float,
        heartbeat_seconds: float,
        settle_seconds: float,
        poll_seconds: float,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        holder: tuple[str, int] | None = None,
    ):
        # The state's client, collection and error boundary: every call goes through `guard`.
        self.client, self.collection = client, collection
        self._guard, self._retrieve, self._ensure = guard, retrieve, ensure
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.settle_seconds = settle_seconds
        self.poll_seconds = poll_seconds
        self._clock, self._sleep = clock, sleep
        self._holder = holder  # (hostname, pid) shown to others; default: this process
        self._token = uuid.uuid4().hex
        self.held: Holder | None = None
        self.lost: str | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _me(self, now: float) -> Holder:
        if self._holder is None:
            return this_process(now, token=self._token)
        return Holder(self._holder[0], self._holder[1], now, None, self._token)

    def _mine_filter(self):
        from qdrant_client import models as m

        return m.Filter(
            must=[
                m.HasIdCondition(has_id=[LEASE_ID]),
                m.FieldCondition(key="token", match=m.MatchValue(value=self._token)),
            ]
        )

    def read(self) -> Holder | None:
        """The lease as stored now (None: no lease)."""
        got = self._retrieve("read lease", [LEASE_ID])
        if not got or got[0].get("kind") != "lease":
            return None
        return Holder.from_dict(got[0])

    def _write(self, lease: Holder) -> None:
        from qdrant_client import models as m

        with self._guard("write lease"):
            self.client.upsert(
                self.collection,
                points=[m.PointStruct(id=LEASE_ID, vector={}, payload={"kind": "lease", **lease.to_dict()})],
                wait=True,
            )

    def _refusal(self, holder: Holder | None) -> StateLockedError:
        return StateLockedError(locked_message(f"the Qdrant state {self.collection!r}", holder))

    def take(self, wait: float = 0.0) -> None:
        """Take the lease (write, settle, read back), waiting up to `wait` seconds for a
        live one to be released or to expire; else `StateLockedError` naming the holder."""
        if self.held is not None:
            return
        self._ensure()
        deadline = self._clock() + max(0.0, wait)
        vanished = 0
        while True:
            now = self._clock()
            current = self.read()
            if may_take(lease_status(current, self._token, now)):
                self._write(claim(current, self._me(now), now, self.lease_seconds))
                if self.settle_seconds > 0:
                    self._sleep(self.settle_seconds)
                back = self.read()
                if lease_status(back, self._token, self._clock()) is LeaseStatus.MINE:
                    self.held, self.lost = back, None
                    self._start_heartbeat()
                    return
                if back is None and vanished < 3:  # gone between our write and our read: again at once
                    vanished += 1
                    continue
                current = back  # another pass's write landed after ours: it won
            if self._clock() >= deadline:
                raise self._refusal(current)
            self._sleep(max(0.0, min(self.poll_seconds, deadline - self._clock())))

    def renew(self) -> bool:
        """Extend our lease (only if it still carries our token). False, and the lease
        marked lost, when another pass holds it now."""
        from qdrant_client import models as m

        if self.held is None:
            return False
        now = self._clock()
        new = claim(self.held, self._me(now), now, self.lease_seconds)
        with self._guard("renew lease"):
            self.client.set_payload(
                self.collection,
                payload={"expires_at": new.expires_at},
                points=m.FilterSelector(filter=self._mine_filter()),
                wait=True,
            )
        back = self.read()
        if lease_status(back, self._token, self._clock()) is LeaseStatus.MINE:
            self.held = back
            return True
        self.lost = (
            f"this pass lost its lease on the Qdrant state {self.collection!r} "
            + (f"to another pass ({back.describe()})" if back else "(the lease was removed)")
            + "; stopped before writing more"
        )
        log.warning("pagesync: %s", self.lost)
        return False

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        if self.heartbeat_seconds <= 0:
            return
        self._beat = threading.Thread(target=self._heartbeat, name="pagesync-lease", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_seconds):
            try:
                if not self.renew():
                    return
            except PagesyncError as exc:  # already redacted; the lease lives on until it expires
                log.warning("pagesync: could not renew the state lease (will retry): %s", exc)

    def release(self) -> None:
        """Stop renewing and delete the lease, only if it still carries our token."""
        from qdrant_client import models as m

        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=30)
            self._beat = None
        if self.held is None:
            return
        self.held = None
        try:
            with self._guard("release lease"):
                self.client.delete(
                    self.collection, points_selector=m.FilterSelector(filter=self._mine_filter()), wait=True
                )
        except PagesyncError as exc:
            log.warning("pagesync: could not release the state lease (it expires on its own): %s", exc)
