"""The repairs read pages as `run` does: `audit --fix` and `reindex` extract a page with its
site's --select, send its --header fields to its own hosts, and leave the fingerprints a
pass under the same rules expects (it then embeds nothing and fetches conditionally).
The rules come from the configuration file (top-level keys and [[site]] tables), as run's."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta

import pytest

from chunking import EXTRACTOR_ID, Splitter
from embedders import HashEmbedder
from sync.commands.audit import audit_collection, run_audit
from sync.core.ids import chunk_id, point_id
from sync.core.site_rules import SiteRules, SiteRuleSet, page_fingerprint
from sync.edges.state import StateDB
from sync.edges.edge_store import EdgeStore
from tests.cli_helpers import cli, sitemap, stored
from tests.helpers import para, reindex, without_fetched_at

pytestmark = pytest.mark.integration

SECRET = "Bearer repair-token-value"
CSS = "div.col-b"
EMB32 = HashEmbedder(32)


def themed(title: str, text: str) -> str:
    """A page whose content only the selector finds: a sidebar no landmark marks."""
    return (
        f"<html><head><title>{title}</title></head><body><div class='col-a'><p>{para('sidebar ' + title)}</p>"
        f"</div><div class='col-b'><p>{text}</p></div></body></html>"
    )


def private_site(site, n: int = 3) -> list[str]:
    """`n` themed pages behind a bearer token: every request without it gets 401."""
    for i in range(n):
        site.set(f"/p{i}.html", themed(f"Page {i}", para(f"content {i}", 80)))
    site.required_headers = {"Authorization": SECRET}
    return [site.server.url(f"/p{i}.html") for i in range(n)]


RULES = SiteRuleSet(SiteRules(select=CSS, headers=(("Authorization", SECRET),)))


def lose_chunk(h, url: str, index: int = 0) -> None:
    store = EdgeStore(h.store_path, "pages")
    try:
        store.delete_points([point_id(chunk_id(url, index))])
    finally:
        store.close()


def comparable(points: dict[str, dict]) -> dict[str, dict]:
    return {pid: without_fetched_at(p) for pid, p in points.items()}


def texts_of(h, url: str) -> str:
    return " ".join(p["text"] for p in h.points().values() if p["url"] == url)


def fix(h, rules):
    store = EdgeStore(h.store_path, "pages")
    try:
        with StateDB(h.state_path) as st:
            return run_audit(store, st, fix=True, embedder_name="fake", site_rules=rules)
    finally:
        store.close()


def fingerprints(h) -> set[str]:
    with StateDB(h.state_path) as st:
        return {p.fingerprint for p in st.all_pages()}


# -- audit --fix --------------------------------------------------------------------------------
def test_audit_fix_repairs_a_private_site_with_its_headers_and_selector(site, harness):
    harness.splitter = Splitter()  # the repair pass chunks with the CLI's settings
    urls = private_site(site)
    assert harness.run(site_rules=RULES).pages_added == 3
    clean = harness.points()
    lose_chunk(harness, urls[1])

    # Without the rules the repair is refused by the site (401) and the page stays broken.
    out, ok, _ = fix(harness, None)
    assert not ok and out["fix"]["pass"]["pages_failed"] == 1

    site.clear_log()
    out, ok, text = fix(harness, RULES)
    assert ok, text
    assert out["fix"]["reindexed_pages"] == 1 and out["fix"]["pass"]["pages_failed"] == 0
    assert {h.get("authorization") for _, _, _, h in site.requests} == {SECRET}
    assert comparable(harness.points()) == comparable(clean)
    assert "sidebar" not in texts_of(harness, urls[1]) and "content 1" in texts_of(harness, urls[1])
    # The repaired page's fingerprint is the one a pass with the selector records: nothing to redo.
    assert fingerprints(harness) == {
        page_fingerprint(harness.embedder.model_id, EXTRACTOR_ID, harness.splitter.settings, CSS)
    }
    nxt = harness.run(advance=timedelta(days=10), full=True, site_rules=RULES)
    assert (nxt.pages_not_modified, nxt.chunks_embedded) == (3, 0)


def test_audit_fix_re_extracts_with_the_selector(site, harness):
    harness.splitter = Splitter()
    for i in range(2):
        site.set(f"/p{i}.html", themed(f"Page {i}", para(f"content {i}", 80)))
    rules = SiteRuleSet(SiteRules(select=CSS))
    harness.run(site_rules=rules)
    url = site.server.url("/p0.html")
    clean = harness.points()
    lose_chunk(harness, url)
    out, ok, text = fix(harness, rules)
    assert ok and out["fix"]["reindexed_pages"] == 1, text
    assert comparable(harness.points()) == comparable(
        clean
    )  # exactly the pass's points: the selector's text, not the sidebar's
    assert "sidebar" not in texts_of(harness, url)


# -- reindex ------------------------------------------------------------------------------------
def test_reindex_reuses_texts_of_select_pages_refetches_with_headers_and_the_next_run_embeds_nothing(site, harness):
    urls = private_site(site, n=4)
    harness.run(site_rules=RULES)
    with StateDB(harness.state_path) as st:
        st.drop_texts(urls[2:])  # p2: its old points serve; p3: re-fetched (a chunk lost too)
    lose_chunk(harness, urls[3])

    site.clear_log()
    rep = reindex(harness, EMB32, site_rules=RULES)
    assert rep.ok and rep.text_sources == {"state": 2, "points": 1, "fetch": 1}, rep.errors
    assert [(p, s, h.get("authorization")) for _, p, s, h in site.requests if p.endswith(".html")] == [
        ("/p3.html", 200, SECRET)
    ]
    assert "sidebar" not in texts_of(harness, urls[3]) and rep.pages_changed == 0
    assert fingerprints(harness) == {page_fingerprint(EMB32.model_id, EXTRACTOR_ID, harness.splitter.settings, CSS)}

    site.clear_log()
    nxt = harness.run(embedder=EMB32, advance=timedelta(days=10), full=True, site_rules=RULES)
    assert (nxt.chunks_embedded, nxt.chunks_written, nxt.pages_not_modified) == (0, 0, 4), nxt.errors
    assert {s for _, p, s, _ in site.requests if p.endswith(".html")} == {304}


def test_reindex_reads_again_a_kept_text_extracted_without_the_selector_now_configured(site, harness):
    for i in range(2):
        site.set(f"/p{i}.html", themed(f"Page {i}", para(f"content {i}", 80)))
    harness.run()  # no selector yet: the sidebar is part of the text
    assert "sidebar" in texts_of(harness, site.server.url("/p0.html"))
    rep = reindex(harness, EMB32, site_rules=SiteRuleSet(SiteRules(select=CSS)))
    assert rep.ok and rep.text_sources == {"state": 0, "points": 0, "fetch": 2} and rep.pages_changed == 2
    assert all("sidebar" not in p["text"] for p in harness.points().values())
    nxt = harness.run(
        embedder=EMB32, advance=timedelta(days=10), full=True, site_rules=SiteRuleSet(SiteRules(select=CSS))
    )
    assert (nxt.chunks_embedded, nxt.pages_not_modified) == (0, 2)


# -- the configuration file -----------------------------------------------------------------------
@pytest.mark.slow  # the command line as subprocesses
def test_audit_fix_and_reindex_take_the_rules_of_pagesync_toml(site, work):
    urls = private_site(site)
    site.required_headers["X-Docs"] = "private"
    (work / "pagesync.toml").write_text(
        'qdrant_path = "q"\nstate = "s.db"\nembedder = "fake"\n'
        f'select = "{CSS}"\nheader = ["Authorization: env:DOCS_TOKEN"]\n\n'
        f'[[site]]\nsitemap = "{sitemap(site)}"\nheader = ["X-Docs: private"]\n'
    )
    env = {"DOCS_TOKEN": SECRET}
    r = cli(work, "run", env=env)
    assert r.returncode == 0, r.stderr
    clean = stored(work)

    store = EdgeStore(work / "q", "pages")
    store.delete_points([point_id(chunk_id(urls[0], 0))])
    store.close()
    r = cli(work, "audit", "--fix", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["fix"]["reindexed_pages"] == 1
    assert comparable(stored(work)) == comparable(clean)

    db = sqlite3.connect(str(work / "s.db"))
    db.execute("DELETE FROM page_texts WHERE url = ?", (urls[0],))
    db.commit()
    db.close()
    store = EdgeStore(work / "q", "pages")
    store.delete_points([point_id(chunk_id(urls[0], 0))])  # its old points unusable: re-fetched
    store.close()
    site.clear_log()
    r = cli(work, "reindex", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["text_sources"] == {"state": 2, "points": 0, "fetch": 1}
    assert {(h.get("authorization"), h.get("x-docs")) for _, _, _, h in site.requests} == {(SECRET, "private")}

    r = cli(work, "run", "--full", "--report", "rep.json", env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "rep.json").read_text())
    assert (rep["chunks_embedded"], rep["pages_not_modified"]) == (0, 3)
    store = EdgeStore(work / "q", "pages")
    try:
        with StateDB(work / "s.db") as st:
            assert audit_collection(store, st).ok
    finally:
        store.close()


def test_a_reindex_with_a_selector_no_css_parser_reads_is_a_config_error_reading_nothing(site, harness):
    from sync.errors import ConfigError

    site.set("/p0.html", themed("Page 0", para("content 0", 80)))
    harness.run()
    site.clear_log()
    with pytest.raises(ConfigError, match="not a CSS selector"):
        reindex(harness, EMB32, site_rules=SiteRuleSet(SiteRules(select="div[")))
    assert site.requests == [] and [p.name for p in harness.store_path.iterdir()] == ["pages"]
