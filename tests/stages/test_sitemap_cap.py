"""The URLs behind the sitemaps of a pass are capped in all (`max_sitemap_urls`): past the
cap the walk stops with a sitemap error and nothing is removed; a stamp shared by many
URLs is kept once."""

from __future__ import annotations

import asyncio

import pytest

from sync.errors import ConfigError
from sync.engine import PassConfig
from sync.core.sitemaps import MAX_TOTAL_SITEMAP_URLS, collect_sitemaps
from tests.helpers import page_html, para

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(urls, lastmod="2026-01-02"):
    return (
        f'<urlset xmlns="{NS}">'
        + "".join(f"<url><loc>{u}</loc><lastmod>{lastmod}</lastmod></url>" for u in urls)
        + "</urlset>"
    ).encode()


def index(children):
    return (
        f'<sitemapindex xmlns="{NS}">'
        + "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in children)
        + "</sitemapindex>"
    ).encode()


def files(n_files=3, per_file=3):
    out = {"https://e.com/sitemap.xml": index([f"https://e.com/s{f}.xml" for f in range(n_files)])}
    for f in range(n_files):
        out[f"https://e.com/s{f}.xml"] = urlset([f"https://e.com/{f}/{i}" for i in range(per_file)])
    return out


def collect(responses, **kw):
    asked = []

    async def fetch(url):
        asked.append(url)
        return responses[url], len(responses[url])

    return asyncio.run(collect_sitemaps(["https://e.com/sitemap.xml"], fetch, **kw)), asked


def test_past_the_cap_the_walk_stops_with_an_error():
    out, asked = collect(files(), max_urls=5)
    assert len(out.entries) == 5 and not out.complete
    ((where, err),) = out.errors
    assert where == "https://e.com/s1.xml" and "more than 5 URLs in all" in err and "nothing is removed" in err
    assert "https://e.com/s2.xml" not in asked  # no further file is read


def test_at_the_cap_all_is_well():
    out, _ = collect(files(), max_urls=9)
    assert len(out.entries) == 9 and out.complete
    assert MAX_TOTAL_SITEMAP_URLS == 500_000


def test_a_shared_stamp_is_one_string():
    out, _ = collect(files(n_files=2, per_file=50))
    assert len({id(v) for v in out.entries.values()}) == 1


def test_the_cap_must_be_positive():
    with pytest.raises(ConfigError):
        PassConfig(sitemaps=["https://e.com/sitemap.xml"], max_sitemap_urls=0).check()


def test_a_pass_over_the_cap_reports_a_sitemap_error_and_purges_nothing(site, harness):
    for i in range(4):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}")]))
    assert harness.run().pages_added == 4
    rep = harness.run(max_sitemap_urls=2, full=True)
    assert rep.sitemap_errors == 1 and rep.pages_removed == 0 and not rep.ok
    assert any("more than 2 URLs in all" in e["error"] for e in rep.to_dict()["errors"])
    assert len({p["url"] for p in harness.points().values()}) == 4
