"""The embed and write stages' plain parts: the pass's vector cache and a page's points."""

from __future__ import annotations

from array import array

import pytest

from chunking import REFERENCE
from sync.core.ids import chunk_id, point_id
from sync.stages.embed import VectorCache
from sync.stages.write import build_points


def test_vector_cache_drops_the_least_recently_used():
    cache = VectorCache(2)
    cache.put("a", [1.0])
    cache.put("b", [2.0])
    assert cache.get("a") == array("f", [1.0])  # a is now the most recent
    cache.put("c", [3.0])
    assert "b" not in cache and "a" in cache and "c" in cache
    assert isinstance(cache.get("c"), array)  # held as float32


def test_vector_cache_of_size_zero_keeps_nothing():
    cache = VectorCache(0)
    cache.put("a", [1.0])
    assert "a" not in cache and cache.get("a") is None


def test_build_points_lays_out_ids_and_payload():
    url = "https://a.test/p"
    points = build_points(
        url,
        ["one", "two"],
        [[0.1], [0.2]],
        hash_="h",
        title="T",
        fetched_at="now",
        embedder_id="m",
        headings=[("T",), ("T", "Usage")],
    )
    assert [p.id for p in points] == [point_id(chunk_id(url, 0)), point_id(chunk_id(url, 1))]
    assert points[1].payload == {
        "url": url,
        "chunk_id": chunk_id(url, 1),
        "chunk_index": 1,
        "content_hash": "h",
        "text": "two",
        "title": "T",
        "fetched_at": "now",
        "embedder": "m",
        "headings": ["T", "Usage"],
        "page_kind": "guide",
        "metadata": {
            "url": url,
            "title": "T",
            "chunk_id": chunk_id(url, 1),
            "chunk_index": 1,
            "fetched_at": "now",
            "headings": ["T", "Usage"],
        },
    }
    assert points[1].vector == [0.2]


def test_build_points_refuses_a_vector_count_that_is_not_the_chunks():
    with pytest.raises(ValueError):
        build_points("https://a.test/p", ["one", "two"], [[0.1]], hash_="h", title="", fetched_at="", embedder_id="m")


def test_every_point_of_a_reference_page_says_so():
    points = build_points(
        "https://a.test/api",
        ["one", "two"],
        [[0.1], [0.2]],
        hash_="h",
        title="API",
        fetched_at="now",
        embedder_id="m",
        page_kind=REFERENCE,
    )
    assert [p.payload["page_kind"] for p in points] == [REFERENCE, REFERENCE]
    assert "page_kind" not in points[0].payload["metadata"]  # the metadata object is the contract's fields
