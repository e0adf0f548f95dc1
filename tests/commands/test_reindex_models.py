"""`pagesync reindex --embedder NEW`: each distinct embedded text (heading path and chunk) is embedded once, from the
texts the state keeps (nothing re-fetched); then `run --embedder NEW` embeds nothing."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from embedders import HashEmbedder
from chunking.split import embedded_text
from sync.commands.reindex import ReindexConfig, run_reindex
from sync.edges.catalog import EdgeCatalog
from sync.edges.state import StateDB
from tests.helpers import Harness, page_html, para


class Recording(HashEmbedder):
    """A hash embedder that keeps every text it was given."""

    def __init__(self, dimension: int):
        super().__init__(dimension)
        self.inputs: list[str] = []

    def embed(self, texts):
        self.inputs += list(texts)
        return super().embed(texts)


def build(site, n: int = 4):
    # The same notice on every page: a chunk of its own, the same embedded text n times (one
    # title for all pages, so the heading path "Guide › Section 1" is the same too).
    notice = para("shared-notice", 50)
    for i in range(n):
        site.set(f"/p{i}.html", page_html("Guide", [para(f"p{i}-a", 50), notice, para(f"p{i}-b", 50)]))


def test_reindex_embeds_each_distinct_text_once_and_fetches_nothing(site, tmp_path):
    build(site)
    h = Harness(site, tmp_path)
    h.run()
    texts = Counter(embedded_text(p["text"], p["headings"]) for p in h.points().values())
    assert max(texts.values()) > 1, texts  # the notice is one chunk on every page
    site.clear_log()
    emb = Recording(32)
    with StateDB(h.state_path) as st:
        rep = run_reindex(
            EdgeCatalog(h.store_path),
            "pages",
            state=st,
            embedder=emb,
            splitter=h.splitter,
            cfg=ReindexConfig(embed_batch=2),
        )  # duplicates fall in different batches
    assert site.requests == []  # the state kept every text
    assert rep.text_sources["state"] == 4
    assert Counter(emb.inputs) == Counter(set(texts))  # each distinct text once
    assert rep.chunks_embedded == len(texts) and rep.chunks_reused == sum(texts.values()) - len(texts)
    assert rep.chunks_written == sum(texts.values())
    assert "distinct texts embedded" in rep.summary()
    after, vecs = h.points_and_vectors()
    # a reused vector is the one its text has anywhere else
    by_text: dict[str, list] = {}
    for pid, p in after.items():
        by_text.setdefault(embedded_text(p["text"], p["headings"]), []).append(vecs[pid])
    for text, vs in by_text.items():
        assert all(v == pytest.approx(vs[0], abs=1e-6) for v in vs)
        assert vs[0] == pytest.approx(emb._one(text), abs=1e-6)
    nxt = h.run(embedder=HashEmbedder(32), full=True)
    assert nxt.chunks_embedded == 0
