"""Which search queries name code (ranked by keyword alone in a hybrid search) and which ask in words."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.query_kind import IDENTIFIER_WORDS, looks_like_identifier


@pytest.mark.parametrize(
    "query, named",
    [
        ("CliRunner", True),
        ("--max-failed-share", True),
        ("auto_envvar_prefix", True),
        ("OAuth2PasswordRequestForm", True),
        ("Depends", True),  # one word: BM25 matches it exactly
        ("click.Choice values", True),
        ("--rebuild flag", True),
        ("raise HTTPException", True),
        ("ParamType.convert()", True),
        ("chain=True", True),
        ("-v option", True),
        ("  CliRunner  ", True),
        ("How do I test my FastAPI app?", False),
        ("shell completion for bash", False),
        ("How to test?", False),  # sentence punctuation is no code
        ("Use async.", False),
        ("API reference", False),  # capitals alone are no case change inside a word
        ("restrict an option to a fixed set of values", False),
        ("what does --full do in a pass", False),  # more words than a name takes: a question
        ("", False),
        ("   ", False),
    ],
)
def test_names_and_questions(query, named):
    assert looks_like_identifier(query) is named


_word = st.text(alphabet=st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp")), min_size=1, max_size=12)


@given(_word, st.sampled_from(["", " ", "  "]))
def test_one_word_is_always_a_name(word, pad):
    assert len(word.split()) == 1  # no separator in the alphabet
    assert looks_like_identifier(pad + word + pad)


@given(st.lists(_word, min_size=IDENTIFIER_WORDS + 1, max_size=10))
def test_more_words_than_a_name_takes_is_always_a_question(words):
    assert not looks_like_identifier(" ".join(words))


@given(st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=10), min_size=2, max_size=3))
def test_plain_lowercase_words_are_a_question(words):
    assert not looks_like_identifier(" ".join(words))
