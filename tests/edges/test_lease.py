"""The pass lease on the Qdrant state: pure rules in tables, then the lease itself with an
injected clock (expiry, renewal, waiting, takeover), the heartbeat thread, and racers."""

from __future__ import annotations

import threading
import time

import pytest
from qdrant_client import QdrantClient

from sync.errors import StateLeaseLostError, StateLockedError
from sync.edges.lease import Holder, LeaseStatus, claim, iso, lease_status, locked_message, may_take
from sync.edges.qdrant_state import QdrantState
from sync.edges.state import PageState

NAME = "pages__pagesync_state"
FREE, EXPIRED, MINE, HELD = LeaseStatus.FREE, LeaseStatus.EXPIRED, LeaseStatus.MINE, LeaseStatus.HELD


def H(token: str, expires: float | None, started: float = 0.0) -> Holder:
    return Holder("host-x", 77, started, expires, token)


# -- pure rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "current, now, expected",
    [
        (None, 0.0, FREE),
        (H("me", 100.0), 50.0, MINE),
        (H("me", 100.0), 150.0, MINE),  # expired, but nobody took it: still ours to renew
        (H("other", 100.0), 50.0, HELD),
        (H("other", 100.0), 99.999, HELD),
        (H("other", 100.0), 100.0, EXPIRED),  # at expires_at exactly it has run out
        (H("other", 100.0), 1e12, EXPIRED),
        (H("other", None), 1e12, HELD),  # no expiry (an OS file lock): held until released
        (H("", 100.0), 50.0, HELD),  # an empty token is nobody's
    ],
)
def test_lease_status(current, now, expected):
    assert lease_status(current, "me", now) is expected


def test_an_empty_token_never_matches_an_empty_token():
    assert lease_status(H("", 100.0), "", 50.0) is HELD


@pytest.mark.parametrize("status, ok", [(FREE, True), (EXPIRED, True), (MINE, True), (HELD, False)])
def test_may_take(status, ok):
    assert may_take(status) is ok


@pytest.mark.parametrize(
    "current, now, started, expires",
    [
        (None, 1000.0, 1000.0, 1600.0),  # a fresh claim starts now
        (H("other", 900.0, started=300.0), 1000.0, 1000.0, 1600.0),  # taking over an expired lease
        (H("me", 1200.0, started=600.0), 1000.0, 600.0, 1600.0),  # a renewal keeps its start
    ],
)
def test_claim(current, now, started, expires):
    me = Holder("ci", 5, 0.0, None, "me")
    got = claim(current, me, now, 600.0)
    assert (got.started_at, got.expires_at, got.token, got.hostname, got.pid) == (started, expires, "me", "ci", 5)


def test_refusal_message_names_the_holder_in_one_line():
    msg = locked_message("the Qdrant state 'x'", Holder("runner-7", 4242, 1_767_225_600.0, 1_767_226_200.0, "t"))
    assert msg == (
        "another pagesync pass is using the Qdrant state 'x' (host runner-7, pid 4242, started at "
        "2026-01-01T00:00:00+00:00, expires at 2026-01-01T00:10:00+00:00); try again later, "
        "or wait for it with --wait-lock SECONDS"
    )
    assert "t)" not in msg  # the token proves nothing to a reader and is not shown


# -- the lease with an injected clock --------------------------------------------------------------
class Clock:
    """Fake wall clock: `sleep` advances it (and runs an optional hook first)."""

    def __init__(self, t: float = 1_767_225_600.0):
        self.t = t
        self.on_sleep = None

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        if self.on_sleep:
            self.on_sleep()
        self.t += s


@pytest.fixture
def client():
    c = QdrantClient(location=":memory:")
    yield c
    c.close()


def state(client, clock, who: str, pid: int, **kw) -> QdrantState:
    opts = dict(
        clock=clock,
        sleep=clock.sleep,
        holder=(who, pid),
        settle_seconds=1.0,
        heartbeat_seconds=0,
        lease_seconds=600.0,
        poll_seconds=5.0,
    )
    opts.update(kw)
    return QdrantState(client, NAME, **opts)


def test_a_second_pass_is_refused_naming_the_holder(client):
    clock = Clock()
    a, b = state(client, clock, "ci-a", 111), state(client, clock, "ci-b", 222)
    start = clock()
    a.lock()
    a.lock()  # re-entrant for the holder
    clock.t += 100
    with pytest.raises(StateLockedError) as ei:
        b.lock()
    msg = str(ei.value)
    assert f"host ci-a, pid 111, started at {iso(start)}, expires at {iso(start + 600)}" in msg
    assert NAME in msg
    a.unlock()
    assert a.read_lease() is None
    b.lock()  # released: free at once
    assert b.read_lease().hostname == "ci-b"


