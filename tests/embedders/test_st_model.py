"""`st:NAME_OR_PATH`: a sentence-transformers model from a folder or the local cache, never
downloaded; its vector size from its config files; one model id however it was found."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedders import DEFAULT_MODEL_ID, make_embedder, name_for_model_id
from embedders.st_model import SentenceTransformerEmbedder, cache_repo_id, config_dimension, model_id_for
from sync.errors import ConfigError, EmbedderUnavailableError
from tests.embedders.st_cache import bundled_folder, cached_model, model_folder

TEXTS = ["How do I install it with pipx?", "", "def embed(texts):\n    return texts", "Ünïcödé 🚀"]


def test_the_bundled_folder_is_the_default_model_and_its_size_needs_no_load():
    emb = make_embedder(f"st:{bundled_folder()}")
    assert isinstance(emb, SentenceTransformerEmbedder)
    # The same vectors as the default: the same id, so switching re-embeds nothing.
    assert emb.model_id == DEFAULT_MODEL_ID
    assert emb.dimension == 384 and emb._model is None  # read from the config files
    emb.check()
    assert emb._model is None


def test_a_folder_is_named_by_its_name(tmp_path):
    emb = make_embedder(f"st:{model_folder(tmp_path / 'docs-minilm')}")
    assert emb.model_id == "st:docs-minilm" and emb.dimension == 384
    assert name_for_model_id(emb.model_id) is None  # a folder's name does not say where it is


def test_by_name_and_by_cache_folder_are_one_model_id(tmp_path):
    hub = tmp_path / "hf" / "hub"
    snapshot = cached_model(tmp_path / "hf", "acme/docs-minilm")
    by_name = SentenceTransformerEmbedder("acme/docs-minilm", cache_dir=hub)
    by_path = SentenceTransformerEmbedder(str(snapshot))
    assert by_name.model_id == by_path.model_id == "st:acme/docs-minilm"
    assert by_name._path == snapshot.resolve() or by_name._path == snapshot
    # audit --fix and search find the embedder again from the points' payload.
    assert name_for_model_id("st:acme/docs-minilm") == "st:acme/docs-minilm"


def test_a_name_not_on_this_machine_is_exit_2_in_one_line(tmp_path):
    with pytest.raises(EmbedderUnavailableError) as info:
        SentenceTransformerEmbedder("acme/not-here", cache_dir=tmp_path / "empty")
    err = info.value
    assert isinstance(err, ConfigError) and err.exit_code == 2
    msg = str(err)
    assert "\n" not in msg and msg.startswith("st:acme/not-here is not on this machine")
    assert "give the model's folder" in msg


@pytest.mark.parametrize(
    "spec, says",
    [
        ("./no/such/folder", "no such folder"),
        ("/no/such/folder", "no such folder"),
        ("a/b/c", "no such folder"),
        ("", "needs a model"),
    ],
)
def test_what_can_only_be_a_folder_must_exist(spec, says):
    with pytest.raises(EmbedderUnavailableError, match=says):
        SentenceTransformerEmbedder(spec)


def test_a_folder_without_a_model_is_refused(tmp_path):
    with pytest.raises(EmbedderUnavailableError, match="holds no model"):
        SentenceTransformerEmbedder(str(tmp_path))


@pytest.mark.parametrize(
    "parts, repo",
    [
        (("x", "hub", "models--acme--m", "snapshots", "abc"), "acme/m"),
        (("x", "models--m", "snapshots", "abc"), "m"),
        (("x", "acme", "m"), None),
        (("x", "snapshots", "abc"), None),
    ],
)
def test_cache_repo_id(tmp_path, parts, repo):
    from pathlib import Path

    assert cache_repo_id(Path(*parts)) == repo


def _model(tmp_path, modules, configs):
    (tmp_path / "modules.json").write_text(
        json.dumps(
            [
                {"idx": i, "name": str(i), "path": p, "type": f"sentence_transformers.models.{t}"}
                for i, (t, p) in enumerate(modules)
            ]
        )
    )
    for path, cfg in configs.items():
        (tmp_path / path).mkdir(parents=True, exist_ok=True)
        (tmp_path / path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


@pytest.mark.parametrize(
    "modules, configs, size",
    [
        # sentence-transformers 2.x pooling flags; two modes concatenate
        (
            [("Transformer", ""), ("Pooling", "1_Pooling"), ("Normalize", "2_Normalize")],
            {"1_Pooling": {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True}},
            384,
        ),
        (
            [("Transformer", ""), ("Pooling", "1_Pooling")],
            {
                "1_Pooling": {
                    "word_embedding_dimension": 768,
                    "pooling_mode_cls_token": True,
                    "pooling_mode_mean_tokens": True,
                }
            },
            1536,
        ),
        # newer keys
        (
            [("Transformer", ""), ("Pooling", "1_Pooling")],
            {"1_Pooling": {"embedding_dimension": 1024, "pooling_mode": "cls"}},
            1024,
        ),
        (
            [("Transformer", ""), ("Pooling", "1_Pooling")],
            {"1_Pooling": {"embedding_dimension": 64, "pooling_mode": ["mean", "max"]}},
            128,
        ),
        # a dense layer after pooling sets the size
        (
            [("Transformer", ""), ("Pooling", "1_Pooling"), ("Dense", "2_Dense"), ("Normalize", "3_Normalize")],
            {
                "1_Pooling": {"word_embedding_dimension": 768, "pooling_mode_mean_tokens": True},
                "2_Dense": {"in_features": 768, "out_features": 256},
            },
            256,
        ),
        # another kind of layer, or a config that says nothing: ask the loaded model
        ([("StaticEmbedding", "0_StaticEmbedding")], {"0_StaticEmbedding": {}}, None),
        ([("Transformer", ""), ("Pooling", "1_Pooling")], {"1_Pooling": {"pooling_mode_mean_tokens": True}}, None),
        ([("Transformer", ""), ("Pooling", "1_Pooling")], {}, None),
    ],
)
def test_config_dimension(tmp_path, modules, configs, size):
    assert config_dimension(_model(tmp_path, modules, configs)) == size


def test_config_dimension_of_the_bundled_model():
    assert config_dimension(bundled_folder()) == 384
    assert model_id_for(bundled_folder()) == DEFAULT_MODEL_ID


@pytest.mark.model
def test_vectors_equal_the_bundled_embedders(tmp_path, minilm):
    want = np.array(minilm.embed(TEXTS))
    snapshot = cached_model(tmp_path / "hf", "acme/docs-minilm")
    for emb in (
        make_embedder(f"st:{bundled_folder()}"),
        SentenceTransformerEmbedder("acme/docs-minilm", cache_dir=tmp_path / "hf" / "hub"),
        SentenceTransformerEmbedder(str(snapshot)),
    ):
        got = np.array(emb.embed(TEXTS))
        assert got.shape == (len(TEXTS), 384)
        assert np.allclose(got, want, atol=1e-5)
        assert emb.texts_embedded == len(TEXTS)


@pytest.mark.model
def test_a_size_the_configs_leave_open_is_asked_of_the_model(tmp_path):
    folder = model_folder(tmp_path / "m")
    (folder / "modules.json").unlink()  # a plain transformers folder: sentence-transformers adds mean pooling
    emb = SentenceTransformerEmbedder(str(folder))
    assert emb._model is None
    assert emb.dimension == 384 and emb._model is not None


def test_a_pass_with_nothing_to_embed_never_loads_the_model(site, tmp_path):
    from embedders import HashEmbedder
    from tests.helpers import Harness, page_html, para

    site.set("/p0.html", page_html("Page 0", [para("p0")]))
    h = Harness(site, tmp_path, embedder=HashEmbedder(384, model_id="st:docs-minilm"))  # its points, cheaply
    h.run()
    emb = SentenceTransformerEmbedder(str(model_folder(tmp_path / "docs-minilm")))
    rep = h.run(embedder=emb, full=True)
    assert rep.pages_not_modified == 1 and rep.chunks_embedded == 0
    assert emb._model is None
