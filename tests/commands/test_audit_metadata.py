"""Points written before they carried a `metadata` object: the audit finds them, and
`audit --fix` sets it from each point's own payload in place (no fetch, no embedding, the
vector kept), on the embedded store and on qdrant-client alike."""

from __future__ import annotations

import pytest

from sync.commands.audit import audit_collection, run_audit
from sync.edges.store import StoredPoint
from tests.helpers import page_html, para


def build_site(site, n=3):
    for i in range(n):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}", 80) for j in range(3)]))


def written_before_metadata(harness) -> tuple[dict, dict]:
    """Index the site, then rewrite every point as it was before points carried `metadata`
    (same ids, payload minus `metadata`, same vectors). Returns the clean points and vectors."""
    harness.run()
    clean, vectors = harness.points_and_vectors()
    store = harness.open_store()
    try:
        store.delete_points(list(clean))
        store.upsert(
            [
                StoredPoint(pid, {k: v for k, v in pl.items() if k != "metadata"}, vectors[pid])
                for pid, pl in clean.items()
            ]
        )
    finally:
        store.close()
    return clean, vectors


@pytest.mark.parametrize("harness", ["sqlite", "qdrant"], indirect=True)  # Edge + SQLite; qdrant-client + its state
def test_fix_sets_the_metadata_in_place_and_embeds_nothing(site, harness):
    build_site(site)
    clean, vectors = written_before_metadata(harness)
    assert all(pl["metadata"]["url"] == pl["url"] for pl in clean.values())
    site.clear_log()
    store = harness.open_store()
    try:
        with harness.open_state(store) as st:
            rep = audit_collection(store, st)
            assert not rep.ok and rep.counts["metadata"] == len(clean)
            assert sum(rep.counts.values()) == len(clean)  # nothing else is wrong
            assert sorted(rep.metadata_urls) == sorted({pl["url"] for pl in clean.values()})
            assert rep.reindex_urls == [] and rep.delete_ids == []
            assert "without a current metadata object" in rep.render()
            # No page is re-indexed: no embedder is made, so one that could not be is no matter.
            out, ok, text = run_audit(store, st, fix=True, embedder_name="no-such-embedder")
    finally:
        store.close()
    assert ok, text
    assert out["fix"]["metadata_pages"] == 3 and out["fix"]["reindexed_pages"] == 0 and out["fix"]["pass"] is None
    assert site.count() == 0  # nothing fetched
    points, after = harness.points_and_vectors()
    assert points == clean  # fetched_at included: the page was not written again
    assert after == vectors


def test_a_metadata_object_that_disagrees_with_its_point_is_found_and_set(site, harness):
    """A point whose `metadata` names another title or index than its own fields (a hand
    edit, another tool) is repaired the same way; the points around it are not touched."""
    build_site(site, n=1)
    harness.run()
    clean, vectors = harness.points_and_vectors()
    pid = sorted(clean)[0]
    store = harness.open_store()
    try:
        bad = {**clean[pid], "metadata": {**clean[pid]["metadata"], "chunk_index": 99}}
        store.upsert([StoredPoint(pid, bad, vectors[pid])])
        with harness.open_state(store) as st:
            rep = audit_collection(store, st)
            assert rep.counts["metadata"] == 1 and rep.examples["metadata"][0]["points"] == 1
            out, ok, text = run_audit(store, st, fix=True, embedder_name="fake")
    finally:
        store.close()
    assert ok, text
    assert harness.points() == clean


def test_an_export_of_points_without_metadata_imports_as_given_and_the_fix_adds_it(site, harness):
    """`import` writes points as given (an older backup keeps its payload); the audit then
    finds them and the fix gives them the object, their vectors as imported."""
    import io
    import json

    from sync.commands.transfer import export_points, import_points

    build_site(site, n=2)
    harness.run()
    clean, vectors = harness.points_and_vectors()
    store = harness.open_store()
    try:
        out = io.StringIO()
        export_points(store, out, with_vectors=True)
        old = [json.loads(line) for line in out.getvalue().splitlines()]
        for rec in old:
            assert rec["payload"].pop("metadata") == {
                k: rec["payload"][k] for k in ("url", "title", "chunk_id", "chunk_index", "fetched_at", "headings")
            }
        store.delete_points(list(clean))
        import_points(store, io.StringIO("".join(json.dumps(r) + "\n" for r in old)))
        assert all("metadata" not in p.payload for p in store.scroll())
        with harness.open_state(store) as st:
            assert audit_collection(store, st).counts["metadata"] == len(clean)
            out_, ok, text = run_audit(store, st, fix=True)
    finally:
        store.close()
    assert ok, text
    points, after = harness.points_and_vectors()
    assert points == clean and after == vectors
