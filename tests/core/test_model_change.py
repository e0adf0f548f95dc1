"""The model-change rule: a collection's vectors come from one model."""

from __future__ import annotations

import pytest

from sync.core.model_change import model_change_refusal

ARGS = dict(model_id="st:acme/m", dimension=384, name="st:acme/m")


@pytest.mark.parametrize(
    "was, was_size, refused",
    [
        (None, None, False),  # a new collection
        ("st:acme/m", 384, False),  # the same model
        (None, 384, False),  # the size fits, no record of the model
        ("fake-hash-384", 384, True),  # another model of the same size (run --full too: one model a collection)
        ("fake-hash-384", None, True),  # ... the size not known: the record still speaks
        ("fake-hash-16", 16, True),  # another size
        (None, 16, True),  # another size, the model unknown
        ("st:acme/m", 16, True),  # the same name, another size: not the same model
    ],
)
def test_when_a_model_change_is_refused(was, was_size, refused):
    line = model_change_refusal("pages", was=was, was_size=was_size, **ARGS)
    assert (line is not None) == refused
    if line:
        assert "\n" not in line and "`pagesync reindex --embedder st:acme/m`" in line
        assert "run --full" not in line  # --full switches no model either


def test_the_refusal_names_both_models_and_how_to_keep_the_old_one():
    line = model_change_refusal("docs", was="fake-hash-384", was_size=384, was_name="fake-384", **ARGS)
    assert line.startswith("collection 'docs' holds vectors of 'fake-hash-384'")
    assert "'st:acme/m'" in line and "--embedder fake-384" in line
    size = model_change_refusal("docs", was="fake-hash-16", was_size=16, **ARGS)
    assert "16-dimensional vectors (of 'fake-hash-16')" in size and "384-dimensional" in size
