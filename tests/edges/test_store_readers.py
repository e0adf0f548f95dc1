"""Who may open an embedded shard while another opener holds it: a reader meeting a writer
(a pass) is refused at once with one line naming it; a reader meeting a reader waits for
it (readers hold a shard for one query), as a writer waits for anyone."""

from __future__ import annotations

import os

import pytest

import sync.edges.shard_lock as store_mod
from sync.edges.shard_lock import SHARD_LOCK
from sync.edges.edge_store import EdgeStore
from sync.edges.store import StoredPoint
from sync.errors import StoreHeldError
from tests.helpers import store_clock

ID = "00000000-0000-0000-0000-000000000001"


@pytest.fixture
def shard(tmp_path):
    s = EdgeStore(tmp_path, "pages")
    s.ensure_collection(4)
    s.upsert([StoredPoint(ID, {"url": "https://e.com/a", "text": "a"}, [1.0, 0.0, 0.0, 0.0])])
    s.close()
    return tmp_path


def no_waiting(monkeypatch):
    def sleep(_):
        raise AssertionError("the opener polled the lock instead of deciding at once")

    monkeypatch.setattr(store_mod, "time", store_clock(sleep))


def test_a_reader_meeting_a_writer_is_refused_at_once_naming_it(shard, monkeypatch):
    writer = EdgeStore(shard, "pages")
    writer.count()  # opened and locked, as a pass holds it
    no_waiting(monkeypatch)
    try:
        with pytest.raises(StoreHeldError) as info:
            EdgeStore(shard, "pages", reading=True, lock_wait=60).count()
    finally:
        writer.close()
    line = str(info.value)
    assert "\n" not in line and "for writing" in line and f"pid {os.getpid()}" in line
    assert "--qdrant-url" in line and info.value.exit_code == 2


def test_a_reader_meeting_a_reader_waits_for_it(shard, monkeypatch):
    first = EdgeStore(shard, "pages", reading=True)
    first.count()
    waits = []

    def sleep(seconds):  # the first poll: the other reader's query is done
        waits.append(seconds)
        first.close()

    monkeypatch.setattr(store_mod, "time", store_clock(sleep))
    second = EdgeStore(shard, "pages", reading=True, lock_wait=60)
    try:
        assert second.count() == 1 and len(waits) == 1
    finally:
        second.close()


def test_a_writer_waits_for_a_reader_and_names_it_when_it_gives_up(shard):
    reader = EdgeStore(shard, "pages", reading=True)
    reader.count()
    try:
        with pytest.raises(StoreHeldError) as info:
            EdgeStore(shard, "pages", lock_wait=0).count()
    finally:
        reader.close()
    assert "a reader: host" in str(info.value) and "waited 0s" in str(info.value)


def test_the_lock_describes_its_holder_while_held_and_nobody_after(shard):
    s = EdgeStore(shard, "pages", reading=True)
    s.count()
    lock = shard / "pages" / SHARD_LOCK
    assert f'"pid": {os.getpid()}' in lock.read_text() and '"reading": true' in lock.read_text()
    s.close()
    assert lock.read_text() == ""


def test_a_lock_without_a_description_is_waited_for_by_a_reader(shard):
    """A holder that wrote no description (a pagesync from before it, or one that has just
    taken the lock) is waited for: only a writer that says so is refused at once."""
    writer = EdgeStore(shard, "pages")
    writer.count()
    (shard / "pages" / SHARD_LOCK).write_text("")
    try:
        with pytest.raises(StoreHeldError, match="waited 0s"):
            EdgeStore(shard, "pages", reading=True, lock_wait=0).count()
    finally:
        writer.close()
