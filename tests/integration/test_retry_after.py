"""A server's Retry-After, however large or odd, never raises and never schedules a page
(nor its host's other pages) past the revisit interval's 60 d ceiling."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings, strategies as st

from sync.edges.fetcher import MAX_RETRY_AFTER, parse_retry_after
from sync.core.scheduler import MAX_INTERVAL
from sync.edges.state import StateDB
from tests.helpers import page_html, para

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
CAP = MAX_INTERVAL.total_seconds()


@pytest.mark.parametrize(
    "value, expected",
    [
        ("120", 120.0),
        ("999999999999", CAP),  # was a timedelta overflow
        ("99999999999", CAP),  # was the year 5195
        ("9" * 400, CAP),
        ("Fri, 31 Dec 9999 23:59:59 GMT", CAP),
        ("Wed, 02 Dec 2026 12:00:00 GMT", 86400.0),
        ("Mon, 01 Jan 0001 00:00:00 GMT", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("Sat, 01 Jan 10000 00:00:00 GMT", None),
        ("²", None),  # a Unicode digit, not delta-seconds
        ("-5", None),
        ("", None),
    ],
)
def test_retry_after_is_capped_and_never_raises(value, expected):
    assert parse_retry_after(value, NOW) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.integers(min_value=0).map(str),
        st.datetimes(timezones=st.just(timezone.utc)).map(lambda d: d.strftime("%a, %d %b %Y %H:%M:%S GMT")),
    )
)
def test_parse_retry_after_stays_within_the_ceiling(value):
    got = parse_retry_after(value, NOW)
    assert got is None or 0.0 <= got <= MAX_RETRY_AFTER == CAP


@pytest.mark.parametrize("value", ["999999999999", "99999999999", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_a_huge_retry_after_schedules_the_host_within_the_ceiling(harness, site, value):
    for i in range(4):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}")]))
    site.error("/p0.html", 429, headers={"Retry-After": value})
    report = harness.run(fetcher_kw={"per_host": 1})
    assert report.pages_failed >= 1  # the pass ends with its report, no traceback
    with StateDB(harness.state_path) as st:
        pages = [st.get(site.server.url(f"/p{i}.html")) for i in range(4)]
    backed_off = [p for p in pages if p.last_error]
    assert backed_off and all(p.due_at <= harness.now + MAX_INTERVAL for p in pages)
