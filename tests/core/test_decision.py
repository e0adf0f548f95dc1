"""The change decision over every combination of what the fetch saw and what we knew."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.decision import (
    COLLAPSE_RATIO,
    SAME_STUB_PAGES,
    SHRINK_RATIO,
    STUB_CHARS,
    Action,
    Decision,
    Outcome,
    broken_deploy,
    decide,
    held_reason,
    may_be_broken,
    needs_unconditional_fetch,
    shrank,
)

FP = "fp-current"
OTHER_FP = "fp-old"
HASH = "h" * 64
OTHER_HASH = "g" * 64


def expected_action(outcome: Outcome, indexed: bool, same_hash: bool, same_fp: bool) -> Action:
    if outcome is Outcome.ERROR:
        return Action.FAIL  # errors never purge, never write
    if outcome is Outcome.GONE:
        return Action.PURGE
    if outcome is Outcome.SKIPPED:
        return Action.SKIP_POLICY  # robots.txt, scope, size, type: never purge, never write
    if outcome is Outcome.NOT_MODIFIED:
        # 304 is a skip only when we hold text indexed under the current pipeline.
        return Action.SKIP_NOT_MODIFIED if indexed and same_fp else Action.FAIL
    if not indexed:
        return Action.ADD
    if not same_hash or not same_fp:
        return Action.REPLACE
    return Action.SKIP_UNCHANGED


COMBOS = list(itertools.product(list(Outcome), [True, False], [True, False], [True, False]))


def test_combos_cover_every_outcome():
    assert {c[0] for c in COMBOS} == set(Outcome)
    assert len(COMBOS) == len(Outcome) * 8


@pytest.mark.parametrize(
    "outcome, indexed, same_hash, same_fp",
    COMBOS,
    ids=[
        f"{o.name}-{'idx' if i else 'new'}-{'sameh' if h else 'diffh'}-{'samefp' if f else 'difffp'}"
        for o, i, h, f in COMBOS
    ],
)
def test_decide_table(outcome, indexed, same_hash, same_fp):
    stored_hash = HASH if indexed else None
    new_hash = (HASH if same_hash else OTHER_HASH) if outcome is Outcome.OK else None
    if outcome is Outcome.OK and not indexed:
        new_hash = HASH
    d = decide(
        outcome,
        new_hash=new_hash,
        stored_hash=stored_hash,
        stored_fingerprint=(FP if same_fp else OTHER_FP) if indexed else None,
        fingerprint=FP,
        indexed=indexed,
    )
    assert isinstance(d, Decision)
    assert d.action is expected_action(outcome, indexed, same_hash, same_fp)
    assert d.reason
    assert d.writes is (d.action in (Action.ADD, Action.REPLACE, Action.PURGE))


# Explicit rows, so the table above is not only checked against a re-implementation.
@pytest.mark.parametrize(
    "outcome, new_hash, stored_hash, stored_fp, indexed, action",
    [
        (Outcome.OK, HASH, None, None, False, Action.ADD),
        (Outcome.OK, HASH, HASH, FP, True, Action.SKIP_UNCHANGED),
        (Outcome.OK, OTHER_HASH, HASH, FP, True, Action.REPLACE),
        (Outcome.OK, HASH, HASH, OTHER_FP, True, Action.REPLACE),
        (Outcome.OK, HASH, HASH, None, True, Action.REPLACE),  # indexed before fingerprints were stored
        (Outcome.NOT_MODIFIED, None, HASH, FP, True, Action.SKIP_NOT_MODIFIED),
        (Outcome.NOT_MODIFIED, None, HASH, None, True, Action.SKIP_NOT_MODIFIED),
        (Outcome.NOT_MODIFIED, None, HASH, OTHER_FP, True, Action.FAIL),
        (Outcome.NOT_MODIFIED, None, None, None, False, Action.FAIL),
        (Outcome.GONE, None, HASH, FP, True, Action.PURGE),
        (Outcome.GONE, None, None, None, False, Action.PURGE),
        (Outcome.ERROR, None, HASH, FP, True, Action.FAIL),
        (Outcome.ERROR, None, None, None, False, Action.FAIL),
        (Outcome.ERROR, HASH, HASH, OTHER_FP, True, Action.FAIL),
    ],
)
def test_decide_explicit_rows(outcome, new_hash, stored_hash, stored_fp, indexed, action):
    d = decide(
        outcome,
        new_hash=new_hash,
        stored_hash=stored_hash,
        stored_fingerprint=stored_fp,
        fingerprint=FP,
        indexed=indexed,
    )
    assert d.action is action


@pytest.mark.parametrize(
    "new_hash, stored_hash, indexed, action",
    [
        (OTHER_HASH, HASH, True, Action.PURGE),  # had text, extracts to nothing now: a purge
        (HASH, HASH, True, Action.SKIP_UNCHANGED),  # was empty already (its hash is the empty text's)
        (HASH, None, False, Action.ADD),  # a new page with no text: tracked, nothing to write
    ],
)
def test_decide_a_page_whose_text_extracts_to_nothing(new_hash, stored_hash, indexed, action):
    d = decide(
        Outcome.OK,
        new_hash=new_hash,
        stored_hash=stored_hash,
        stored_fingerprint=FP,
        fingerprint=FP,
        indexed=indexed,
        text_empty=True,
    )
    assert d.action is action
    if action is Action.PURGE:
        assert d.reason == "no text extracted"


@pytest.mark.parametrize(
    "action, writes",
    [
        (Action.ADD, True),
        (Action.REPLACE, True),
        (Action.PURGE, True),
        (Action.SKIP_NOT_MODIFIED, False),
        (Action.SKIP_UNCHANGED, False),
        (Action.FAIL, False),
    ],
)
def test_decision_writes(action, writes):
    assert Decision(action, "r").writes is writes


def test_ok_without_new_hash_is_a_programming_error():
    with pytest.raises(ValueError):
        decide(Outcome.OK, new_hash=None, stored_hash=HASH, stored_fingerprint=FP, fingerprint=FP, indexed=True)


def test_errors_never_purge_or_write():
    for indexed in (True, False):
        d = decide(
            Outcome.ERROR,
            new_hash=None,
            stored_hash=HASH if indexed else None,
            stored_fingerprint=FP,
            fingerprint=FP,
            indexed=indexed,
        )
        assert d.action is Action.FAIL and not d.writes


@pytest.mark.parametrize(
    "stored, current, expected",
    [
        (None, FP, False),  # never indexed: a normal conditional fetch is fine
        (FP, FP, False),
        (OTHER_FP, FP, True),
        ("", FP, True),
    ],
)
def test_needs_unconditional_fetch(stored, current, expected):
    assert needs_unconditional_fetch(stored, current) is expected


def test_action_values_match_report_vocabulary():
    assert {a.value for a in Action} == {
        "not_modified",
        "unchanged",
        "added",
        "changed",
        "removed",
        "failed",
        "skipped",
    }


# -- a change that may be a broken deploy ------------------------------------------------------


@pytest.mark.parametrize(
    "old, new, chars, held",
    [
        (12, 3, 5000, True),  # a quarter of its chunks: waits for the guard
        (12, 4, 5000, False),  # a third: an edit
        (4, 1, 2000, True),
        (3, 1, 2000, False),  # a short page losing two chunks is no collapse...
        (3, 1, 120, True),  # ...but a text this short waits (a stub?)
        (2, 2, STUB_CHARS - 1, True),
        (2, 2, STUB_CHARS, False),
        (0, 1, 10, False),  # nothing indexed: nothing to lose
    ],
)
def test_may_be_broken(old, new, chars, held):
    assert may_be_broken(old, new, chars) is held


@pytest.mark.parametrize(
    "old, new, old_chars, chars, expected",
    [
        (2, 1, 900, 800, True),  # lost a chunk
        (1, 1, 400, 200, True),  # one section to one section, half the characters
        (1, 1, 400, 201, False),  # a little shorter: an edit
        (1, 1, 100, 300, False),  # grew
        (1, 1, None, 10, False),  # written before its length was kept: chunks alone decide
        (3, 2, None, 10, True),
    ],
)
def test_shrank(old, new, old_chars, chars, expected):
    assert SHRINK_RATIO == 2
    assert shrank(old, new, old_chars, chars) is expected


def test_broken_deploy_table():
    shell = "h-shell"
    changes = {
        "collapsed": (20, 1, 9000, 900, "h1"),  # 20 chunks to 1
        "stub-a": (2, 1, 900, 60, shell),
        "stub-b": (3, 1, 1400, 60, shell),
        "stub-c": (2, 1, None, 60, shell),
        "short-edit": (2, 1, 700, 300, "h-own"),  # a short page edited: its own text
        "two-alike": (2, 1, 700, 80, "h-two"),
        "two-alike-2": (2, 1, 700, 80, "h-two"),  # below SAME_STUB_PAGES
    }
    assert SAME_STUB_PAGES == 3
    assert broken_deploy(changes) == {"collapsed", "stub-a", "stub-b", "stub-c"}
    assert broken_deploy({}) == set()


def test_one_section_pages_turned_into_one_stub_are_broken():
    """A page of one section is one chunk, and so is the stub it became: the text's length
    tells the template from an edit."""
    maint = "h-maintenance"
    stubbed = {f"p{i}": (1, 1, 300 + i, 80, maint) for i in range(SAME_STUB_PAGES)}
    assert broken_deploy(stubbed) == set(stubbed)
    # Tiny pages edited alike to a text as long as theirs, or longer: edits.
    grown = {f"p{i}": (1, 1, 60 + i, 80, "h-alike") for i in range(5)}
    trimmed = {f"p{i}": (1, 1, 100 + i, 80, "h-alike") for i in range(5)}
    assert broken_deploy(grown) == broken_deploy(trimmed) == set()
    # Two of them are edits whatever they shrank by: below SAME_STUB_PAGES.
    assert broken_deploy(dict(list(stubbed.items())[: SAME_STUB_PAGES - 1])) == set()


@pytest.mark.parametrize(
    "old, new, old_chars, chars, says",
    [
        (6, 1, 3000, 40, "text shrank from 6 chunks to 1)"),
        (1, 1, 320, 80, "text shrank from 320 characters to 80)"),
        (2, 1, None, 80, "text shrank from 2 chunks to 1)"),
    ],
)
def test_held_reason(old, new, old_chars, chars, says):
    reason = held_reason(old, new, old_chars, chars)
    assert reason.startswith("change held by the mass-deletion guard (") and reason.endswith(says)


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.tuples(
            st.integers(1, 60),
            st.integers(0, 60),
            st.none() | st.integers(0, 20000),
            st.integers(0, 5000),
            st.sampled_from(["a", "b", "c"]),
        ),
        max_size=12,
    )
)
def test_broken_deploy_properties(changes):
    broken = broken_deploy(changes)
    assert broken <= changes.keys()
    for url, (old, new, old_chars, chars, _h) in changes.items():
        collapsed = old >= COLLAPSE_RATIO and new * COLLAPSE_RATIO <= old
        if new * COLLAPSE_RATIO > old and chars >= STUB_CHARS:  # neither collapsed nor short: an edit
            assert url not in broken
        if collapsed:
            assert url in broken
        if not collapsed and not shrank(old, new, old_chars, chars):
            assert url not in broken  # did not shrink: an edit, however many pages share it
        if new >= old and (old_chars is None or chars * SHRINK_RATIO > old_chars) and not collapsed:
            assert url not in broken  # kept its chunks and more than half its text
    # Adding more pages that changed to the same short text never clears one.
    more = {**changes, **{f"extra{i}": (2, 1, None, 10, "a") for i in range(SAME_STUB_PAGES)}}
    assert broken <= broken_deploy(more)