def test_a_crashed_pass_lease_expires_and_the_old_holder_stops_writing(client):
    clock = Clock()
    a, b = state(client, clock, "ci-a", 111), state(client, clock, "ci-b", 222)
    a.lock()  # ...and the pass dies without unlocking or renewing
    clock.t += 598
    with pytest.raises(StateLockedError):
        b.lock()
    clock.t += 2  # 600 s after the lease was written (+1 s settle): expired
    b.lock()
    assert b.read_lease().hostname == "ci-b"
    # The stalled holder wakes up: its renewal fails and its writes refuse.
    assert a.renew() is False
    with pytest.raises(StateLeaseLostError, match="ci-b"):
        a.put_many([PageState(url="https://e.com/a")])
    a.unlock()  # must not remove the new holder's lease
    assert b.read_lease().hostname == "ci-b"
    b.put_many([PageState(url="https://e.com/b")])  # the holder writes on


def test_renewal_keeps_the_lease_alive_and_its_start(client):
    clock = Clock()
    a, b = state(client, clock, "ci-a", 111), state(client, clock, "ci-b", 222)
    a.lock()
    first = a.read_lease()
    clock.t += 500
    assert a.renew() is True
    renewed = a.read_lease()
    assert renewed.started_at == first.started_at and renewed.expires_at == clock() + 600
    clock.t += 200  # past the first expiry, within the renewed one
    with pytest.raises(StateLockedError):
        b.lock()


def test_wait_lock_waits_for_a_crashed_lease_to_expire(client):
    clock = Clock()
    a, b, c = (state(client, clock, f"ci-{x}", n) for x, n in (("a", 1), ("b", 2), ("c", 3)))
    a.lock()  # crashed holder
    expires = a.read_lease().expires_at
    t0 = clock()
    with pytest.raises(StateLockedError):
        c.lock(wait=100)  # gives up after 100 s of polling
    assert clock() - t0 >= 100
    b.lock(wait=900)
    assert b.read_lease().hostname == "ci-b"
    assert clock() >= expires


def test_wait_lock_takes_the_lease_as_soon_as_it_is_released(client):
    clock = Clock()
    a, b = state(client, clock, "ci-a", 1), state(client, clock, "ci-b", 2)
    a.lock()
    clock.on_sleep = lambda: a.unlock()  # the holder finishes while b waits
    t0 = clock()
    b.lock(wait=300)
    assert b.read_lease().hostname == "ci-b"
    assert clock() - t0 <= 5 + 1 + 1  # one poll, one settle


def test_heartbeat_thread_renews_and_notices_a_takeover(client):
    a = QdrantState(client, NAME, holder=("ci-a", 1), settle_seconds=0.0, heartbeat_seconds=0.05, lease_seconds=5.0)
    b = QdrantState(client, NAME, holder=("ci-b", 2), settle_seconds=0.0, heartbeat_seconds=0)
    a.lock()
    first = a.read_lease().expires_at
    deadline = time.monotonic() + 60  # a condition, not a time limit: ends as soon as it holds
    while a.read_lease().expires_at == first and time.monotonic() < deadline:
        time.sleep(0.02)
    assert a.read_lease().expires_at > first  # renewed by the thread
    now = time.time()
    b._lease._write(Holder("ci-b", 2, now, now + 600, b._lease._token))  # someone took it over
    while a._lease.lost is None and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(StateLeaseLostError, match="ci-b"):
        a.put_many([PageState(url="https://e.com/a")])
    a.unlock()
    assert a._lease._beat is None
    assert a.read_lease().hostname == "ci-b"


# -- racers ---------------------------------------------------------------------------------------
class Serialized:
    """A client whose calls never overlap, as a server applies each request whole
    (qdrant-client's local mode is not made for threads)."""

    def __init__(self, client):
        self._client, self._lock = client, threading.Lock()

    def __getattr__(self, name):
        attr = getattr(self._client, name)

        def call(*a, **k):
            with self._lock:
                return attr(*a, **k)

        return call


def test_racing_passes_exactly_one_wins(client):
    shared = Serialized(client)
    QdrantState(shared, NAME)  # the collection exists before the race
    for round_ in range(2):
        racers = [
            QdrantState(shared, NAME, holder=(f"ci-{i}", 1000 + i), settle_seconds=0.5, heartbeat_seconds=0)
            for i in range(3)
        ]
        barrier = threading.Barrier(len(racers))
        outcome: dict[int, object] = {}

        def go(i: int, barrier=barrier, racers=racers, outcome=outcome) -> None:  # bound: joined this round
            barrier.wait()
            try:
                racers[i].lock()
                outcome[i] = "won"
            except StateLockedError as exc:
                outcome[i] = exc

        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(racers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        winners = [i for i, o in outcome.items() if o == "won"]
        assert len(outcome) == len(racers) and len(winners) == 1, (round_, outcome)
        (w,) = winners
        assert racers[w].read_lease().hostname == f"ci-{w}"
        for i, o in outcome.items():
            if i != w:
                assert f"host ci-{w}, pid {1000 + w}" in str(o)
        racers[w].unlock()
