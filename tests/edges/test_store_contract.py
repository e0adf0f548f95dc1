"""One contract suite for every `Store` backend.

Backends (the `store` fixture's params):
- "edge":   EdgeStore (Qdrant Edge, embedded; the default) in a tmp dir;
- "memory": ClientStore over qdrant-client's `:memory:` local mode;
- "server": ClientStore against a real Qdrant server: QDRANT_URL (+ QDRANT_API_KEY) when
  set, else a testcontainers Qdrant when Docker answers, else skipped with a hint.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import traceback
import uuid
from pathlib import Path

import pytest

from sync.errors import CollectionMismatchError, StoreError
from sync.core.hashing import reuse_key
from sync.core.ids import chunk_id, point_id
from sync.edges.edge_config import load_config
from sync.edges.store import INDEXED_FIELDS, PageWrite, StoredPoint
from sync.edges.client_store import ClientStore
from sync.edges.edge_store import EdgeStore

DIM = 4
A = "https://docs.example.com/a"
B = "https://docs.example.com/b"
C = "https://docs.example.com/c"


# -- fixtures ---------------------------------------------------------------------------------
# `qdrant_server` (a real server, or a skip saying how to get one) lives in tests/conftest.py: the
# Qdrant state's tests share it.


@pytest.fixture(params=["edge", "memory", pytest.param("server", marks=pytest.mark.server)])
def store(request, tmp_path):
    backend = request.param
    if backend == "edge":
        s = EdgeStore(tmp_path, "c")
    elif backend == "memory":
        s = ClientStore.connect(":memory:", "c")
    else:
        url, key = request.getfixturevalue("qdrant_server")
        s = ClientStore.connect(url, f"pagesync_test_{uuid.uuid4().hex[:12]}", api_key=key, timeout=10)
    s.backend = backend  # type: ignore[attr-defined]
    try:
        yield s
    finally:
        if backend == "server":
            with contextlib.suppress(Exception):
                s.client.delete_collection(s.collection)
        s.close()


@contextlib.contextmanager
def reopened(store):
    """A second Store object on the same collection (edge: after closing the first)."""
    if isinstance(store, EdgeStore):
        store.close()
        other = EdgeStore(store.dir.parent, store.collection)
        try:
            yield other
        finally:
            other.close()
    else:
        # Share the client: `:memory:` data lives in it, and closing it is the fixture's job.
        yield ClientStore(store.client, store.collection, api_key=store._secret)


# -- helpers ----------------------------------------------------------------------------------
def vec(seed: str, dim: int = DIM) -> list[float]:
    """Deterministic, deliberately NOT unit-length vector."""
    h = hashlib.sha256(seed.encode()).digest()
    v = [(b - 127.5) / 40.0 for b in h[:dim]]
    return v if any(abs(x) > 1e-3 for x in v) else [1.0] * dim


def unit(v) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def pt(url: str, i: int, *, hash_: str = "h1", text: str | None = None, vector=None) -> StoredPoint:
    cid = chunk_id(url, i)
    payload = {
        "url": url,
        "chunk_id": cid,
        "chunk_index": i,
        "content_hash": hashlib.sha256(f"{url}:{hash_}".encode()).hexdigest(),
        "text": text if text is not None else f"chunk {i} of {url} — ünïcode ✓",
        "title": f"Title of {url.rsplit('/', 1)[-1]}",
        "fetched_at": "2026-01-01T00:00:00+00:00",
        "embedder": "fake-hash-4",
    }
    return StoredPoint(point_id(cid), payload, list(vector) if vector is not None else vec(f"{url}#{i}#{hash_}"))


def page(url: str, n: int, **kw) -> list[StoredPoint]:
    return [pt(url, i, **kw) for i in range(n)]


def snapshot(store) -> dict[str, dict]:
    return {p.id: p.payload for p in store.scroll()}


def ids(points) -> set[str]:
    return {p.id for p in points}


def ids_of(store, url: str) -> set[str]:
    return {pid for pid, p in snapshot(store).items() if p["url"] == url}


def assert_close(a, b, tol=1e-5):
    assert a is not None and b is not None
    assert len(a) == len(b)
    assert all(abs(x - y) <= tol for x, y in zip(a, b)), (a, b)


# -- collection lifecycle -----------------------------------------------------------------------
def test_exists_is_false_until_ensure_collection_creates_it(store):
    assert store.exists() is False
    assert store.count() == 0
    assert list(store.scroll()) == []
    store.ensure_collection(DIM)
    assert store.exists() is True
    assert store.count() == 0
    assert list(store.scroll()) == []


def test_ensure_collection_is_idempotent_and_keeps_points(store):
    store.ensure_collection(DIM)
    store.upsert(page(A, 3))
    before = snapshot(store)
    store.ensure_collection(DIM)
    assert snapshot(store) == before
    with reopened(store) as again:
        again.ensure_collection(DIM)
        assert again.exists()
        assert snapshot(again) == before
        assert again.count() == 3


def test_ensure_collection_rejects_another_dimension_on_the_same_store(store):
    store.ensure_collection(DIM)
    store.upsert(page(A, 2))
    with pytest.raises(CollectionMismatchError):
        store.ensure_collection(DIM * 2)
    assert store.count() == 2


def test_ensure_collection_rejects_another_dimension_when_reopened(store):
    store.ensure_collection(DIM)
    store.upsert(page(A, 2))
    with reopened(store) as again:
        with pytest.raises(CollectionMismatchError) as ei:
            again.ensure_collection(DIM + 1)
        assert str(DIM) in str(ei.value) and str(DIM + 1) in str(ei.value)
        assert again.count() == 2


# -- replace / delete -------------------------------------------------------------------------
def test_replace_deletes_every_point_of_the_url_then_inserts(store):
    store.ensure_collection(DIM)
    old = page(A, 3)
    stray_tail = pt(A, 7)  # an extra chunk index left over from a longer version
    stray_id = StoredPoint(str(uuid.uuid4()), {**pt(A, 1).payload, "chunk_index": 1}, vec("stray"))  # same url, odd id
    store.upsert([*old, stray_tail, stray_id])
    assert store.count(A) == 5

    new = page(A, 2, hash_="h2")  # same ids as old chunks 0 and 1: deletes must come first
    deleted = store.replace_pages([PageWrite(A, new)])

    assert deleted == 5
    assert store.count(A) == 2
    got = snapshot(store)
    assert set(got) == ids(new)
    assert [got[p.id] for p in new] == [p.payload for p in new]
    assert {p["content_hash"] for p in got.values()} == {new[0].payload["content_hash"]}
    assert sorted(p["chunk_index"] for p in got.values()) == [0, 1]


def test_replace_of_a_page_with_no_points_yet_deletes_nothing(store):
    store.ensure_collection(DIM)
    deleted = store.replace_pages([PageWrite(A, page(A, 3))])
    assert deleted == 0
    assert store.count(A) == 3
    # replacing with identical points is a full rewrite: 3 deleted, 3 written back
    assert store.replace_pages([PageWrite(A, page(A, 3))]) == 3
    assert ids_of(store, A) == ids(page(A, 3))


def test_replacing_one_url_never_touches_another(store):
    store.ensure_collection(DIM)
    neighbours = [A + "/", A + "?lang=de", A.upper(), A + "/b", B]
    for u in neighbours:
        store.upsert(page(u, 2))
    store.upsert(page(A, 4))
    others_before = {pid: p for pid, p in snapshot(store).items() if p["url"] != A}
    assert len(others_before) == 2 * len(neighbours)

    assert store.replace_pages([PageWrite(A, page(A, 1, hash_="h2"))]) == 4

    after = snapshot(store)
    assert {pid: p for pid, p in after.items() if p["url"] != A} == others_before
    assert ids_of(store, A) == ids(page(A, 1))
    for u in neighbours:
        assert store.count(u) == 2


def test_replace_with_zero_points_empties_the_page(store):
    store.ensure_collection(DIM)
    store.upsert([*page(A, 3), *page(B, 2)])
    assert store.replace_pages([PageWrite(A, [])]) == 3
    assert store.count(A) == 0
    assert store.count(B) == 2
    assert store.count() == 2


def test_replace_many_pages_in_one_call(store):
    store.ensure_collection(DIM)
    store.upsert([*page(A, 3), *page(B, 2)])
    deleted = store.replace_pages(
        [
            PageWrite(A, page(A, 1, hash_="h2")),
            PageWrite(B, []),
            PageWrite(C, page(C, 2)),
        ]
    )
    assert deleted == 5
    assert (store.count(A), store.count(B), store.count(C)) == (1, 0, 2)
    assert set(snapshot(store)) == ids(page(A, 1)) | ids(page(C, 2))


def test_delete_pages_counts_what_it_deleted(store):
    store.ensure_collection(DIM)
    store.upsert([*page(A, 3), *page(B, 2), *page(C, 4)])
    assert store.delete_pages([A, B, "https://docs.example.com/never-stored"]) == 5
    assert store.count(A) == 0 and store.count(B) == 0
    assert set(snapshot(store)) == ids(page(C, 4))
    assert store.delete_pages([A, B]) == 0
    assert store.delete_pages([]) == 0
    assert store.count() == 4


def test_delete_pages_without_a_collection_is_zero_and_creates_nothing(store):
    assert store.delete_pages([A]) == 0
    assert store.exists() is False


# -- upsert / scroll / count / search -------------------------------------------------------------
def test_upsert_scroll_round_trip_without_vectors(store):
    store.ensure_collection(DIM)
    pts = [*page(A, 3), *page(B, 2)]
    pts[0].payload["text"] = 'quotes " and \\ backslashes, tabs\t, newlines\n, emoji 🚀'
    store.upsert(pts)
    got = list(store.scroll())
    assert len(got) == len(pts)
    assert {p.id: p.payload for p in got} == {p.id: p.payload for p in pts}
    assert all(p.vector is None for p in got)
    assert all(isinstance(p.payload["chunk_index"], int) for p in got)


def test_upsert_scroll_round_trip_with_vectors_normalised_for_cosine(store):
    store.ensure_collection(DIM)
    pts = [*page(A, 3), *page(B, 2)]
    assert any(abs(math.sqrt(sum(x * x for x in p.vector)) - 1) > 0.1 for p in pts)  # inputs are not unit
    store.upsert(pts)
    got = {p.id: p for p in store.scroll(with_vectors=True)}
    assert set(got) == ids(pts)
    for p in pts:
        assert got[p.id].payload == p.payload
        assert_close(got[p.id].vector, unit(p.vector))


def test_upsert_overwrites_a_point_with_the_same_id(store):
    store.ensure_collection(DIM)
    store.upsert([pt(A, 0)])
    newer = pt(A, 0, hash_="h2", text="rewritten")
    store.upsert([newer])
    assert store.count() == 1
    (got,) = list(store.scroll(with_vectors=True))
    assert got.id == newer.id and got.payload == newer.payload
    assert_close(got.vector, unit(newer.vector))


def test_scroll_pages_through_more_points_than_one_batch(store):
    store.ensure_collection(DIM)
    pts = [pt(f"https://docs.example.com/p{i}", j) for i in range(8) for j in range(3)]  # 24 points
    store.upsert(pts)
    got = list(store.scroll(batch=5))
    assert len(got) == 24
    assert [p.id for p in got].count(got[0].id) == 1
    assert {p.id: p.payload for p in got} == {p.id: p.payload for p in pts}
    with_vec = list(store.scroll(with_vectors=True, batch=7))
    assert ids(with_vec) == ids(pts) and len(with_vec) == 24
    assert all(p.vector is not None and len(p.vector) == DIM for p in with_vec)


def test_upsert_of_more_points_than_one_request_batch(store):
    store.ensure_collection(DIM)
    pts = [pt(f"https://docs.example.com/big{i // 10}", i % 10) for i in range(600)]
    store.upsert(pts)
    assert store.count() == 600
    assert ids(store.scroll(batch=256)) == ids(pts)


def test_scroll_payloads_pages_ids_and_only_the_asked_fields(store):
    assert list(store.scroll_payloads(["url"])) == []  # no collection: nothing, nothing created
    assert store.exists() is False
    store.ensure_collection(DIM)
    pts = [pt(f"https://docs.example.com/p{i}", j) for i in range(8) for j in range(3)]  # 24 points
    foreign = StoredPoint("00000000-0000-4000-8000-000000000009", {"note": "someone else's"}, vec("foreign"))
    store.upsert([*pts, foreign])
    fields = ["url", "chunk_index", "absent"]
    pages = list(store.scroll_payloads(fields, batch=5))
    assert [len(p) for p in pages] == [5, 5, 5, 5, 5]
    got = [row for p in pages for row in p]
    assert all(isinstance(pid, str) and isinstance(pl, dict) for pid, pl in got)
    assert len({pid for pid, _ in got}) == 25
    assert dict(got) == {
        **{p.id: {"url": p.payload["url"], "chunk_index": p.payload["chunk_index"]} for p in pts},
        foreign.id: {},
    }
    assert dict(got) == {p.id: p.payload for p in store.scroll(payload_fields=fields)}


def test_set_payloads_sets_each_points_fields_and_keeps_the_rest_and_the_vector(store):
    store.ensure_collection(DIM)
    a, b = page(A, 2), page(B, 1)
    store.upsert(a + b)
    before = {p.id: p for p in store.scroll(with_vectors=True)}
    store.set_payloads(
        [
            (a[0].id, {"metadata": {"chunk_index": 0, "url": A}}),
            (a[1].id, {"metadata": {"chunk_index": 1}, "title": "New"}),
        ]
    )
    after = {p.id: p for p in store.scroll(with_vectors=True)}
    assert after[a[0].id].payload == {**a[0].payload, "metadata": {"chunk_index": 0, "url": A}}
    assert after[a[1].id].payload == {**a[1].payload, "metadata": {"chunk_index": 1}, "title": "New"}
    assert after[b[0].id].payload == b[0].payload
    for pid in after:
        assert_close(after[pid].vector, before[pid].vector)
    store.set_payloads([])  # nothing to do


def test_set_payloads_of_more_points_than_one_request_batch(store):
    store.ensure_collection(DIM)
    pts = page(A, 600)
    store.upsert(pts)
    store.set_payloads([(p.id, {"metadata": {"chunk_index": p.payload["chunk_index"]}}) for p in pts])
    got = snapshot(store)
    assert all(got[p.id]["metadata"] == {"chunk_index": p.payload["chunk_index"]} for p in pts)


def test_count_by_url(store):
    store.ensure_collection(DIM)
    store.upsert([*page(A, 3), *page(B, 2)])
    assert store.count() == 5
    assert store.count(A) == 3
    assert store.count(B) == 2
    assert store.count(C) == 0
    assert store.count(A + "/") == 0


def test_search_returns_the_nearest_points_with_payload(store):
    store.ensure_collection(DIM)
    basis = [[1.0 if k == j else 0.0 for k in range(DIM)] for j in range(DIM)]
    pts = [pt(f"https://docs.example.com/axis{j}", 0, vector=[5 * x for x in basis[j]]) for j in range(DIM)]
    store.upsert(pts)
    query = [0.1, 0.2, 3.0, 0.3]  # nearest: axis2, then axis3, then axis1
    hits = store.search(query, limit=3)
    assert len(hits) == 3
    assert [p["url"] for _, p in hits] == [f"https://docs.example.com/axis{j}" for j in (2, 3, 1)]
    assert hits[0][1] == pts[2].payload
    scores = [s for s, _ in hits]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == pytest.approx(unit(query)[2], abs=1e-4)  # cosine, not dot on raw vectors
    assert len(store.search(query, limit=1)) == 1


# -- vectors_for_url (vector reuse) -------------------------------------------------------------
def test_vectors_for_url_reads_only_that_urls_vectors_keyed_by_embedder_and_text(store):
    store.ensure_collection(DIM)
    a = page(A, 3)
    store.upsert([*a, *page(B, 2), *page(A + "/", 2), *page(A + "?x=1", 1)])
    got = store.vectors_for_url(A)
    assert set(got) == {reuse_key("fake-hash-4", p.payload["text"]) for p in a}
    for p in a:
        v = got[reuse_key("fake-hash-4", p.payload["text"])]
        assert isinstance(v, list) and all(isinstance(x, float) for x in v)
        assert_close(v, unit(p.vector))  # what the store holds (cosine: normalised)
    assert store.vectors_for_url(C) == {}


def test_vectors_for_url_filters_by_embedder_and_keys_by_the_points_own_embedder(store):
    store.ensure_collection(DIM)
    mine = pt(A, 0, text="same text")
    theirs = pt(A, 1, text="same text", vector=vec("other model"))
    theirs.payload["embedder"] = "another-model"
    store.upsert([mine, theirs])
    only_mine = store.vectors_for_url(A, embedder="fake-hash-4")
    assert set(only_mine) == {reuse_key("fake-hash-4", "same text")}
    assert_close(only_mine[reuse_key("fake-hash-4", "same text")], unit(mine.vector))
    both = store.vectors_for_url(A)
    assert set(both) == {reuse_key("fake-hash-4", "same text"), reuse_key("another-model", "same text")}
    assert_close(both[reuse_key("another-model", "same text")], unit(theirs.vector))
    assert store.vectors_for_url(A, embedder="nobody") == {}


def test_vectors_for_url_leaves_out_points_without_text_or_embedder(store):
    store.ensure_collection(DIM)
    no_text, no_embedder, odd_text = pt(A, 0), pt(A, 1), pt(A, 2)
    del no_text.payload["text"]
    del no_embedder.payload["embedder"]
    odd_text.payload["text"] = 42
    good = pt(A, 3)
    store.upsert([no_text, no_embedder, odd_text, good])
    assert set(store.vectors_for_url(A)) == {reuse_key("fake-hash-4", good.payload["text"])}


def test_vectors_for_url_exact_text_same_text_twice_and_many_points(store):
    store.ensure_collection(DIM)
    pts = [pt(A, i, text=f"text {i % 300}") for i in range(600)]  # every text twice; more than one scroll page
    pts.append(pt(A, 600, text="text 1 "))  # trailing space: another text
    store.upsert(pts)
    got = store.vectors_for_url(A)
    assert len(got) == 301
    assert reuse_key("fake-hash-4", "text 1 ") in got and reuse_key("fake-hash-4", "text 1") in got


def test_vectors_for_url_sees_a_replace_and_a_delete(store):
    store.ensure_collection(DIM)
    store.upsert(page(A, 3))
    new = page(A, 2, hash_="h2", text="rewritten")
    store.replace_pages([PageWrite(A, new)])
    assert set(store.vectors_for_url(A)) == {reuse_key("fake-hash-4", "rewritten")}
    store.delete_pages([A])
    assert store.vectors_for_url(A) == {}


def test_vectors_for_url_without_a_collection_is_empty_and_creates_nothing(store):
    assert store.vectors_for_url(A) == {}
    assert store.exists() is False


def test_vectors_for_url_after_reopening(store):
    store.ensure_collection(DIM)
    a = page(A, 2)
    store.upsert(a)
    with reopened(store) as again:
        got = again.vectors_for_url(A, embedder="fake-hash-4")
        assert set(got) == {reuse_key("fake-hash-4", p.payload["text"]) for p in a}


# -- reuse_keys_for_urls (vectors of pages leaving a pass) ----------------------------------------
def test_reuse_keys_for_urls_names_each_points_key_and_url_for_those_urls_only(store):
    store.ensure_collection(DIM)
    a, b = page(A, 3), page(B, 2)
    theirs = pt(B, 2, text="same text")
    theirs.payload["embedder"] = "another-model"
    no_text = pt(B, 3)
    del no_text.payload["text"]
    store.upsert([*a, *b, theirs, no_text, *page(C, 2), *page(A + "/", 1)])
    want = {(reuse_key("fake-hash-4", p.payload["text"]), p.payload["url"]) for p in [*a, *b]}
    assert set(store.reuse_keys_for_urls([A, B], embedder="fake-hash-4")) == want
    assert set(store.reuse_keys_for_urls([A, B])) == want | {(reuse_key("another-model", "same text"), B)}
    assert list(store.reuse_keys_for_urls([])) == [] and list(store.reuse_keys_for_urls(["https://x.test/"])) == []


def test_reuse_keys_for_urls_spans_many_urls_and_scroll_pages(store):
    store.ensure_collection(DIM)
    urls = [f"https://docs.example.com/p{i}" for i in range(300)]  # more urls than one filter holds
    store.upsert([p for u in urls for p in page(u, 4)])
    got = list(store.reuse_keys_for_urls(urls, embedder="fake-hash-4"))
    assert len(got) == len(set(got)) == 1200 and {u for _, u in got} == set(urls)


def test_reuse_keys_for_urls_without_a_collection_is_empty_and_creates_nothing(store):
    assert list(store.reuse_keys_for_urls([A])) == []
    assert store.exists() is False


# -- payload indexes ---------------------------------------------------------------------------
def test_payload_keyword_indexes_on_url_and_content_hash(store):
    store.ensure_collection(DIM)
    if store.backend == "memory":  # type: ignore[attr-defined]
        pytest.skip("qdrant-client's :memory: mode keeps no payload indexes and reports none")
    if isinstance(store, EdgeStore):
        import qdrant_edge as qe

        schema = store._open().info().payload_schema
        keyword = qe.PayloadSchemaType.Keyword
    else:
        from qdrant_client import models as m

        schema = store.client.get_collection(store.collection).payload_schema
        keyword = m.PayloadSchemaType.KEYWORD
    for name in INDEXED_FIELDS:
        assert name in schema, schema
        assert schema[name].data_type == keyword
    assert set(INDEXED_FIELDS) == {"url", "content_hash"}


def test_payload_indexes_exist_after_reopening_edge(tmp_path):
    import qdrant_edge as qe

    s = EdgeStore(tmp_path, "c")
    s.ensure_collection(DIM)
    s.upsert(page(A, 2))
    s.close()
    again = EdgeStore(tmp_path, "c")
    try:
        schema = again._open().info().payload_schema
        assert {n: schema[n].data_type for n in INDEXED_FIELDS} == {
            n: qe.PayloadSchemaType.Keyword for n in INDEXED_FIELDS
        }
        assert again.replace_pages([PageWrite(A, [])]) == 2
    finally:
        again.close()


def test_edge_search_pool_size_is_set_on_create_and_on_reopening_an_older_shard(tmp_path):
    import json

    s = EdgeStore(tmp_path, "c", search_threads=None)  # as shards were made before: Qdrant's default
    s.ensure_collection(DIM)
    s.upsert(page(A, 3))
    s.close()
    config = tmp_path / "c" / "edge_config.json"
    assert "max_search_threads" not in json.loads(config.read_text())
    again = EdgeStore(tmp_path, "c")  # default: one search thread, written when the shard opens
    try:
        assert again.count(A) == 3
        assert again.replace_pages([PageWrite(A, page(A, 2))]) == 3
    finally:
        again.close()
    cfg = json.loads(config.read_text())
    assert cfg["max_search_threads"] == 1 and cfg["vectors"][""]["size"] == DIM
    third = EdgeStore(tmp_path, "c")
    try:
        assert (
            third.count() == 2 and load_config(third._qe, third.dir, third.search_threads) is None
        )  # nothing left to rewrite
    finally:
        third.close()
    fresh = EdgeStore(tmp_path, "d")
    fresh.ensure_collection(DIM)
    fresh.close()
    assert json.loads((tmp_path / "d" / "edge_config.json").read_text())["max_search_threads"] == 1


# -- errors -----------------------------------------------------------------------------------
def test_store_error_never_contains_the_api_key():
    key = "sekret-key-123"
    s = ClientStore.connect("http://127.0.0.1:9", "c", api_key=key, timeout=1)  # nothing listens on :9
    s.client._sleep = lambda _seconds: None  # the retries' backoff (3.5 s an operation) proves nothing here
    try:
        for op in (
            lambda: s.ensure_collection(DIM),
            s.exists,
            lambda: s.upsert([pt(A, 0)]),
            lambda: s.replace_pages([PageWrite(A, [])]),
            lambda: s.count(A),
        ):
            with pytest.raises(StoreError) as ei:
                op()
            exc = ei.value
            assert key not in str(exc)
            assert key not in repr(exc)
            assert key not in "".join(traceback.format_exception(exc))
    finally:
        s.close()


def test_edge_store_error_names_the_failing_operation(tmp_path):
    s = EdgeStore(tmp_path, "c")
    with pytest.raises(StoreError, match="does not exist"):
        s.replace_pages([PageWrite(A, page(A, 1))])
    assert not (Path(tmp_path) / "c").exists()


def test_retrying_client_retries_transient_errors_only():
    from qdrant_client.http.exceptions import ResponseHandlingException

    from sync.edges.client_store import RetryingClient

    class Flaky:
        calls = 0

        def count(self, *a, **k):
            Flaky.calls += 1
            if Flaky.calls < 3:
                raise ResponseHandlingException(ConnectionError("reset"))
            return 7

        def bad(self):
            Flaky.calls += 1
            raise ValueError("a real bug, not a blip")

    sleeps = []
    c = RetryingClient(Flaky(), tries=4, backoff=0.1, sleep=sleeps.append)
    assert c.count() == 7 and Flaky.calls == 3 and sleeps == [0.1, 0.2]
    Flaky.calls = 0
    with pytest.raises(ValueError):
        c.bad()
    assert Flaky.calls == 1
