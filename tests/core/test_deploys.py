"""Deploy detection and the choice of pages at a deploy: pure, tables and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.deploys import (
    DEPLOY_THRESHOLD,
    DEPLOY_TURN,
    DEPLOYS_KEPT,
    DeployCandidate,
    HostSchedule,
    SiteSignal,
    chance_per_deploy,
    change_chance,
    choose_at_deploy,
    deploy_candidate,
    deploy_seen,
    deploys_between,
    on_turn,
    schedules_from_json,
    schedules_to_json,
    site_signals,
    surprised,
)
from sync.core.history import Visit

A = {"https://h/a": "2026-01-01", "https://h/b": "2026-01-01"}


def sig(entries=A, validators=None, feeds=None) -> SiteSignal:
    return site_signals(entries, validators or {}, feeds)["h"]


@pytest.mark.parametrize(
    "before, now, seen",
    [
        (None, sig(), False),  # a first read is no deploy
        (sig(), sig(), False),
        (sig(), sig({**A, "https://h/b": "2026-01-02"}), True),  # a lastmod moved
        (sig(), sig({"https://h/a": None}), True),  # a page left
        (
            sig(validators={"https://h/sitemap.xml": ("e1", None)}),
            sig(validators={"https://h/sitemap.xml": ("e2", None)}),
            True,
        ),
        (sig(), sig(validators={"https://h/sitemap.xml": ("e2", None)}), False),  # validators first seen: no deploy
        (sig(feeds={"h": "f1"}), sig(feeds={"h": "f2"}), True),  # the feed changed
    ],
)
def test_deploy_seen(before, now, seen):
    assert deploy_seen(before, now) is seen


def test_signals_are_per_host():
    got = site_signals({"https://a/x": None, "https://b/y": None}, {})
    assert set(got) == {"a", "b"}


def test_deploys_between_counts_the_half_open_span():
    d = (10.0, 20.0, 30.0)
    assert [deploys_between(d, 0, 30), deploys_between(d, 10, 30), deploys_between(d, 30, 40)] == [3, 2, 0]
    full = tuple(float(i) for i in range(100, 100 + DEPLOYS_KEPT))
    assert deploys_between(full, 0, 100) == 2  # older deploys were dropped: at least one more


def test_chance_per_deploy_learns_from_visits_over_deploys():
    deploys = [float(t) for t in range(1, 11)]  # one deploy a second
    never = [Visit(elapsed_s=1.0, changed=False)] * 10
    always = [Visit(elapsed_s=1.0, changed=True)] * 10
    assert chance_per_deploy(never, 10.5, deploys) < 0.1 < 0.8 < chance_per_deploy(always, 10.5, deploys)
    assert chance_per_deploy([], 10.5, deploys) == pytest.approx(0.25)  # the prior


@given(st.floats(0, 1), st.integers(0, 50))
def test_change_chance_grows_with_the_deploys(p, k):
    assert 0.0 <= change_chance(p, k) <= change_chance(p, k + 1) <= 1.0


def test_choose_at_deploy_likeliest_first_within_the_budget():
    cands = [DeployCandidate(0.9, "a"), DeployCandidate(0.1, "b"), DeployCandidate(0.5, "c")]
    assert choose_at_deploy(cands) == ["a", "c"]
    assert choose_at_deploy(cands, budget=1) == ["a"]
    assert choose_at_deploy(cands, budget=0) == []


def test_due_pages_are_chosen_whatever_their_chance_likeliest_first():
    cands = [DeployCandidate(0.01, "quiet", due=True), DeployCandidate(0.02, "skipped"), DeployCandidate(0.9, "hot")]
    assert choose_at_deploy(cands) == ["hot", "quiet"]
    assert choose_at_deploy(cands, budget=1) == ["hot"]


NEVER = [Visit(elapsed_s=1.0, changed=False)] * 30  # a page that never changed, one visit a deploy


@pytest.mark.parametrize(
    "visits, last_s, now_s, number, expect",
    [
        ([], 10.0, 10.5, 10, None),  # no deploy since its last visit
        (NEVER, 9.5, 10.5, 10, "turn"),  # one deploy, a quiet page: its turn decides
        (NEVER, 8.5, 10.5, 10, True),  # two deploys unvisited: due
        ([Visit(elapsed_s=1.0, changed=True)] * 30, 9.5, 10.5, 10, True),  # changes at every deploy: its chance
    ],
)
def test_deploy_candidate(visits, last_s, now_s, number, expect):
    deploys = [float(t) for t in range(1, 11)]
    got = deploy_candidate("https://h/p", visits, last_s, deploys, number, now_s)
    if expect is None:
        assert got is None
        return
    assert got is not None and got.url == "https://h/p"
    chosen = choose_at_deploy([got]) == ["https://h/p"]
    assert chosen is (on_turn("https://h/p", number) if expect == "turn" else True)
    if expect == "turn":
        assert got.chance < DEPLOY_THRESHOLD


@pytest.mark.parametrize(
    "visits, changed, expect",
    [
        (NEVER, True, True),  # a page that has not changed in 30 deploys changed: the deploy reached further
        (NEVER, False, False),  # it did not change: nothing learned of the deploy
        (NEVER, None, False),  # a first visit says nothing of a change
        ([Visit(elapsed_s=1.0, changed=True)] * 30, True, False),  # the page that changes at every deploy: its habit
    ],
)
def test_surprised(visits, changed, expect):
    deploys = [float(t) for t in range(1, 31)]
    cand = deploy_candidate("https://h/p", visits, 29.5, deploys, 30, 30.5)
    assert cand is not None and surprised(cand, changed) is expect


@given(st.text(min_size=1, max_size=40), st.integers(0, 10_000), st.integers(1, 5))
def test_each_page_has_one_turn_in_each_cycle(url, start, turn):
    assert sum(on_turn(url, n, turn) for n in range(start, start + turn)) == 1


@given(st.integers(0, 1000), st.sampled_from(["/a/", "/release-notes/", "/p?x=1"]))
def test_a_pages_turn_is_the_same_on_any_host_and_port(n, path):
    assert on_turn(f"http://127.0.0.1:8000{path}", n) is on_turn(f"https://docs.example{path}", n)


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=30, unique=True), st.integers(1, 40))
def test_a_page_that_never_changes_waits_at_most_the_turn_deploys(urls, n_deploys):
    """A static host's deploys one a second, pages visited as chosen (no budget): no page
    goes `DEPLOY_TURN` deploys without a visit."""
    hs = HostSchedule()
    last = dict.fromkeys(urls, 0.0)
    hist: dict[str, list[Visit]] = {u: [] for u in urls}
    for i in range(1, n_deploys + 1):
        now = float(i)
        hs = hs.with_deploy(now)
        cands = [c for u in urls if (c := deploy_candidate(u, hist[u], last[u], hs.deploys, hs.deploy_count, now))]
        for u in choose_at_deploy(cands):
            hist[u].append(Visit(elapsed_s=now - last[u], changed=False))
            last[u] = now
        assert all(now - t < DEPLOY_TURN for t in last.values())


def test_the_deploy_count_outlives_the_kept_deploys():
    hs = HostSchedule()
    for i in range(DEPLOYS_KEPT + 3):
        hs = hs.with_deploy(float(i))
    assert len(hs.deploys) == DEPLOYS_KEPT and hs.deploy_count == DEPLOYS_KEPT + 3
    assert schedules_from_json(schedules_to_json({"h": hs}))["h"].deploy_count == DEPLOYS_KEPT + 3
    old = hs.to_json()
    del old["deploy_count"]  # a state written before the count was kept: the kept deploys
    assert HostSchedule.from_json(old).deploy_count == DEPLOYS_KEPT


def test_schedule_round_trips_through_json_and_learns_static():
    hs = HostSchedule(signal=sig()).with_deploy(5.0)
    assert hs.deploy_mode and hs.deploys == (5.0,)
    back = schedules_from_json(schedules_to_json({"h": hs}))["h"]
    assert back == hs
    assert schedules_from_json("junk") == {} and HostSchedule.from_json(3) == HostSchedule()


def test_status_lines_say_static_dynamic_and_the_feed_trust():
    hs = {
        "a": HostSchedule(static=True, feed_kind="mkdocs").to_json(),
        "b": HostSchedule(static=False, feed_trusted=False, reason="https://b/x changed with no deploy seen").to_json(),
    }
    from sync.core.deploys import schedule_lines

    a, b = schedule_lines(hs)
    assert a.startswith("host a: static") and "mkdocs trusted" in a
    assert "dynamic" in b and "NOT trusted" in b and "https://b/x" in b
    assert schedule_lines(None) == []


def test_feed_urls_are_the_trusted_feeds_the_last_pass_found_one_per_host():
    from sync.core.deploys import HostSchedule, feed_urls, schedules_to_json

    raw = schedules_to_json(
        {
            "a.example": HostSchedule(feed_kind="mkdocs", feed_url="https://a.example/search/search_index.json"),
            "b.example": HostSchedule(
                feed_kind="sphinx", feed_url="https://b.example/searchindex.js", feed_trusted=False
            ),
            "c.example": HostSchedule(),
        }
    )
    assert feed_urls(raw) == ["https://a.example/search/search_index.json"]
    assert feed_urls(None) == [] and feed_urls({}) == []
