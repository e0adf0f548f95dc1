"""`--policy deploys` through real passes against the local site: a static site is visited
at its deploys only, a MkDocs search index says which page changed, and a change the feed
did not show turns the feed off for the host."""

from __future__ import annotations

import json
from datetime import timedelta

from tests.helpers import Harness, page_html, para

FEED = "/search/search_index.json"
PAGES = [f"/p{i}.html" for i in range(6)]


def build(site, texts: dict[str, str], feed: bool = True, feed_texts: dict[str, str] | None = None) -> None:
    for path, text in texts.items():
        site.set(path, page_html(path, [text]))
    if feed:
        shown = {**texts, **(feed_texts or {})}
        docs = [{"location": p.lstrip("/"), "title": p, "text": t} for p, t in shown.items()]
        site.set(FEED, json.dumps({"config": {}, "docs": docs}), content_type="application/json")


def requests(site) -> list[str]:
    paths = [p for _, p, _, _ in site.requests if not p.startswith("/sitemap") and p != "/robots.txt"]
    site.clear_log()
    return paths


def texts(tag: str = "") -> dict[str, str]:
    return {p: para(p + tag) for p in PAGES}


def test_a_feed_names_the_one_changed_page(site, tmp_path):
    h = Harness(site, tmp_path)
    build(site, texts())
    first = h.run(policy="deploys")
    assert first.feed == "mkdocs" and first.feed_trusted is True and first.pages_added == len(PAGES)
    requests(site)
    quiet = h.run(policy="deploys", advance=timedelta(hours=6))
    assert requests(site) == [FEED] and quiet.pages_due_by_feed == 0 and not quiet.deploy_seen
    edited = {**texts(), "/p3.html": para("edited")}
    build(site, edited)
    rep = h.run(policy="deploys", advance=timedelta(hours=6))
    assert requests(site) == [FEED, "/p3.html"]
    assert rep.pages_due_by_feed == 1 and rep.pages_changed == 1 and rep.deploy_seen and rep.feed_trusted


def test_a_change_the_feed_missed_turns_it_off(site, tmp_path):
    h = Harness(site, tmp_path)
    build(site, texts())
    h.run(policy="deploys")
    # the page changes, its feed text does not (and the sitemap's lastmod moves: a deploy)
    build(site, {**texts(), "/p1.html": para("silent")}, feed_texts={"/p1.html": texts()["/p1.html"]})
    h.run(policy="deploys", advance=timedelta(hours=6), full=True)
    rep = h.run(policy="deploys", advance=timedelta(hours=6))
    assert rep.feed_trusted is False or rep.feed is None
    assert rep.host_schedule and not next(iter(rep.host_schedule.values()))["feed_trusted"]


def test_a_static_site_with_no_feed_is_left_alone_between_deploys(site, tmp_path):
    h = Harness(site, tmp_path)
    build(site, texts(), feed=False)
    h.run(policy="deploys")
    h.now += timedelta(days=4)  # the deploy is stamped at its time
    build(site, {**texts(), "/p0.html": para("first deploy")}, feed=False)
    dep = h.run(policy="deploys")  # due by change-rate's 3 d; a deploy seen
    assert dep.deploy_seen and dep.feed is None
    requests(site)
    for _ in range(8):  # two days without a deploy
        rep = h.run(policy="deploys", advance=timedelta(hours=6))
        assert not rep.deploy_seen
    assert requests(site) == []  # the feed was looked for at the first pass only
    h.now += timedelta(hours=6)
    build(site, {**texts(), "/p0.html": para("first deploy"), "/p5.html": para("second deploy")}, feed=False)
    rep = h.run(policy="deploys")
    assert rep.deploy_seen and "/p5.html" in requests(site) and rep.pages_changed == 1


def test_with_a_crawl_the_pages_the_feed_names_and_no_link_reaches_are_visited(site, tmp_path):
    h = Harness(site, tmp_path)
    build(site, texts())
    site.set("/index.html", page_html("/index.html", [para("home")], nav=["P0.html"]))
    site.set(
        "/orphan.html", page_html("/orphan.html", [para("orphan")], nav=["P1.html"]), in_sitemap=False
    )  # the feed names it
    site.set(
        "/hidden.html", page_html("/hidden.html", [para("hidden")], nav=["P1.html"]), in_sitemap=False
    )  # nothing names it
    docs = [
        {"location": p.lstrip("/"), "title": p, "text": t} for p, t in {**texts(), "/orphan.html": "orphan"}.items()
    ]
    site.set(FEED, json.dumps({"config": {}, "docs": docs}), content_type="application/json")
    rep = h.run(policy="deploys", crawl=[site.server.url("/index.html")])
    seen = requests(site)
    assert "/orphan.html" in seen and "/hidden.html" not in seen
    assert any(str(p.get("url", "")).endswith("/orphan.html") for p in h.points().values())
    assert rep.feed == "mkdocs"
    for _ in range(2):  # complete crawls that do not link it: the feed still reaches it, it stays
        h.run(policy="deploys", crawl=[site.server.url("/index.html")], advance=timedelta(days=4))
    assert any(str(p.get("url", "")).endswith("/orphan.html") for p in h.points().values())


