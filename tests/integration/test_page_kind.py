"""Every point says whether its page is a guide or an API reference, as its markup tells,
and keeps saying it right when the markup alone changes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from chunking import GUIDE, REFERENCE

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent.parent / "chunking" / "fixtures"


def kinds(h) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in h.points().values():
        out.setdefault(p["url"].removeprefix(h.site.base_url), set()).add(p["page_kind"])
    return out


def state_kinds(h) -> dict[str, str | None]:
    store = h.open_store()
    with h.open_state(store) as st:
        try:
            return {p.url.removeprefix(h.site.base_url): p.page_kind for p in st.all_pages()}
        finally:
            store.close()


@pytest.mark.parametrize("harness", ["sqlite", "qdrant"], indirect=True)
def test_a_reference_page_is_told_from_a_guide_and_its_markup_alone_can_change_that(site, harness):
    api = (FIXTURES / "sphinx-api.html").read_text()
    site.set("/api.html", api)
    site.set("/options.html", (FIXTURES / "sphinx-options.html").read_text())
    rep = harness.run()
    assert rep.ok and rep.pages_added == 2, rep.errors
    assert kinds(harness) == {"/api.html": {REFERENCE}, "/options.html": {GUIDE}}
    assert state_kinds(harness) == {"/api.html": REFERENCE, "/options.html": GUIDE}

    # The same text, no longer marked as API entries (a theme that drops Sphinx's classes):
    # the text's hash is unchanged, the page is rewritten with its vectors reused.
    site.set("/api.html", api.replace("sig-object", "sig-signature"))
    rep = harness.run(advance=timedelta(days=30), full=True)
    assert rep.ok, rep.errors
    changed = {c["url"].removeprefix(site.base_url): c["reason"] for c in rep.changes if c["action"] == "changed"}
    assert changed == {"/api.html": "page kind changed"}
    assert rep.chunks_embedded == 0
    assert kinds(harness) == {"/api.html": {GUIDE}, "/options.html": {GUIDE}}
    assert state_kinds(harness)["/api.html"] == GUIDE

    rep = harness.run(advance=timedelta(days=30), full=True)  # nothing changed: nothing written
    assert rep.ok and rep.pages_changed == 0 and rep.pages_unchanged + rep.pages_not_modified == 2
