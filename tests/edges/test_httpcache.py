"""The cache across passes, pure: robots.txt freshness (24 h at the pass clock), what may
be cached, sitemap bodies packed and unpacked within the size limit, kept sitemap parses
(used only for the body they came from); and StateDB as its store."""

from __future__ import annotations

import sqlite3
import zlib
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sync.edges.httpcache as httpcache_mod
from sync.errors import SitemapError
from sync.edges.httpcache import (
    ROBOTS_MAX_AGE,
    ParseCache,
    ReadOnlyCache,
    RobotsAnswer,
    SitemapCopy,
    memo_parser,
    pack_body,
    robots_cacheable,
    robots_fresh,
    unpack_body,
)
from sync.core.sitemaps import pack_parsed, parse_key, parse_sitemap, unpack_parsed
from sync.edges.state import StateDB

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "age,fresh",
    [
        (timedelta(0), True),
        (timedelta(hours=1), True),
        (timedelta(hours=23, minutes=59, seconds=59), True),
        (timedelta(hours=24), False),
        (timedelta(hours=25), False),
        (timedelta(days=30), False),
        (-timedelta(seconds=1), False),  # from the pass clock's future (a replay with an earlier --now)
    ],
)
def test_robots_fresh_for_24_hours_at_the_pass_clock(age, fresh):
    answer = RobotsAnswer(200, b"User-agent: *\nAllow: /\n", T0)
    assert robots_fresh(answer, T0 + age) is fresh


def test_robots_max_age_is_24_hours_and_can_be_given():
    assert ROBOTS_MAX_AGE == timedelta(hours=24)
    answer = RobotsAnswer(404, b"", T0)
    assert robots_fresh(answer, T0 + timedelta(hours=2), max_age=timedelta(hours=3))
    assert not robots_fresh(answer, T0 + timedelta(hours=2), max_age=timedelta(hours=1))


@pytest.mark.parametrize(
    "status,cacheable",
    [
        (200, True),
        (204, True),
        (301, True),
        (400, True),
        (401, True),
        (403, True),
        (404, True),
        (410, True),
        (429, False),
        (500, False),
        (502, False),
        (503, False),
        (None, False),
    ],
)
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
    con.execute(
        "CREATE TABLE pages (url TEXT PRIMARY KEY, status TEXT NOT NULL, source TEXT NOT NULL, "
        "in_sitemap INTEGER NOT NULL DEFAULT 0, sitemap_lastmod TEXT, etag TEXT, last_modified TEXT, "
        "content_hash TEXT, fingerprint TEXT, pending_hash TEXT, chunk_count INTEGER NOT NULL DEFAULT 0, "
        "title TEXT, interval_s REAL, due_at REAL, first_seen_at REAL, last_fetched_at REAL, "
        "last_changed_at REAL, failures INTEGER NOT NULL DEFAULT 0, last_error TEXT)"
    )
    con.execute(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, "
        "finished_at TEXT NOT NULL, report TEXT NOT NULL)"
    )
    con.commit()
    con.close()
    with StateDB(path) as db:
        db.cache_robots("https://e.com", RobotsAnswer(404, b"", T0))
        assert db.cached_robots("https://e.com") == RobotsAnswer(404, b"", T0)
        assert db.cached_sitemap("https://e.com/s.xml") is None


# -- kept sitemap parses: memo_parser over a ParseCache ---------------------------------------------

SM = "https://e.com/sitemap.xml"


def _urlset(*paths: str) -> bytes:
    items = "".join(
        f"<url><loc>https://E.com{p}</loc><lastmod>2024-01-0{i % 9 + 1}</lastmod></url>" for i, p in enumerate(paths)
    )
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>'.encode()


class DictParses:
    """A ParseCache in a dict, counting writes."""

    def __init__(self):
        self.kept: dict[str, tuple[str, bytes]] = {}
        self.writes = 0

    def cached_parse(self, url):
        return self.kept.get(url)

    def cache_parse(self, url, key, packed):
        self.writes += 1
        self.kept[url] = (key, packed)


@pytest.fixture
def count_parses(monkeypatch):
    calls = []

    def counting(body):
        calls.append(body)
        return parse_sitemap(body)

    monkeypatch.setattr(httpcache_mod, "parse_sitemap", counting)
    return calls


