"""The cache across passes, pure: robots.txt freshness (24 h at the pass clock), what may
be cached, sitemap bodies packed and unpacked within the size limit; and StateDB as its store."""

from __future__ import annotations

import sqlite3
import zlib
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.httpcache import (
    ROBOTS_MAX_AGE,
    RobotsAnswer,
    SitemapCopy,
    pack_body,
    robots_cacheable,
    robots_fresh,
    unpack_body,
)
from sync.state import StateDB

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("age,fresh", [
    (timedelta(0), True),
    (timedelta(hours=1), True),
    (timedelta(hours=23, minutes=59, seconds=59), True),
    (timedelta(hours=24), False),
    (timedelta(hours=25), False),
    (timedelta(days=30), False),
    (-timedelta(seconds=1), False),  # from the pass clock's future (a replay with an earlier --now)
])
def test_robots_fresh_for_24_hours_at_the_pass_clock(age, fresh):
    answer = RobotsAnswer(200, b"User-agent: *\nAllow: /\n", T0)
    assert robots_fresh(answer, T0 + age) is fresh


def test_robots_max_age_is_24_hours_and_can_be_given():
    assert ROBOTS_MAX_AGE == timedelta(hours=24)
    answer = RobotsAnswer(404, b"", T0)
    assert robots_fresh(answer, T0 + timedelta(hours=2), max_age=timedelta(hours=3))
    assert not robots_fresh(answer, T0 + timedelta(hours=2), max_age=timedelta(hours=1))


@pytest.mark.parametrize("status,cacheable", [
    (200, True), (204, True), (301, True), (400, True), (401, True), (403, True), (404, True), (410, True),
    (429, False), (500, False), (502, False), (503, False), (None, False),
])
def test_only_answers_that_describe_the_site_are_cacheable(status, cacheable):
    assert robots_cacheable(status) is cacheable


@given(st.binary(max_size=5000))
def test_pack_round_trip(body):
    assert unpack_body(pack_body(body)) == body


def test_packing_compresses_a_sitemap():
    body = b"<urlset>" + b"<url><loc>https://e.com/page</loc></url>" * 2000 + b"</urlset>"
    assert len(pack_body(body)) < len(body) / 20


@pytest.mark.parametrize("packed", [b"", b"not zlib", zlib.compress(b"x" * 1000)[:-4]])
def test_damaged_copies_unpack_to_none(packed):
    assert unpack_body(packed) is None


def test_unpack_honours_the_size_limit():
    packed = pack_body(b"z" * 1001)
    assert unpack_body(packed, limit=1000) is None
    assert unpack_body(packed, limit=1001) == b"z" * 1001


def test_sitemap_copy_of_and_body():
    copy = SitemapCopy.of(b"<urlset/>", '"e"', "LM", T0)
    assert copy.body() == b"<urlset/>" and copy.packed == pack_body(b"<urlset/>")
    assert SitemapCopy('"e"', None, b"junk", T0).body() is None


# -- StateDB as the store ---------------------------------------------------------------------------

@pytest.fixture
def db(tmp_path):
    with StateDB(tmp_path / "state.db") as s:
        yield s


def test_robots_answers_round_trip_and_upsert(db):
    assert db.cached_robots("https://e.com") is None
    db.cache_robots("https://e.com", RobotsAnswer(200, b"User-agent: *\nDisallow: /x\n", T0))
    db.cache_robots("http://e.com:8080", RobotsAnswer(404, b"", T0))
    assert db.cached_robots("https://e.com") == RobotsAnswer(200, b"User-agent: *\nDisallow: /x\n", T0)
    later = RobotsAnswer(200, b"", T0 + timedelta(days=1))
    db.cache_robots("https://e.com", later)
    assert db.cached_robots("https://e.com") == later
    assert db.cached_robots("http://e.com:8080").status == 404


def test_sitemap_copies_round_trip_upsert_and_forget(db):
    url = "https://e.com/sitemap.xml"
    assert db.cached_sitemap(url) is None
    copy = SitemapCopy.of(b"<urlset/>", 'W/"a"', "Wed, 31 Dec 2025 10:00:00 GMT", T0)
    db.cache_sitemap(url, copy)
    assert db.cached_sitemap(url) == copy
    newer = SitemapCopy.of(b"<urlset></urlset>", '"b"', None, T0 + timedelta(hours=6))
    db.cache_sitemap(url, newer)
    assert db.cached_sitemap(url) == newer and db.cached_sitemap(url).body() == b"<urlset></urlset>"
    db.forget_sitemap(url)
    db.forget_sitemap(url)  # forgetting twice is fine
    assert db.cached_sitemap(url) is None


def test_cache_survives_reopen(tmp_path):
    with StateDB(tmp_path / "s.db") as db:
        db.cache_robots("https://e.com", RobotsAnswer(200, b"a", T0))
        db.cache_sitemap("https://e.com/s.xml", SitemapCopy.of(b"b", '"e"', None, T0))
    with StateDB(tmp_path / "s.db") as db:
        assert db.cached_robots("https://e.com").body == b"a"
        assert db.cached_sitemap("https://e.com/s.xml").body() == b"b"


def test_old_state_files_gain_the_cache_tables(tmp_path):
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE pages (url TEXT PRIMARY KEY, status TEXT NOT NULL, source TEXT NOT NULL, "
                "in_sitemap INTEGER NOT NULL DEFAULT 0, sitemap_lastmod TEXT, etag TEXT, last_modified TEXT, "
                "content_hash TEXT, fingerprint TEXT, pending_hash TEXT, chunk_count INTEGER NOT NULL DEFAULT 0, "
                "title TEXT, interval_s REAL, due_at REAL, first_seen_at REAL, last_fetched_at REAL, "
                "last_changed_at REAL, failures INTEGER NOT NULL DEFAULT 0, last_error TEXT)")
    con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, "
                "finished_at TEXT NOT NULL, report TEXT NOT NULL)")
    con.commit()
    con.close()
    with StateDB(path) as db:
        db.cache_robots("https://e.com", RobotsAnswer(404, b"", T0))
        assert db.cached_robots("https://e.com") == RobotsAnswer(404, b"", T0)
        assert db.cached_sitemap("https://e.com/s.xml") is None
