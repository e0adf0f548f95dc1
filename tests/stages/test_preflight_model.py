"""Preflight refuses a pass with another model than the collection's (exit 2, nothing
fetched or written), on the SQLite state and on the Qdrant state; without a record of the
last pass (a new state beside an existing collection) the points' own `embedder` says."""

from __future__ import annotations

import pytest

from embedders import HashEmbedder
from sync.errors import CollectionMismatchError
from tests.helpers import Harness, page_html, para

OTHER = HashEmbedder(16, model_id="fake-other-model")  # the same size, another model


def build(site, n=2):
    for i in range(n):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}") for j in range(2)]))


@pytest.fixture(params=["sqlite", "qdrant"])
def h(request, site, tmp_path):
    return Harness(site, tmp_path, state=request.param)


def _refused(h, site, **kw) -> str:
    before = h.points()
    site.clear_log()
    with pytest.raises(CollectionMismatchError) as info:
        h.run(**kw)
    assert site.requests == []  # nothing fetched
    assert h.points() == before  # nothing written
    line = str(info.value)
    assert "\n" not in line
    return line


def test_another_model_of_the_same_size_is_refused(site, h):
    build(site)
    h.run()
    line = _refused(h, site, embedder=OTHER)
    assert "'fake-hash-16'" in line and "'fake-other-model'" in line
    assert "pagesync reindex --embedder fake-other-model" in line and "--embedder fake-16" in line


def test_another_vector_size_is_refused_pointing_at_reindex(site, h):
    build(site)
    h.run()
    line = _refused(h, site, embedder=HashEmbedder(32), full=True)
    assert "16-dimensional vectors (of 'fake-hash-16')" in line
    assert "`pagesync reindex --embedder fake-32`" in line and "run --full" not in line


def test_a_new_state_beside_the_collection_reads_the_model_from_the_points(site, h, tmp_path):
    build(site)
    h.run()
    if h.state_kind == "qdrant":
        store = h.open_store()
        try:
            with h.open_state(store) as st:
                st.clear()  # pages and run history gone: no record says which model
        finally:
            store.close()
        fresh = {}
    else:
        fresh = {"state_path": tmp_path / "fresh.db"}
    line = _refused(h, site, embedder=OTHER, **fresh)
    assert "holds vectors of 'fake-hash-16'" in line


def test_the_same_model_goes_on(site, h):
    build(site)
    h.run()
    assert h.run(embedder=HashEmbedder(16)).pages_failed == 0


def test_another_model_of_the_same_size_is_refused_with_full_too(site, h):
    """--full re-embeds every page it keeps, yet switches no model: applications embed their
    queries with the collection's model, and `reindex` is the switch."""
    build(site)
    h.run()
    line = _refused(h, site, embedder=OTHER, full=True)
    assert "'fake-hash-16'" in line and "pagesync reindex --embedder fake-other-model" in line


def test_a_collection_without_points_pins_no_model_and_is_made_anew_at_the_first_write(site, h):
    """An empty collection of another vector size (left by an earlier version) is no model to
    keep: a dry run goes on and changes nothing, a pass drops it and makes it for its embedder."""
    store = h.open_store()
    try:
        store.ensure_collection(384)
    finally:
        store.close()
    build(site)
    h.run(embedder=HashEmbedder(8), dry_run=True)
    store = h.open_store()
    try:
        assert store.vector_size() == 384
    finally:
        store.close()
    rep = h.run(embedder=HashEmbedder(8))
    assert rep.pages_added == 2 and rep.pages_failed == 0
    store = h.open_store()
    try:
        assert store.vector_size() == 8
        assert {p.payload["embedder"] for p in store.scroll()} == {"fake-hash-8"}
    finally:
        store.close()


def test_a_pass_that_writes_nothing_creates_no_collection(site, h):
    h.run(sitemaps=[site.server.url("/missing.xml")])  # a 404: a sitemap error, nothing written
    store = h.open_store()
    try:
        assert not store.exists()
    finally:
        store.close()