def test_an_unchanged_body_is_parsed_once(count_parses):
    cache = DictParses()
    parse = memo_parser(cache)
    body = _urlset("/a", "/b", "/c")
    first = parse(SM, body)
    assert first == parse_sitemap(body) and len(count_parses) == 1
    assert cache.kept[SM][0] == parse_key(body)
    again = memo_parser(cache)(SM, body)  # the next pass
    assert again == first and len(count_parses) == 1 and cache.writes == 1


def test_a_changed_body_is_parsed_afresh_and_replaces_the_kept_parse(count_parses):
    cache = DictParses()
    memo_parser(cache)(SM, _urlset("/a", "/b"))
    changed = _urlset("/a", "/b", "/new")
    parsed = memo_parser(cache)(SM, changed)
    assert [e.url for e in parsed.entries] == ["https://e.com/a", "https://e.com/b", "https://e.com/new"]
    assert len(count_parses) == 2 and cache.kept[SM][0] == parse_key(changed)
    assert memo_parser(cache)(SM, changed) == parsed and len(count_parses) == 2


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong shape"])
def test_a_damaged_kept_parse_means_a_full_parse_never_an_empty_sitemap(count_parses, damage):
    cache = DictParses()
    body = _urlset("/a", "/b")
    memo_parser(cache)(SM, body)
    key, packed = cache.kept[SM]
    cache.kept[SM] = (
        key,
        {
            "garbage": b"\x00junk",
            "truncated": packed[: len(packed) // 2],
            "wrong shape": zlib.compress(b'{"urls": [], "lastmods": []}'),
        }[damage],
    )
    parsed = memo_parser(cache)(SM, body)
    assert parsed == parse_sitemap(body) and len(parsed.entries) == 2
    assert len(count_parses) == 2 and unpack_parsed(cache.kept[SM][1]) == parsed  # kept again, readable


def test_a_parse_kept_for_another_body_is_not_used(count_parses):
    cache = DictParses()
    other = parse_sitemap(_urlset("/x"))
    cache.kept[SM] = ("v1:" + "0" * 64, pack_parsed(other))  # not this body's key
    parsed = memo_parser(cache)(SM, _urlset("/a"))
    assert [e.url for e in parsed.entries] == ["https://e.com/a"] and len(count_parses) == 1


def test_parses_are_kept_per_sitemap_url(count_parses):
    cache = DictParses()
    a, b = _urlset("/a"), _urlset("/b")
    parse = memo_parser(cache)
    parse("https://e.com/s1.xml", a)
    parse("https://e.com/s2.xml", b)
    parse("https://e.com/s1.xml", a)
    parse("https://e.com/s2.xml", b)
    assert len(count_parses) == 2


def test_an_unreadable_body_raises_and_is_not_kept():
    cache = DictParses()
    with pytest.raises(SitemapError):
        memo_parser(cache)(SM, b"<html>not a sitemap</html>")
    assert cache.kept == {}


def test_without_a_parse_cache_every_body_is_parsed(count_parses):
    class RobotsOnly:
        def cached_robots(self, origin):
            return None

    for cache in (None, RobotsOnly()):
        parse = memo_parser(cache)
        parse(SM, _urlset("/a"))
        parse(SM, _urlset("/a"))
    assert len(count_parses) == 4


def test_read_only_cache_reads_kept_parses_and_keeps_none(count_parses, db):
    body = _urlset("/a", "/b")
    ro = ReadOnlyCache(db)
    assert isinstance(ro, ParseCache)
    memo_parser(ro)(SM, body)
    assert db.cached_parse(SM) is None  # a dry run keeps nothing
    memo_parser(db)(SM, body)
    memo_parser(ro)(SM, body)
    assert len(count_parses) == 2  # the dry run used what the real pass kept


def test_state_db_keeps_parses_upserts_and_clears(db, tmp_path):
    assert isinstance(db, ParseCache) and db.cached_parse(SM) is None
    db.cache_parse(SM, "k1", b"p1")
    db.cache_parse(SM, "k2", b"p2")
    assert db.cached_parse(SM) == ("k2", b"p2")
    db.clear()
    assert db.cached_parse(SM) is None


def test_old_state_files_gain_the_parse_table(tmp_path):
    path = tmp_path / "old.db"
    with StateDB(path) as db:
        db.cache_sitemap(SM, SitemapCopy.of(b"b", '"e"', None, T0))
    con = sqlite3.connect(path)
    con.execute("DROP TABLE sitemap_parses")
    con.commit()
    con.close()
    with StateDB(path) as db:
        assert db.cached_parse(SM) is None
        db.cache_parse(SM, "k", b"p")
        assert db.cached_parse(SM) == ("k", b"p")
