"""Page state: round-trips, due pages, sitemap URLs, hosts, runs, and the pass lock.

The behavioural tests run against every `State`: SQLite (`StateDB`), `QdrantState` on
qdrant-client's local mode, and `QdrantState` on a real server (QDRANT_URL, else
skipped). The OS file lock is SQLite's own; the Qdrant lease is in tests/edges/test_lease.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import fields
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync.errors import ConfigError, StateLockedError
from sync.edges.qdrant_state import QdrantState
from sync.edges.state import GONE, LIVE, NEW, PageState, StateDB, from_epoch, to_epoch
from sync.edges.state_protocol import State
from tests.helpers import full_page

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
BACKENDS = ["sqlite", "qdrant-local", pytest.param("qdrant-server", marks=pytest.mark.server)]


@pytest.fixture(params=BACKENDS)
def reopen(request, tmp_path):
    """A factory of state objects on one and the same storage: `with reopen() as s: ...`."""
    backend = request.param
    if backend == "sqlite":
        yield lambda: StateDB(tmp_path / "state.db")
        return
    from qdrant_client import QdrantClient

    if backend == "qdrant-local":
        client = QdrantClient(location=":memory:")  # one client: local mode data lives in it
        name, key = "t__pagesync_state", None
    else:
        import uuid

        url, key = request.getfixturevalue("qdrant_server")
        client = QdrantClient(url=url, api_key=key, timeout=10, check_compatibility=False)
        name = f"pagesync_test_{uuid.uuid4().hex[:12]}__pagesync_state"
    yield lambda: QdrantState(client, name, api_key=key, settle_seconds=0.0, heartbeat_seconds=0)
    if backend == "qdrant-server":
        client.delete_collection(name)
    client.close()


@pytest.fixture
def db(reopen):
    with reopen() as s:
        yield s


def test_both_states_satisfy_the_protocol(db):
    assert isinstance(db, State)


def test_round_trip_all_fields(db):
    p = full_page()
    db.put(p)
    got = db.get(p.url)
    assert got == p
    # every field set to a non-default value, so equality really exercises each column
    defaults = PageState(url="x")
    for f in fields(PageState):
        if f.name != "url":
            assert getattr(p, f.name) != getattr(defaults, f.name), f.name
    assert got.due_at.tzinfo is not None and got.due_at.utcoffset() == timedelta(0)
    assert isinstance(got.interval, timedelta) and isinstance(got.in_sitemap, bool)


def test_sqlite_tuple_rows_agree_with_dict_rows(tmp_path):
    """StateDB reads and writes page rows as tuples (`_values`, `_from_values`); the dict
    forms (`to_row`, `from_row`) are what the Qdrant state uses. Same columns, same values."""
    from sync.edges.state import _ROW_COLUMNS

    for p in (full_page(), PageState(url="https://e.com/new")):
        row = p.to_row()
        assert dict(zip(_ROW_COLUMNS, p._values())) == row
        assert PageState._from_values(tuple(row[c] for c in _ROW_COLUMNS)) == PageState.from_row(row) == p
    with StateDB(tmp_path / "s.db") as s:
        s.put(full_page())
        stored = s._db.execute("SELECT * FROM pages").fetchone()
    assert dict(stored) == full_page().to_row()


def test_round_trip_none_values_and_defaults(db):
    p = PageState(url="https://e.com/new")
    db.put(p)
    got = db.get(p.url)
    assert got == p
    assert got.status == NEW and got.interval is None and got.due_at is None and got.etag is None
    assert got.in_sitemap is False and got.failures == 0 and got.chunk_count == 0


def test_round_trip_survives_reopen(reopen):
    p = full_page()
    with reopen() as s:
        s.put(p)
    with reopen() as s:
        assert s.get(p.url) == p
        assert s.all_pages() == [p]


def test_non_utc_datetimes_round_trip_to_the_same_instant(db):
    tz = timezone(timedelta(hours=-7))
    p = PageState(url="https://e.com/tz", due_at=datetime(2026, 5, 1, 3, 0, tzinfo=tz))
    db.put(p)
    got = db.get(p.url)
    assert got.due_at == p.due_at
    assert got.due_at.utcoffset() == timedelta(0)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc)),
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=365)),
)
def test_datetimes_and_intervals_round_trip_exactly(db, when, interval):
    p = PageState(url="https://e.com/h", due_at=when, last_fetched_at=when, interval=interval)
    db.put(p)
    got = db.get(p.url)
    assert got.due_at == when
    assert got.last_fetched_at == when
    assert got.interval == interval


def test_epoch_helpers():
    assert to_epoch(None) is None and from_epoch(None) is None
    assert from_epoch(to_epoch(T0)) == T0
    assert to_epoch(datetime(1970, 1, 1, tzinfo=timezone.utc)) == 0


def test_put_is_an_upsert(db):
    p = full_page()
    db.put(p)
    p.status, p.pending_hash, p.failures, p.etag = GONE, None, 0, None
    db.put(p)
    assert db.get(p.url) == p
    assert len(db.all_pages()) == 1


def test_get_missing_and_get_many(db):
    assert db.get("https://e.com/nope") is None
    assert db.get_many(["https://e.com/nope", "https://e.com/nope"]) == {}
    pages = [PageState(url=f"https://e.com/p{i}", chunk_count=i) for i in range(1200)]  # > one 500-url batch
    db.put_many(pages)
    got = db.get_many([p.url for p in pages] + ["https://e.com/missing"])
    assert len(got) == 1200
    assert got["https://e.com/p1199"].chunk_count == 1199
    db.put_many([])  # no-op
    assert db.get_many([]) == {}


def test_counts_and_tracked_urls(db):
    db.put_many(
        [
            PageState(url="https://e.com/a", status=LIVE, content_hash="h"),
            PageState(url="https://e.com/b", status=LIVE, content_hash="h"),
            PageState(url="https://e.com/c", status=GONE),
            PageState(url="https://e.com/d", status=NEW),
        ]
    )
    assert db.counts() == {LIVE: 2, GONE: 1, NEW: 1}
    assert sorted(db.tracked_urls()) == ["https://e.com/a", "https://e.com/b", "https://e.com/d"]


def test_indexed_property():
    assert PageState(url="u", status=LIVE, content_hash="h").indexed
    assert not PageState(url="u", status=LIVE).indexed
    assert not PageState(url="u", status=GONE, content_hash="h").indexed
    assert not PageState(url="u", status=NEW, content_hash="h").indexed


def test_due_urls(db):
    now = T0
    db.put_many(
        [
            PageState(url="https://e.com/never-visited", status=NEW, due_at=None),
            PageState(url="https://e.com/past", status=LIVE, content_hash="h", due_at=now - timedelta(hours=1)),
            PageState(url="https://e.com/exactly-now", status=LIVE, content_hash="h", due_at=now),
            PageState(url="https://e.com/future", status=LIVE, content_hash="h", due_at=now + timedelta(seconds=1)),
            PageState(url="https://e.com/gone-past", status=GONE, due_at=now - timedelta(days=1)),
            PageState(url="https://e.com/gone-none", status=GONE, due_at=None),
            PageState(url="https://e.com/gone-listed", status=GONE, in_sitemap=True, due_at=now - timedelta(days=1)),
            PageState(
                url="https://e.com/gone-listed-later", status=GONE, in_sitemap=True, due_at=now + timedelta(days=1)
            ),
            PageState(
                url="https://e.com/pending-future",
                status=LIVE,
                content_hash="h",
                pending_hash="p",
                due_at=now + timedelta(days=30),
            ),
            PageState(url="https://e.com/pending-new", status=NEW, pending_hash="p", due_at=now + timedelta(days=3)),
        ]
    )
    due = db.due_urls(now)
    assert len(due) == len(set(due))
    assert set(due) == {
        "https://e.com/never-visited",
        "https://e.com/past",
        "https://e.com/exactly-now",
        "https://e.com/gone-listed",
        "https://e.com/pending-future",
        "https://e.com/pending-new",
    }
    assert "https://e.com/future" in db.due_urls(now + timedelta(seconds=1))


def test_due_urls_pending_and_due_listed_once(db):
    db.put(PageState(url="https://e.com/x", status=LIVE, content_hash="h", pending_hash="p", due_at=T0))
    assert db.due_urls(T0) == ["https://e.com/x"]


def test_sitemap_urls(db):
    db.put_many(
        [
            PageState(url="https://e.com/a", in_sitemap=True, sitemap_lastmod="2024-01-01T00:00:00+00:00"),
            PageState(url="https://e.com/b", in_sitemap=True, sitemap_lastmod=None),
            PageState(
                url="https://e.com/c", in_sitemap=False, sitemap_lastmod="2024-01-01T00:00:00+00:00", source="url"
            ),
            PageState(url="https://e.com/d", in_sitemap=True, status=GONE),
        ]
    )
    assert db.sitemap_urls() == {
        "https://e.com/a": "2024-01-01T00:00:00+00:00",
        "https://e.com/b": None,
        "https://e.com/d": None,
    }


def test_record_run_and_last_run(db):
    assert db.last_run() is None
    r1 = {
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00",
        "pages_changed": 1,
        "errors": [],
    }
    r2 = {
        "started_at": "2026-01-02T00:00:00+00:00",
        "finished_at": "2026-01-02T00:01:00+00:00",
        "pages_changed": 0,
        "errors": [{"url": "https://e.com/x", "error": "timeout"}],
        "nested": {"k": [1, 2]},
    }
    db.record_run(r1)
    assert db.last_run() == r1
    db.record_run(r2)
    assert db.last_run() == r2


def test_record_run_persists(reopen):
    r = {"started_at": "a", "finished_at": "b", "pages_added": 3}
    with reopen() as s:
        s.record_run(r)
    with reopen() as s:
        assert s.last_run() == r
        assert s.runs() == [r]


def test_runs_in_order_and_the_same_report_twice(db):
    assert db.runs() == []
    reports = [
        {"started_at": f"2026-01-0{i}T00:00:00+00:00", "finished_at": "x", "n": i, "f": 0.5 + i} for i in range(1, 6)
    ]
    for r in reports:
        db.record_run(r)
    db.record_run(reports[0])  # a report equal to an earlier one is a new run, not an overwrite
    assert db.runs() == [*reports, reports[0]]
    assert db.last_run() == reports[0]


def test_host_trust_counts_add_up(db):
    assert db.host_trust_counts() == {}
    db.add_host_trust({})
    db.add_host_trust({"docs.example.com": (2, 1), "b.example.com": (1, 0)})
    db.add_host_trust({"docs.example.com": (3, 3)})
    assert db.host_trust_counts() == {"docs.example.com": (5, 4), "b.example.com": (1, 0)}


def test_clear_forgets_pages_hosts_and_runs(db):
    db.put_many([full_page("https://e.com/a"), PageState(url="https://e.com/b", status=GONE)])
    db.add_host_trust({"e.com": (1, 1)})
    db.record_run({"started_at": "a", "finished_at": "b"})
    db.clear()
    assert db.all_pages() == [] and db.host_trust_counts() == {} and db.runs() == [] and db.last_run() is None
    assert db.due_urls(T0) == [] and db.tracked_count() == 0
    db.put(full_page())
    assert db.all_pages() == [full_page()]


def test_tracked_count_and_due_follow_updates(db):
    p = PageState(url="https://e.com/a", status=LIVE, content_hash="h", due_at=T0 + timedelta(days=1))
    db.put(p)
    assert db.tracked_count() == 1 and db.due_urls(T0) == []
    p.due_at, p.pending_hash = None, None
    db.put(p)
    assert db.due_urls(T0) == ["https://e.com/a"]
    p.status, p.in_sitemap, p.due_at = GONE, False, T0 - timedelta(days=1)
    db.put(p)
    assert db.tracked_count() == 0 and db.due_urls(T0) == []
    p.in_sitemap = True  # gone but still listed: stays on the schedule
    db.put(p)
    assert db.due_urls(T0) == ["https://e.com/a"]
    assert db.sitemap_urls() == {"https://e.com/a": None}


# -- the pass lock ------------------------------------------------------------------------


def test_second_statedb_on_same_path_is_refused(tmp_path):
    path = tmp_path / "state.db"
    a = StateDB(path)
    b = StateDB(path)
    try:
        a.lock()
        a.lock()  # re-entrant for the holder
        with pytest.raises(StateLockedError) as ei:
            b.lock()
        assert isinstance(ei.value, ConfigError)  # exit code 2
        assert str(os.getpid()) in str(ei.value)  # names the holder
    finally:
        a.close()
        b.close()


def test_lock_released_after_close(tmp_path):
    path = tmp_path / "state.db"
    a = StateDB(path)
    a.lock()
    a.close()
    with StateDB(path) as b:
        b.lock()  # does not raise
        with StateDB(path) as c, pytest.raises(StateLockedError):
            c.lock()


def test_lock_released_after_unlock_and_context_exit(tmp_path):
    path = tmp_path / "state.db"
    with StateDB(path) as a:
        a.lock()
        a.unlock()
        with StateDB(path) as b:
            b.lock()
    with StateDB(path) as c:
        c.lock()


def test_different_paths_do_not_conflict(tmp_path):
    with StateDB(tmp_path / "one.db") as a, StateDB(tmp_path / "two.db") as b:
        a.lock()
        b.lock()


def test_lock_released_when_holder_process_is_killed(tmp_path):
    path = tmp_path / "state.db"
    code = textwrap.dedent(
        f"""
        import sys, time
        from sync.edges.state import StateDB
        s = StateDB({str(path)!r})
        s.lock()
        print("locked", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with StateDB(path) as s, pytest.raises(StateLockedError) as ei:
            s.lock()
        assert str(proc.pid) in str(ei.value)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        with StateDB(path) as s:
            s.lock()  # the OS dropped the dead process's lock
            assert s.get("https://e.com/none") is None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdout.close()


def test_old_state_files_gain_the_new_columns(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE pages (url TEXT PRIMARY KEY, status TEXT NOT NULL, source TEXT NOT NULL, "
        "in_sitemap INTEGER NOT NULL DEFAULT 0, sitemap_lastmod TEXT, etag TEXT, last_modified TEXT, "
        "content_hash TEXT, fingerprint TEXT, pending_hash TEXT, chunk_count INTEGER NOT NULL DEFAULT 0, "
        "title TEXT, interval_s REAL, due_at REAL, first_seen_at REAL, last_fetched_at REAL, "
        "last_changed_at REAL, failures INTEGER NOT NULL DEFAULT 0, last_error TEXT)"
    )
    con.execute("INSERT INTO pages (url, status, source) VALUES ('https://e.com/a', 'live', 'sitemap')")
    con.commit()
    con.close()
    with StateDB(path) as db:
        page = db.get("https://e.com/a")
        assert page.history is None and page.lastmod_pending is False and page.text_chars is None
        assert page.page_kind is None  # written before pages were told apart
        db.put(full_page("https://e.com/b"))
        assert db.get("https://e.com/b") == full_page("https://e.com/b")


def test_sqlite_refusal_names_the_holder_as_the_lease_does(tmp_path):
    import socket

    path = tmp_path / "state.db"
    with StateDB(path) as a, StateDB(path) as b:
        a.lock()
        with pytest.raises(StateLockedError) as ei:
            b.lock()
    msg = str(ei.value)
    assert msg.startswith(f"another pagesync pass is using {path} (")
    for part in (
        f"host {socket.gethostname()}",
        f"pid {os.getpid()}",
        "started at 20",
        "released when that process exits",
        "--wait-lock",
    ):
        assert part in msg, (part, msg)
    assert "\n" not in msg


class FakeTime:
    """`sync.edges.state`'s view of `time`: `sleep` advances `monotonic` (and runs `on_sleep`
    first, once), so lock waits are exact and take no wall time."""

    def __init__(self):
        self.t, self.slept, self.on_sleep = 1000.0, 0, None

    def monotonic(self):
        return self.t

    def time(self):
        return 1.7e9 + self.t

    def sleep(self, seconds):
        hook, self.on_sleep = self.on_sleep, None
        if hook is not None:
            hook()
        self.slept += 1
        self.t += seconds


def test_sqlite_wait_lock_waits_for_the_holder_then_gives_up(tmp_path, monkeypatch):
    import sync.edges.state

    clock = FakeTime()
    monkeypatch.setattr(sync.edges.state, "time", clock)
    path = tmp_path / "state.db"
    with StateDB(path) as a, StateDB(path) as b, StateDB(path) as c:
        a.lock()
        t0 = clock.t
        with pytest.raises(StateLockedError):
            c.lock(wait=3.0)
        assert clock.t - t0 >= 3.0 and clock.slept >= 2  # tried again until the wait was up
        clock.on_sleep = a.unlock  # the holder lets go while b waits
        t0, clock.slept = clock.t, 0
        b.lock(wait=60)  # taken at the next try
        assert clock.slept == 1 and clock.t - t0 <= 1.0


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_link_to_the_state_meets_the_same_lock(tmp_path, link):
    """A pass through another path to the same database file is refused while one runs. The
    holder is another process, as a second pass would be (SQLite shares its own per-file
    bookkeeping between the connections of one process, which would hide the bypass)."""
    path = tmp_path / "state.db"
    other = tmp_path / "elsewhere" / "alias.db"
    other.parent.mkdir()
    code = textwrap.dedent(
        f"""
        import sys
        from sync.edges.state import StateDB
        s = StateDB({str(path)!r})
        s.lock()
        print("locked", flush=True)
        sys.stdin.readline()
        s.close()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        (other.symlink_to if link == "symlink" else other.hardlink_to)(path)
        with StateDB(other) as b, pytest.raises(StateLockedError) as ei:
            b.lock()
        msg = str(ei.value)
        assert msg.startswith(f"another pagesync pass is using {other}") and "--wait-lock" in msg
        if link == "symlink":
            assert f"pid {proc.pid}" in msg  # the holder's description is beside the resolved file
        proc.stdin.write("done\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
        with StateDB(other) as b:
            b.lock()  # free again once the holder lets go
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdin.close()
        proc.stdout.close()
