"""`audit --fix` and `search` embed for an existing collection: with the model its points
name (found again by that name when pagesync can), never with another one."""

from __future__ import annotations

import pytest

from embedders import HashEmbedder
from sync.commands.checks import choose_embedder
from sync.edges.edge_store import EdgeStore
from sync.errors import CollectionMismatchError
from tests.embedders.st_cache import model_folder
from tests.helpers import Harness, page_html, para


@pytest.fixture
def folder_model_collection(site, tmp_path):
    """A collection whose points name the folder model `st:docs-minilm` (made cheaply)."""
    site.set("/p0.html", page_html("Page 0", [para("p0")]))
    h = Harness(site, tmp_path, embedder=HashEmbedder(384, model_id="st:docs-minilm"))
    h.run()
    store = EdgeStore(h.store_path, "pages")
    yield store
    store.close()


def test_a_folder_model_is_not_guessed_from_its_name(folder_model_collection):
    with pytest.raises(CollectionMismatchError, match=r"'st:docs-minilm', which pagesync cannot find .*st:PATH"):
        choose_embedder(None, folder_model_collection, why="search")


def test_the_folder_given_is_the_points_model(folder_model_collection, tmp_path):
    folder = model_folder(tmp_path / "elsewhere" / "docs-minilm")
    emb = choose_embedder(f"st:{folder}", folder_model_collection, why="search")
    assert emb.model_id == "st:docs-minilm" and emb._model is None


def test_another_model_of_the_same_size_is_refused(folder_model_collection):
    with pytest.raises(CollectionMismatchError, match=r"of 'st:docs-minilm'.*is another model"):
        choose_embedder("fake-384", folder_model_collection, why="audit --fix")