def test_a_generator_tag_sends_the_next_pass_to_that_kinds_feed_before_the_weekly_recheck(site, tmp_path):
    h = Harness(site, tmp_path)
    tagged = {
        p: page_html(p, [t]).replace("<head>", "<head><meta name='generator' content='mkdocs-1.6.1'>")
        for p, t in texts().items()
    }
    for path, html in tagged.items():
        site.set(path, html)
    first = h.run(policy="deploys")  # no feed yet: every kind is looked for once
    assert first.feed is None and next(iter(first.host_schedule.values()))["generator"] == "mkdocs"
    docs = [{"location": p.lstrip("/"), "title": p, "text": t} for p, t in texts().items()]
    site.set(FEED, json.dumps({"config": {}, "docs": docs}), content_type="application/json")
    requests(site)
    rep = h.run(policy="deploys", advance=timedelta(hours=6))  # within the week: looked for as mkdocs's only
    assert rep.feed == "mkdocs" and requests(site) == [FEED]


def test_with_no_feed_each_quiet_page_is_visited_at_least_every_second_deploy(site, tmp_path):
    h = Harness(site, tmp_path)
    site.sitemap_mode = "same-lastmod"  # the deploy's date on every URL: it says nothing of the page
    site.same_lastmod_at = h.now.timestamp()
    build(site, texts(), feed=False)
    h.run(policy="deploys")
    h.now += timedelta(days=4)
    site.same_lastmod_at = h.now.timestamp()
    build(site, texts(" deploy 0"), feed=False)
    h.run(policy="deploys")  # the first deploy seen: the host is static from now on
    seen: list[set[str]] = []
    for i in range(1, 10):
        h.now += timedelta(days=1)
        site.same_lastmod_at = h.now.timestamp()  # each deploy stamped at its time: every lastmod moves
        site.set("/p0.html", page_html("/p0.html", [para(f"/p0.html deploy {i}")]))  # one page changes each time
        for p in PAGES[1:]:
            site.set(p, page_html(p, [texts(" deploy 0")[p]]))
        requests(site)
        rep = h.run(policy="deploys")
        assert rep.deploy_seen
        seen.append(set(requests(site)))
    assert all("/p0.html" in s for s in seen[2:])  # it changes at every deploy: its chance says so
    for a, b in zip(seen, seen[1:]):  # no quiet page waits two deploys
        assert set(PAGES) <= a | b
    assert any(len(s) < len(PAGES) for s in seen[2:])  # but not every page at every deploy


def test_a_deploy_that_changes_a_page_on_its_turn_sends_the_pass_to_the_hosts_other_pages(site, tmp_path):
    h = Harness(site, tmp_path)
    site.sitemap_mode = "same-lastmod"
    site.same_lastmod_at = h.now.timestamp()
    build(site, texts(), feed=False)
    h.run(policy="deploys")
    h.now += timedelta(days=4)
    site.same_lastmod_at = h.now.timestamp()
    build(site, texts(" deploy 0"), feed=False)
    h.run(policy="deploys")
    for i in range(1, 6):  # deploys that change /p0.html alone
        h.now += timedelta(days=1)
        site.same_lastmod_at = h.now.timestamp()
        site.set("/p0.html", page_html("/p0.html", [para(f"/p0.html deploy {i}")]))
        requests(site)
        rep = h.run(policy="deploys")
        got = set(requests(site)) & set(PAGES)
    # past the prior's first deploys, a deploy that changes only the page that always changes: a share
    assert len(got) < len(PAGES) and rep.pages_due_by_deploy < len(PAGES) and rep.pages_changed == 1
    h.now += timedelta(days=1)
    site.same_lastmod_at = h.now.timestamp()
    for p in PAGES:  # a deploy that rewrites every page's text
        site.set(p, page_html(p, [para(f"{p} rewritten")]))
    requests(site)
    rep = h.run(policy="deploys")
    got = set(requests(site)) & set(PAGES)
    assert got == set(PAGES) and rep.pages_changed == len(PAGES)
    assert rep.pages_due_by_deploy == len(PAGES)
    stored = " ".join(str(p["text"]) for p in h.points().values())
    assert all(f"{p.lstrip('/')} rewritten" in stored for p in PAGES)
