"""content_hash (whitespace-insensitive, word-sensitive) and pipeline_fingerprint."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sync.core.hashing import content_hash, fold_whitespace, pipeline_fingerprint

_WS_CHARS = " \t\n\r\f\v\u00a0\u2003\u3000"
_ws_run = st.text(alphabet=_WS_CHARS, min_size=1, max_size=6)
_word = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",), blacklist_characters=_WS_CHARS + "\x1c\x1d\x1e\x1f\x85\u2028\u2029"
    ),
    min_size=1,
    max_size=12,
).filter(lambda w: not re.search(r"\s", w))
_words = st.lists(_word, min_size=1, max_size=30)


def _sha(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    "raw, folded",
    [
        ("", ""),
        ("   ", ""),
        ("a", "a"),
        ("  a  ", "a"),
        ("a  b", "a b"),
        ("a\tb\nc\r\nd", "a b c d"),
        ("# Title\n\n\nSome   text.\n\n- item\n- item\n", "# Title Some text. - item - item"),
        ("a\u00a0\u00a0b", "a b"),
    ],
)
def test_fold_whitespace_table(raw, folded):
    assert fold_whitespace(raw) == folded


def test_content_hash_is_sha256_of_the_normal_form_per_contract():
    # Outside code whitespace folds (a soft wrap too); blocks stay apart; code lines keep
    # their indentation, less trailing whitespace; ends stripped.
    md = "# Install\n\n\n  Run   `pip install`\nthen  go.\n\n- one\n- two\n\n```\nif x:  \n    go()\n```\n"
    assert content_hash(md) == _sha(
        "# Install\n\nRun `pip install` then go.\n\n- one\n- two\n\n```\nif x:\n    go()\n```"
    )
    assert re.fullmatch(r"[0-9a-f]{64}", content_hash(md))
    assert content_hash("") == _sha("")
    assert content_hash(" \n\t ") == _sha("")


_LINE_WS = "".join(c for c in _WS_CHARS if c not in "\n\r")
_inline_run = st.text(alphabet=_LINE_WS, min_size=1, max_size=6)
# Words a soft wrap may put at a line's start without making it a block of its own.
_plain_word = _word.filter(lambda w: w[0].isalnum() and not re.search(r"[`~\x00]|^\d+[.)]", w))


@settings(max_examples=200, deadline=None)
@given(st.lists(_plain_word, min_size=1, max_size=30), st.data())
def test_content_hash_invariant_under_whitespace_refolding(words, data):
    # The same words of one paragraph with other runs of whitespace between them and at both
    # ends: inside a line any run, across a soft wrap a line break (trailing spaces kept).
    canonical = " ".join(words)
    seps = [
        data.draw(st.one_of(_inline_run, _inline_run.map(lambda r: r + "\n"), st.just("\n")))
        for _ in range(len(words) - 1)
    ]
    lead = data.draw(st.sampled_from(["", " ", "\n", "\n\n  ", "\t\n "]))
    tail = data.draw(st.one_of(st.just(""), _ws_run))
    refolded = lead + "".join(w + s for w, s in zip(words, seps + [""])) + tail
    assert content_hash(refolded) == content_hash(canonical) == _sha(canonical)


@settings(max_examples=200, deadline=None)
@given(_words, st.data())
def test_content_hash_changes_when_a_word_changes(words, data):
    i = data.draw(st.integers(0, len(words) - 1))
    new_word = data.draw(_word)
    assume(new_word != words[i])
    changed = list(words)
    changed[i] = new_word
    assert content_hash(" ".join(words)) != content_hash(" ".join(changed))


def test_content_hash_changes_on_word_change_and_on_word_split():
    assert content_hash("install the package") != content_hash("install the packages")
    assert content_hash("install the package") != content_hash("install thepackage")
    assert content_hash("Install") != content_hash("install")


def test_pipeline_fingerprint_changes_with_either_input():
    base = pipeline_fingerprint("model-a", "md/1000/100")
    assert base == pipeline_fingerprint("model-a", "md/1000/100")
    assert pipeline_fingerprint("model-b", "md/1000/100") != base
    assert pipeline_fingerprint("model-a", "md/500/100") != base
    assert re.fullmatch(r"[0-9a-f]+", base)


def test_pipeline_fingerprint_does_not_confuse_the_boundary_between_inputs():
    assert pipeline_fingerprint("ab", "c") != pipeline_fingerprint("a", "bc")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40), st.text(max_size=40), st.text(max_size=40))
def test_pipeline_fingerprint_property(e1, s1, e2, s2):
    # The embedder id never contains a newline (model ids); restrict to that domain.
    assume("\n" not in e1 and "\n" not in e2)
    f1, f2 = pipeline_fingerprint(e1, s1), pipeline_fingerprint(e2, s2)
    if (e1, s1) == (e2, s2):
        assert f1 == f2
    else:
        assert f1 != f2
