"""--select across passes: a new selector re-extracts every page it applies to (no 304
shortcut), unchanged texts keep their vectors, and a page it matches nothing on fails and
keeps its points."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sync.core.site_rules import SiteRules, SiteRuleSet
from tests.helpers import para

pytestmark = pytest.mark.integration

SIDEBAR = "<div class='col-a'><p>{}</p></div>"


def themed(title: str, text: str, *, main: bool = False) -> str:
    """A page whose sidebar no landmark marks; `main`: its content is a <main> as well."""
    tag = "main" if main else "div"
    return (
        f"<html><head><title>{title}</title></head><body>{SIDEBAR.format(para('sidebar ' + title))}"
        f"<{tag} class='col-b'><p>{text}</p></{tag}></body></html>"
    )


def select(css: str | None) -> SiteRuleSet:
    return SiteRuleSet(SiteRules(select=css))


def texts(h) -> str:
    return " ".join(p["text"] for p in h.points().values())


def statuses(site) -> dict[str, int]:
    return {p: s for _, p, s, _ in site.requests if p.endswith(".html")}


def test_a_new_selector_re_extracts_and_reuses_equal_texts(site, harness):
    site.set("/a.html", themed("A", para("content a")))
    site.set("/b.html", themed("B", para("content b"), main=True))  # <main> already picks the content
    rep = harness.run()
    assert rep.ok and rep.pages_added == 2 and "sidebar A" in texts(harness) and "sidebar B" not in texts(harness)

    site.clear_log()
    rep = harness.run(advance=timedelta(days=10), full=True, site_rules=select("div.col-b, main.col-b"))
    assert rep.ok, rep.errors
    assert statuses(site) == {"/a.html": 200, "/b.html": 200}  # read again whatever the validators say
    assert rep.pages_changed == 2  # a: new text; b: same text under another pipeline
    assert "sidebar" not in texts(harness) and "content a" in texts(harness)
    reasons = {c["url"].rsplit("/", 1)[1]: c for c in rep.changes}
    assert reasons["b.html"]["reused"] == reasons["b.html"]["chunks"]  # b's texts kept their vectors
    assert rep.chunks_embedded == reasons["a.html"]["chunks"] - reasons["a.html"]["reused"]

    site.clear_log()
    rep = harness.run(advance=timedelta(days=10), full=True, site_rules=select("div.col-b, main.col-b"))
    assert rep.ok and rep.pages_not_modified == 2 and rep.chunks_embedded == 0


def test_a_page_the_selector_matches_nothing_on_fails_and_keeps_its_points(site, harness):
    site.set("/a.html", themed("A", para("content a")))
    rules = select("div.col-b")
    assert harness.run(site_rules=rules).pages_added == 1
    before = harness.points()
    site.set("/a.html", f"<html><body><section><p>{para('redesigned')}</p></section></body></html>")
    rep = harness.run(advance=timedelta(days=10), full=True, site_rules=rules)
    assert rep.pages_failed == 1 and rep.pages_removed == 0
    assert rep.errors[0]["error"] == "extraction failed: --select 'div.col-b' matched no element of the page"
    assert harness.points() == before


def test_without_a_selector_the_fingerprint_is_the_one_pages_have_today(site, harness):
    """Turning the feature on in a release re-embeds nothing: no --select, no new fingerprint."""
    site.set("/a.html", themed("A", para("content a")))
    assert harness.run().pages_added == 1
    rep = harness.run(advance=timedelta(days=10), full=True, site_rules=select(None))
    assert rep.ok and rep.pages_not_modified == 1 and rep.pages_changed == 0
