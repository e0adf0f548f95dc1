"""The pass's plan and its first state write, pure: `plan_events` and `record_sitemap`.

The property that matters: a pass killed right after it recorded what the sitemap said
(before any visit) leaves a state from which the next pass, given the same sitemap (its
kept copy, or a 304), plans the same visits and removals: nothing the sitemap said is lost.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sync.core.planning import plan_events, record_sitemap
from sync.core.sitemaps import feed_hosts, lastmods_to_record
from sync.edges.state import GONE, LIVE, NEW, PageState
from tests.helpers import T0

NOW = T0 + timedelta(days=10)
LATER = NOW + timedelta(days=3)
OLD, MID, NEWER = "2026-01-01T00:00:00+00:00", "2026-01-05T00:00:00+00:00", "2026-01-09T00:00:00+00:00"
U = [f"https://e.com/p{i}" for i in range(6)]


def live(url, lastmod=OLD, **kw):
    kw = {"in_sitemap": True, "sitemap_lastmod": lastmod, "due_at": LATER, **kw}
    return PageState(url=url, status=LIVE, first_seen_at=T0, content_hash="h", chunk_count=1, **kw)


def plan_and_record(known, sitemap_now, due=(), trusted=True):
    """One pass's planning and first write, as the pass does them (the budget aside)."""
    before = {u: p.sitemap_lastmod for u, p in known.items() if p.in_sitemap}
    feed = feed_hosts(sitemap_now)
    to_record = lastmods_to_record(before, sitemap_now, feed)
    pending = [u for u, p in known.items() if p.pending_hash is not None]
    visits, removals, _, advanced = plan_events(
        sitemap_now=sitemap_now,
        sitemap_before=before,
        sitemap_complete=True,
        extra_urls=[],
        known=known,
        due=list(due),
        pending=pending,
        full=False,
        lastmod_due=lambda u: trusted,
        feed=feed,
    )
    pages, dirty = record_sitemap(
        visits=visits,
        known=known,
        sitemap_now=sitemap_now,
        to_record=to_record,
        advanced=advanced,
        extra=[],
        now=NOW,
        lastmod_due=lambda u: trusted,
    )
    return visits, removals, pages, dirty


@pytest.mark.parametrize(
    "pending, trusted, reason",
    [
        (False, True, "due"),
        (True, True, "lastmod"),  # an advance recorded by a pass killed before the visit
        (True, False, "due"),  # the host's lastmod is not trusted (any more): an ordinary visit
    ],
)
def test_a_due_page_with_an_advance_on_record_goes_as_that_advance(pending, trusted, reason):
    page = live(U[0], lastmod_pending=pending, due_at=NOW)
    visits, removals, _, advanced = plan_events(
        sitemap_now={U[0]: OLD, U[1]: NEWER},
        sitemap_before={U[0]: OLD, U[1]: NEWER},
        sitemap_complete=True,
        extra_urls=[],
        known={U[0]: page},
        due=[U[0]],
        pending=[],
        full=False,
        lastmod_due=lambda u: trusted,
    )
    assert [(v.url, v.reason) for v in visits] == [(U[0], reason)]
    assert removals == [] and advanced == []


