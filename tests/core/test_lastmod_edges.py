"""Sitemap `lastmod` at the edges of time: stamps with no UTC instant are no stamp, and a
stamp in the future (past the pass's clock and a day of skew) neither stops syncing nor
hides the next real edit."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings, strategies as st

from sync.core.planning import plan_events
from sync.core.sitemaps import (
    LASTMOD_SKEW,
    collect_sitemaps,
    diff_sitemap,
    lastmod_advanced,
    lastmod_in_time,
    lastmods_to_record,
    parse_lastmod,
    parse_sitemap,
)

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(*items: tuple[str, str]) -> bytes:
    body = "".join(f"<url><loc>{loc}</loc><lastmod>{lm}</lastmod></url>" for loc, lm in items)
    return f'<urlset xmlns="{NS}">{body}</urlset>'.encode()


@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:59:59-01:00",  # past year 9999 in UTC
        "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
        "Fri, 31 Dec 9999 23:59:59 -0100",
    ],
)
def test_a_stamp_with_no_utc_instant_is_no_stamp(value):
    assert parse_lastmod(value) is None
    parsed = parse_sitemap(urlset(("https://e.com/a", value), ("https://e.com/b", "2026-11-01")))
    assert [(e.url, e.lastmod) for e in parsed.entries] == [
        ("https://e.com/a", None),
        ("https://e.com/b", "2026-11-01T00:00:00+00:00"),
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
        st.datetimes(timezones=st.just(timezone(timedelta(hours=-1)))).map(lambda d: d.isoformat()),
        st.datetimes().map(lambda d: d.strftime("%a, %d %b %Y %H:%M:%S -0100")),
    )
)
def test_the_parser_never_raises(value):
    got = parse_lastmod(value)
    assert got is None or got.utcoffset() == timedelta(0)
    lastmod_in_time(got.isoformat() if got else value, NOW)  # nor does the clock check


@pytest.mark.parametrize(
    "stamp, kept",
    [
        ("2026-12-01T12:00:00+00:00", True),
        ("2026-12-02T11:59:59+00:00", True),  # within the skew
        ("2026-12-02T12:00:01+00:00", False),
        ("2999-01-01T00:00:00+00:00", False),
        ("0001-01-01T00:00:00+00:00", True),  # old is no harm: any later stamp is an advance
        (None, True),
        ("junk", True),  # unreadable: compared as a string, as before
    ],
)
def test_a_future_stamp_is_no_stamp(stamp, kept):
    assert lastmod_in_time(stamp, NOW) == (stamp if kept else None)
    assert lastmod_in_time(stamp, None) == stamp
    assert lastmod_in_time("9999-12-31T23:00:00+00:00", datetime.max.replace(tzinfo=timezone.utc)) is not None


def test_a_future_stamp_does_not_hide_the_next_real_edit():
    a, b = "https://e.com/a", "https://e.com/b"
    recorded = {a: "2999-01-01T00:00:00+00:00", b: "2026-10-01T00:00:00+00:00"}  # an older pass kept it
    today = {a: "2026-12-01T08:00:00+00:00", b: "2026-10-01T00:00:00+00:00"}  # the real edit
    assert lastmod_advanced(recorded[a], today[a], NOW)
    assert diff_sitemap(recorded, today, now=NOW).lastmod_changed == [a]
    assert lastmods_to_record(recorded, today, now=NOW) == {a: today[a]}
    visits, _, _, advanced = plan_events(
        sitemap_now=today,
        sitemap_before=recorded,
        sitemap_complete=True,
        extra_urls=[],
        known={},
        due=[],
        pending=[],
        full=False,
        now=NOW,
    )
    assert advanced == [a]


def test_a_future_stamp_is_not_recorded_and_not_an_advance_each_pass():
    a, b = "https://e.com/a", "https://e.com/b"

    async def fetch(url):
        return urlset((a, "2999-01-01"), (b, "2026-11-02")), 1

    got = asyncio.run(collect_sitemaps(["https://e.com/sitemap.xml"], fetch, now=NOW)).entries
    assert got == {a: None, b: "2026-11-02T00:00:00+00:00"}
    recorded = {a: None, b: "2026-11-01T00:00:00+00:00"}
    assert diff_sitemap(recorded, got, now=NOW).lastmod_changed == [b]
    assert lastmods_to_record(recorded, got, now=NOW) == {b: got[b]}
    # An older state's future stamp is dropped from the record when the sitemap drops it.
    assert lastmods_to_record({a: "2999-01-01T00:00:00+00:00"}, {a: None}, now=NOW) == {a: None}
    assert LASTMOD_SKEW == timedelta(days=1)


@pytest.mark.parametrize("stamp", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_pass_syncs_past_a_stamp_with_no_utc_instant(harness, site, stamp):
    site.set("/a.html", "<html><body><main><p>Alpha page text.</p></main></body></html>")
    site.set("/b.html", "<html><body><main><p>Beta page text.</p></main></body></html>")
    a, b = site.server.url("/a.html"), site.server.url("/b.html")
    site.set("/map.xml", urlset((a, stamp), (b, "2020-01-01")), content_type="application/xml")
    report = harness.run(sitemaps=[site.server.url("/map.xml")])
    assert report.ok and report.pages_failed == 0
    assert {p["url"] for p in harness.points().values()} == {a, b}
