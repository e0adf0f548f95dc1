"""A point's `metadata` object mirrors its own top-level fields, and only those."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sync.core.payload import METADATA_FIELDS, metadata_is_current, point_metadata

FULL = {
    "url": "https://a.test/p",
    "chunk_id": "ab_c0",
    "chunk_index": 0,
    "content_hash": "h",
    "text": "t",
    "title": "T",
    "fetched_at": "2026-01-01T00:00:00+00:00",
    "embedder": "m",
}


def test_metadata_is_the_five_fields_of_the_payload():
    assert point_metadata(FULL) == {
        "url": "https://a.test/p",
        "title": "T",
        "chunk_id": "ab_c0",
        "chunk_index": 0,
        "fetched_at": "2026-01-01T00:00:00+00:00",
    }


def test_a_field_the_payload_lacks_is_left_out():
    assert point_metadata({"url": "u", "chunk_index": 2}) == {"url": "u", "chunk_index": 2}


values = st.one_of(st.none(), st.integers(-2, 3), st.text(max_size=3))
payloads = st.dictionaries(st.sampled_from([*METADATA_FIELDS, "text", "content_hash"]), values)


@given(payloads)
def test_a_payload_with_its_metadata_is_current_and_one_without_is_not(pl):
    assert not metadata_is_current(pl)  # no metadata object at all
    assert metadata_is_current({**pl, "metadata": point_metadata(pl)})


@given(payloads, st.sampled_from(METADATA_FIELDS), values)
def test_a_changed_field_makes_the_metadata_out_of_date(pl, field, value):
    pl = {**pl, "metadata": point_metadata(pl)}
    changed = {**pl, field: value}
    assert metadata_is_current(changed) == (pl.get(field, object()) == value)