@pytest.mark.parametrize(
    "case, known, sitemap_now, trusted, written",
    [
        # A trusted advance: the new stamp, the pending mark and the due time in one row.
        (
            "advance",
            {U[0]: live(U[0]), U[1]: live(U[1], NEWER)},
            {U[0]: NEWER, U[1]: NEWER},
            True,
            {U[0]: (NEWER, True, NOW)},
        ),
        # Not trusted: recorded and counted at the next visit, due on its schedule.
        (
            "untrusted",
            {U[0]: live(U[0]), U[1]: live(U[1], NEWER)},
            {U[0]: NEWER, U[1]: NEWER},
            False,
            {U[0]: (NEWER, True, LATER)},
        ),
        # Due sooner already: stays so.
        (
            "due sooner",
            {U[0]: live(U[0], due_at=NOW - timedelta(hours=1)), U[1]: live(U[1], NEWER)},
            {U[0]: NEWER, U[1]: NEWER},
            True,
            {U[0]: (NEWER, True, NOW - timedelta(hours=1))},
        ),
        # Backwards: no advance, today's stamp recorded, nothing due.
        (
            "backwards",
            {U[0]: live(U[0], NEWER), U[1]: live(U[1])},
            {U[0]: OLD, U[1]: OLD},
            True,
            {U[0]: (OLD, False, LATER)},
        ),
        # One stamp on every URL: nothing recorded, nothing read as an advance.
        (
            "deploy date",
            {U[0]: live(U[0]), U[1]: live(U[1], NEWER)},
            {U[0]: "2026-02-01", U[1]: "2026-02-01"},
            True,
            {},
        ),
        # A URL new to the state: a NEW row, due (no due time) until its visit.
        ("new", {U[0]: live(U[0])}, {U[0]: OLD, U[1]: NEWER}, True, {U[1]: (NEWER, False, None)}),
        # A known page listed again (it had left the sitemap): due now, in the row that lists it.
        (
            "listed again",
            {U[0]: live(U[0]), U[1]: live(U[1], NEWER, in_sitemap=False)},
            {U[0]: OLD, U[1]: NEWER},
            True,
            {U[1]: (NEWER, False, NOW)},
        ),
    ],
)
def test_record_sitemap_table(case, known, sitemap_now, trusted, written):
    if case != "deploy date":  # a page with a stamp of its own beside them, unchanged: the stamps vary
        known, sitemap_now = {**known, U[5]: live(U[5], MID)}, {**sitemap_now, U[5]: MID}
    _, _, pages, dirty = plan_and_record(known, sitemap_now, trusted=trusted)
    assert {u: (p.sitemap_lastmod, p.lastmod_pending, p.due_at) for u, p in dirty.items()} == written
    assert all(p.in_sitemap for p in dirty.values())
    if case == "new":
        assert dirty[U[1]].status == NEW and pages[U[1]] is dirty[U[1]]


_stamp = st.sampled_from([None, "2026-01-01T00:00:00+00:00", "2026-01-05T00:00:00+00:00", "2026-01-09T00:00:00+00:00"])


@st.composite
def _pages(draw):
    known = {}
    for url in draw(st.sets(st.sampled_from(U), max_size=6)):
        status = draw(st.sampled_from([LIVE, LIVE, GONE, NEW]))
        in_sitemap = draw(st.booleans())
        due_at = draw(st.sampled_from([None, NOW - timedelta(hours=1), LATER])) if status == NEW else LATER
        known[url] = PageState(
            url=url,
            status=status,
            first_seen_at=T0,
            in_sitemap=in_sitemap,
            sitemap_lastmod=draw(_stamp),
            due_at=due_at if status != GONE or in_sitemap else None,
            content_hash="h" if status == LIVE else None,
            chunk_count=int(status == LIVE),
        )
    return known


def _due(state):
    """`StateDB.due_urls` over a dict of pages."""
    return sorted(
        u for u, p in state.items() if (p.status != GONE or p.in_sitemap) and (p.due_at is None or p.due_at <= NOW)
    )


@settings(max_examples=400, deadline=None)
@given(_pages(), st.dictionaries(st.sampled_from(U), _stamp, min_size=1, max_size=6), st.booleans())
def test_a_pass_killed_after_its_sitemap_write_loses_no_visit(known, sitemap_now, trusted):
    """Pass 1 plans from the state and the sitemap, writes its sitemap rows, and is
    killed. Pass 2 starts from that state with the same sitemap: every visit pass 1
    planned is planned again (a trusted advance still as "lastmod"), every removal too."""
    state = {u: replace(p) for u, p in known.items()}
    visits, removals, _, dirty = plan_and_record(state, sitemap_now, due=_due(state), trusted=trusted)
    after = {**{u: replace(p) for u, p in known.items()}, **{u: replace(p) for u, p in dirty.items()}}
    again, removals2, _, dirty2 = plan_and_record(after, sitemap_now, due=_due(after), trusted=trusted)
    reasons = {v.url: v.reason for v in again}
    for v in visits:
        assert v.url in reasons, (v, again)
        if v.reason == "lastmod":
            assert reasons[v.url] == "lastmod"
    assert [r.url for r in removals2] == [r.url for r in removals]
    # The sitemap's news is recorded once: pass 2 records nothing about the sitemap that pass 1 did not.
    assert all(
        after[u].sitemap_lastmod == p.sitemap_lastmod and after[u].in_sitemap for u, p in dirty2.items() if u in dirty
    )
