"""End to end with the real bundled model (all-MiniLM-L6-v2, offline) on a handful of pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunking import Splitter
from demo.site_server import Site, SiteServer
from sync.edges.edge_store import EdgeStore
from tests.helpers import Harness

pytestmark = pytest.mark.model
DEMO = Path(__file__).resolve().parents[2] / "demo"


@pytest.fixture(scope="module")
def model(minilm):
    return minilm


def test_real_model_index_edit_and_search(tmp_path, model):
    site = Site.from_dir(DEMO / "site")
    with SiteServer(site) as server:
        site.server = server  # type: ignore[attr-defined]
        h = Harness(site, tmp_path, embedder=model)
        h.splitter = Splitter()  # the production settings
        rep = h.run()
        assert rep.pages_added == 7 and rep.pages_failed == 0
        assert rep.chunks_embedded == rep.chunks_written > 7

        store = EdgeStore(h.store_path, "pages")
        try:
            vecs = [p.vector for p in store.scroll(with_vectors=True)]
            assert all(len(v) == 384 for v in vecs)
            hits = store.search(model.embed(["How do I install it with pipx?"])[0], limit=1)
            assert hits[0][1]["url"].endswith("/install.html")
        finally:
            store.close()

        # the bundled edits: only changed text is embedded, the nav-only page is not
        for f in sorted((DEMO / "edits").glob("*.html")):
            site.set("/" + f.name, f.read_bytes(), mtime=2e9)  # later than any checkout's mtime
        for name in (DEMO / "edits" / "DELETE").read_text().split():
            site.remove("/" + name)
        before = model.texts_embedded
        rep = h.run(full=True)
        assert (rep.pages_changed, rep.pages_added, rep.pages_removed, rep.pages_unchanged) == (2, 1, 1, 1)
        assert rep.pages_not_modified == 3
        assert model.texts_embedded - before == rep.chunks_embedded
        urls = {p["url"].rsplit("/", 1)[1] for p in h.points().values()}
        assert "deploy.html" not in urls and "plugins.html" in urls

        store = EdgeStore(h.store_path, "pages")
        try:
            hits = store.search(model.embed(["writing a plugin that adds a store type"])[0], limit=1)
            assert hits[0][1]["url"].endswith("/plugins.html")
        finally:
            store.close()
