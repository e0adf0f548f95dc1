"""The ranking rules: guides before API references (`guides_first`), the agreed first hit, a name
as typed first (`verbatim_first`), pure and by table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunking import GUIDE, REFERENCE
from sync.core.ranking import REFERENCE_WEIGHT, agreed_first, guides_first, verbatim_first


def _hit(url: str, kind: str | None) -> dict:
    return {"url": url} if kind is None else {"url": url, "page_kind": kind}


@pytest.mark.parametrize(
    "found, order",
    [
        # a reference a little ahead of a guide falls behind it
        ([(0.033, _hit("/api/", REFERENCE)), (0.030, _hit("/guide/", GUIDE))], ["/guide/", "/api/"]),
        # far ahead (more than 1 / REFERENCE_WEIGHT), it stays first
        ([(0.033, _hit("/api/", REFERENCE)), (0.025, _hit("/guide/", GUIDE))], ["/api/", "/guide/"]),
        # a point written before it was told counts as a guide
        ([(0.033, _hit("/api/", REFERENCE)), (0.030, _hit("/old/", None))], ["/old/", "/api/"]),
        ([(0.033, _hit("/a/", GUIDE)), (0.030, _hit("/b/", GUIDE))], ["/a/", "/b/"]),
        ([], []),
    ],
)
def test_table(found, order):
    assert [p["url"] for _, p in guides_first(found)] == order


def test_a_reference_keeps_its_share_of_the_score():
    [(score, _)] = guides_first([(0.05, _hit("/api/", REFERENCE))])
    assert score == pytest.approx(0.05 * REFERENCE_WEIGHT)


_found = st.lists(
    st.tuples(st.floats(0, 1, allow_nan=False), st.sampled_from([GUIDE, REFERENCE, None])),
    max_size=30,
).map(lambda xs: sorted(((s, _hit(f"/p{i}/", k)) for i, (s, k) in enumerate(xs)), key=lambda h: -h[0]))


@given(_found)
def test_guides_keep_their_order_and_references_theirs(found):
    out = guides_first(found)
    assert sorted(id(p) for _, p in out) == sorted(id(p) for _, p in found)
    assert [s for s, _ in out] == sorted((s for s, _ in out), reverse=True)
    for kind in (REFERENCE, "other"):
        mine = [p["url"] for _, p in found if (p.get("page_kind") == REFERENCE) == (kind == REFERENCE)]
        assert [p["url"] for _, p in out if (p.get("page_kind") == REFERENCE) == (kind == REFERENCE)] == mine


@given(_found)
def test_no_reference_rises_and_no_guide_falls(found):
    before = {p["url"]: i for i, (_, p) in enumerate(found)}
    for i, (_, p) in enumerate(guides_first(found)):
        if p.get("page_kind") == REFERENCE:
            assert i >= before[p["url"]]
        else:
            assert i <= before[p["url"]]


def test_a_first_hit_both_searches_agree_on_keeps_its_score():
    found = [(0.0333, _hit("/api/", REFERENCE)), (0.0330, _hit("/guide/", GUIDE)), (0.02, _hit("/api2/", REFERENCE))]
    out = guides_first(found, agreed=0.0333)
    assert [p["url"] for _, p in out] == ["/api/", "/guide/", "/api2/"]
    assert out[0][0] == 0.0333 and out[2][0] == pytest.approx(0.02 * REFERENCE_WEIGHT)
    assert [p["url"] for _, p in guides_first(found, agreed=0.034)][0] == "/guide/"


@given(_found)
def test_a_weight_of_one_changes_nothing(found):
    assert guides_first(found, weight=1.0) == found


@pytest.mark.parametrize(
    "found, agreed, held",
    [
        ([(0.0333, {})], 0.0333, True),
        ([(0.0333 * (1 - 1e-7), {})], 0.0333, True),  # a float32 score of the same rank
        ([(0.0330, {})], 0.0333, False),
        ([], 0.0333, False),
        ([(0.0333, {})], None, False),
    ],
)
def test_agreed_first(found, agreed, held):
    assert agreed_first(found, agreed) is held


def _chunk(url: str, text: str, headings: tuple[str, ...] = ()) -> tuple[float, dict]:
    return (1.0, {"url": url, "text": text, "headings": list(headings)})


@pytest.mark.parametrize(
    "found, name, order",
    [
        # a Python field shares the flag's words; the page that holds the flag comes first
        (
            [_chunk("/api/", "max_pages: int = 0"), _chunk("/run/", "Stop at `--max-pages` pages.")],
            "--max-pages",
            ["/run/", "/api/"],
        ),
        # both hold it: BM25's order stays
        (
            [_chunk("/api/", "class CliRunner"), _chunk("/testing/", "Use CliRunner to test")],
            "CliRunner",
            ["/api/", "/testing/"],
        ),
        # case is kept: a lower-cased mention does not hold it
        ([_chunk("/a/", "clirunner"), _chunk("/b/", "the CliRunner")], "CliRunner", ["/b/", "/a/"]),
        # a heading holds it too
        (
            [_chunk("/a/", "text"), _chunk("/b/", "other", ("Testing", "isolated_filesystem"))],
            "isolated_filesystem",
            ["/b/", "/a/"],
        ),
        # none holds it: unchanged
        ([_chunk("/a/", "x"), _chunk("/b/", "y")], "Depends", ["/a/", "/b/"]),
        ([], "x", []),
    ],
)
def test_verbatim_first(found, name, order):
    assert [p["url"] for _, p in verbatim_first(found, name)] == order


_texts = st.lists(st.tuples(st.sampled_from(["a_b", "a-b", "A_B", "--a-b", ""]), st.booleans()), max_size=20)


@given(_texts, st.sampled_from(["a_b", "--a-b", "A_B"]))
def test_verbatim_first_is_a_stable_partition(texts, name):
    found = [
        (1.0 - i / 100, {"url": f"/p{i}/", "text": t, "headings": ["H"] if h else []}) for i, (t, h) in enumerate(texts)
    ]
    out = verbatim_first(found, name)
    assert sorted(p["url"] for _, p in out) == sorted(p["url"] for _, p in found)
    held = [name in p["text"] for _, p in out]
    assert held == sorted(held, reverse=True)  # every hit that holds it before every one that does not
    for part in (True, False):
        assert [p["url"] for _, p in out if (name in p["text"]) == part] == [
            p["url"] for _, p in found if (name in p["text"]) == part
        ]
