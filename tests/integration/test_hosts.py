"""Several hosts in one pass, against real servers on 127.0.0.1 (two ports, two hosts): a
host that cannot take a request now (Crawl-delay, Retry-After, its per-host bound full)
holds no worker while another host's pages are ready."""

from __future__ import annotations

import pytest

from demo.site_server import Site, SiteServer
from tests.helpers import Harness, page_html, para

GAP = 3.0  # seconds host a makes the pass wait between its first two page requests


@pytest.fixture
def two_sites():
    """(a, b): two sites on two ports of 127.0.0.1; a's URLs sort first, so the pass queues a's
    pages (all new, visited in URL order) before b's."""
    sites = [Site(), Site()]
    with SiteServer(sites[0]) as s0, SiteServer(sites[1]) as s1:
        sites[0].server, sites[1].server = s0, s1  # type: ignore[attr-defined]
        yield sorted(sites, key=lambda s: s.base_url)


def html_times(site: Site) -> list[float]:
    """Server-side times of the site's page requests (robots.txt and sitemaps left out), in order."""
    return [t for (_, path, _, _), t in zip(site.requests, site.times) if path.endswith(".html")]


@pytest.mark.parametrize("why", ["crawl-delay", "retry-after", "slow"])
def test_a_waiting_host_holds_no_worker_while_another_hosts_pages_are_ready(two_sites, tmp_path, why):
    """Two workers, host a's three pages queued before host b's three. a cannot take its
    second request for GAP seconds: its Crawl-delay; or a 503 with that Retry-After on its
    first page; or (one request at a time per host) its first page takes that long to
    answer. Before, both workers sat in a's wait while b's pages waited behind them; now
    every b page is requested before a's second page. a's wait is kept all the same.
    (Server-side times; the margin is b's four requests against GAP seconds.)"""
    a, b = two_sites
    for site in (a, b):
        for i in range(3):
            site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"{site.base_url}-p{i}")]))
    per_host = 4
    if why == "crawl-delay":
        a.set("/robots.txt", f"User-agent: *\nCrawl-delay: {GAP:g}\n", content_type="text/plain")
    elif why == "retry-after":
        a.error("/p0.html", 503, headers={"Retry-After": f"{GAP:.0f}"})
        per_host = 1  # a's other pages wait behind the 503
    else:
        a.slow("/p0.html", GAP)
        per_host = 1
    rep = Harness(a, tmp_path).run(
        sitemaps=[a.server.url("/sitemap.xml"), b.server.url("/sitemap.xml")],
        workers=2,
        fetcher_kw={"per_host": per_host},
    )
    assert rep.pages_fetched == 6
    at, bt = html_times(a), html_times(b)
    assert len(at) == len(bt) == 3
    timeline = sorted([(t, "a") for t in at] + [(t, "b") for t in bt])
    assert max(bt) < at[1], f"b's pages waited for a's: {[(round(t - timeline[0][0], 2), h) for t, h in timeline]}"
    start = min(a.times[0], b.times[0])  # the pass's first request (a sitemap)
    assert at[1] - start >= GAP / 2  # a's wait was kept, not skipped (skipped, it is ~0)


def test_a_sitemap_entry_on_another_port_of_the_host_is_out_of_scope(two_sites, tmp_path):
    """Site a's sitemap lists a page of b, another port of the same 127.0.0.1: b is another
    site (a metrics endpoint, an admin app), never fetched nor indexed unless allowed."""
    a, b = two_sites
    a.set("/p0.html", page_html("Page 0", [para("a page")]))
    b.set("/secret.html", page_html("Secret", [para("admin text")]))
    a.set(
        "/map.xml",
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{a.server.url('/p0.html')}</loc></url>"
        f"<url><loc>{b.server.url('/secret.html')}</loc></url></urlset>",
        content_type="application/xml",
    )
    h = Harness(a, tmp_path)
    rep = h.run(sitemaps=[a.server.url("/map.xml")])
    assert rep.pages_out_of_scope == 1 and rep.pages_fetched == 1
    assert {p["url"] for p in h.points().values()} == {a.server.url("/p0.html")}
    assert b.requests == []
    port = b.server.url("/").split(":")[2].split("/")[0]
    rep = h.run(sitemaps=[a.server.url("/map.xml")], allow_hosts=[f"127.0.0.1:{port}"])
    assert rep.pages_out_of_scope == 0
    assert b.server.url("/secret.html") in {p["url"] for p in h.points().values()}
