"""Host aliases: a redirect a site applies to every page (a trailing slash, another name of
the host, http -> https) settles on one key per page, the redirect's target, with nothing
embedded again and no mass-deletion guard in the way."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from sync.errors import ConfigError
from tests.helpers import page_html, para

pytestmark = pytest.mark.integration

N = 6  # above the guard's minimum (5): a pass moving every page would trip a guard counting moves


def keys(h) -> dict[str, int]:
    """url -> its number of points."""
    out: dict[str, int] = {}
    for p in h.points().values():
        out[p["url"]] = out.get(p["url"], 0) + 1
    return out


def content(i: int) -> str:
    return page_html(f"Page {i}", [para(f"p{i}-s{j}") for j in range(3)])


def test_a_trailing_slash_redirect_on_every_listed_page_settles_on_the_targets(site, harness):
    for i in range(N):
        site.set(f"/p{i}/", content(i), in_sitemap=False)
        site.redirect(f"/p{i}", f"/p{i}/")
    site.set(
        "/map.xml",
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{site.server.url(f'/p{i}')}</loc></url>" for i in range(N))
        + "</urlset>",
        content_type="application/xml",
    )
    sitemaps = [site.server.url("/map.xml")]
    rep = harness.run(sitemaps=sitemaps)
    assert rep.ok, rep.errors
    assert rep.pages_added == N and rep.pages_removed == 0 and rep.mass_delete_blocked == 0
    first = keys(harness)
    assert set(first) == {site.server.url(f"/p{i}/") for i in range(N)}
    rep = harness.run(advance=timedelta(days=10), full=True, sitemaps=sitemaps)
    assert rep.ok and rep.chunks_embedded == 0 and rep.pages_removed == 0 and rep.pages_added == 0
    assert keys(harness) == first


@pytest.mark.parametrize("sitemap_lists", ["old names", "both names"])
def test_a_site_that_starts_redirecting_every_page_moves_without_a_re_embed(site, harness, sitemap_lists):
    for i in range(N):
        site.set(f"/p{i}.html", content(i))
    rep = harness.run()
    assert rep.ok and rep.pages_added == N
    before = keys(harness)
    chunks = sum(before.values())
    # Every page moves to a new key; the sitemap lists the old names (stale) or both.
    for i in range(N):
        site.set(f"/p{i}/", content(i), in_sitemap=sitemap_lists == "both names")
        site.redirect(f"/p{i}.html", f"/p{i}/")
        site.resources[f"/p{i}.html"].in_sitemap = True
    rep = harness.run(advance=timedelta(days=10), full=True)
    assert rep.ok, rep.errors
    assert rep.mass_delete_blocked == 0 and rep.pages_removed == N and rep.pages_added == N
    assert rep.chunks_embedded == 0 and rep.chunks_reused == chunks
    after = keys(harness)
    assert set(after) == {site.server.url(f"/p{i}/") for i in range(N)}  # one key per page
    assert sorted(after.values()) == sorted(before.values())
    rep = harness.run(advance=timedelta(days=10), full=True)
    assert rep.ok and rep.chunks_embedded == 0 and rep.pages_removed == 0 and keys(harness) == after


def test_a_move_to_another_name_of_the_host_needs_allow_host_then_settles(site, harness):
    port = site.base_url.rsplit(":", 1)[1]
    for i in range(N):
        site.set(f"/p{i}.html", content(i))
    assert harness.run().pages_added == N
    before = keys(harness)
    for i in range(N):  # the site now answers under another name of the host (www -> apex, say)
        site.resources[f"/q{i}.html"] = dataclasses.replace(site.resources[f"/p{i}.html"], in_sitemap=False)
        site.redirect(f"/p{i}.html", f"http://localhost:{port}/q{i}.html")
        site.resources[f"/p{i}.html"].in_sitemap = True
    rep = harness.run(advance=timedelta(days=10), full=True)
    assert rep.pages_failed == N and rep.pages_removed == 0 and keys(harness) == before
    assert f"host localhost:{port} is not one of the configured sites (use --allow-host)" in rep.errors[0]["error"]
    rep = harness.run(advance=timedelta(days=10), full=True, allow_hosts=[f"localhost:{port}"])
    assert rep.ok, rep.errors
    assert rep.chunks_embedded == 0 and rep.pages_removed == N
    assert set(keys(harness)) == {f"http://localhost:{port}/q{i}.html" for i in range(N)}


def test_a_sitemap_on_another_name_of_the_host_is_a_clear_error_or_with_allow_host_works(site, harness):
    """--sitemap by one name (localhost), <loc>s by another (127.0.0.1): exit 2 with the
    --allow-host advice, nothing fetched; with --allow-host the pages are indexed by the
    names the sitemap gives."""
    port = site.base_url.rsplit(":", 1)[1]
    for i in range(2):
        site.set(f"/p{i}.html", content(i))
    by_other_name = [f"http://localhost:{port}/sitemap.xml"]
    with pytest.raises(
        ConfigError, match=rf"every URL the sitemaps list is out of scope .*--allow-host 127.0.0.1:{port}"
    ):
        harness.run(sitemaps=by_other_name)
    assert [p for _, p, _, _ in site.requests if p.endswith(".html")] == []
    rep = harness.run(sitemaps=by_other_name, allow_hosts=[f"127.0.0.1:{port}"])
    assert rep.ok and rep.pages_added == 2
    assert set(keys(harness)) == {site.server.url(f"/p{i}.html") for i in range(2)}
