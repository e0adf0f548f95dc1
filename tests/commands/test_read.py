"""The read API: `open_collection` on the embedded store or a qdrant-client collection,
searching by text with the collection's own embedder, hits with url, title, text, score."""

from __future__ import annotations

import pytest

import sync
import sync.edges.shard_lock as store_mod
from embedders import HashEmbedder
from chunking import REFERENCE
from sync.commands.read import PAGE_WEIGHT, Collection, Hit, open_collection, page_ranked
from sync.core.ranking import REFERENCE_WEIGHT
from sync.edges.client_store import ClientStore
from sync.edges.edge_store import EdgeStore
from sync.edges.keywords import query_vector
from sync.edges.store import BOTH_FIRST, RRF_K, PageWrite
from sync.errors import CollectionMismatchError, CollectionNotFoundError, ConfigError, StoreHeldError
from sync.stages.write import build_points
from tests.helpers import store_clock

PAGES = {
    "https://docs.example.com/install": ("Install", ["Install with pip.", "Check the version."]),
    "https://docs.example.com/retries": ("Retries", ["Retries back off twice.", "A 429 waits for Retry-After."]),
}


def pages(embedder) -> list[PageWrite]:
    return [
        PageWrite(
            url,
            build_points(
                url,
                chunks,
                embedder.embed(chunks),
                hash_="h" * 64,
                title=title,
                fetched_at="2026-01-01T00:00:00+00:00",
                embedder_id=embedder.model_id,
            ),
        )
        for url, (title, chunks) in PAGES.items()
    ]


def fill(store, embedder) -> None:
    try:
        store.ensure_collection(embedder.dimension)
        store.replace_pages(pages(embedder))
    finally:
        store.close()


@pytest.fixture
def edge_dir(tmp_path):
    fill(EdgeStore(tmp_path / "qdrant", "pages"), HashEmbedder(16))
    return tmp_path / "qdrant"


def test_a_search_finds_the_chunk_with_its_url_title_and_index(edge_dir):
    with open_collection(edge_dir) as coll:
        hits = coll.search("A 429 waits for Retry-After.", limit=2, mode="dense")  # dense: cosine scores
    top = hits[0]
    assert isinstance(top, Hit) and top.url == "https://docs.example.com/retries" and top.title == "Retries"
    assert top.text == "A 429 waits for Retry-After." and top.chunk_index == 1
    assert top.chunk_id == sync.chunk_id(top.url, 1) and top.score == pytest.approx(1.0, abs=1e-5)
    assert len(hits) == 2 and hits[1].score < top.score
    assert top.metadata["url"] == top.url and top.metadata["chunk_id"] == top.chunk_id


def test_the_embedder_is_the_one_the_points_name(edge_dir):
    with open_collection(edge_dir) as coll:
        assert coll.embedder.model_id == "fake-hash-16"
    with pytest.raises(CollectionMismatchError, match="16-dimensional"):
        open_collection(edge_dir, embedder="fake-32")
    mine = HashEmbedder(16)
    with open_collection(edge_dir, embedder=mine) as coll:
        coll.search("Install with pip.")
    assert mine.calls == 1


def test_between_searches_the_shard_is_free_for_a_pass(edge_dir):
    coll = open_collection(edge_dir)
    coll.search("Install with pip.")
    writer = EdgeStore(edge_dir, "pages", lock_wait=0)  # as a pass would open it: no wait needed
    try:
        assert writer.count() == 4
    finally:
        writer.close()
    coll.close()


def test_a_search_during_a_pass_is_refused_at_once_with_one_line(edge_dir, monkeypatch):
    coll = open_collection(edge_dir)
    writer = EdgeStore(edge_dir, "pages")
    writer.count()  # held, as a running pass holds it

    def sleep(_):
        raise AssertionError("the search waited for the pass")

    monkeypatch.setattr(store_mod, "time", store_clock(sleep))
    try:
        with pytest.raises(StoreHeldError) as info:
            coll.search("Install with pip.")
        with pytest.raises(StoreHeldError):
            open_collection(edge_dir)
    finally:
        writer.close()
    assert "for writing" in str(info.value) and "\n" not in str(info.value)
    assert coll.search("Install with pip.")[0].title == "Install"  # the pass is done: reading works


def test_keep_open_holds_the_shard_until_close(edge_dir):
    coll = open_collection(edge_dir, keep_open=True)
    coll.search("Install with pip.")
    with pytest.raises(StoreHeldError, match="a reader"):
        EdgeStore(edge_dir, "pages", lock_wait=0).count()
    coll.close()
    assert EdgeStore(edge_dir, "pages", lock_wait=0).count() == 4


def test_a_qdrant_client_of_your_own_local_mode(tmp_path):
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(tmp_path / "local"))
    fill(ClientStore(client, "pages"), HashEmbedder(16))  # closing the store closes the client
    client = QdrantClient(path=str(tmp_path / "local"))
    try:
        with open_collection(client=client) as coll:
            top = coll.search("Retries back off twice.")[0]
        assert (top.url, top.title, top.chunk_index) == ("https://docs.example.com/retries", "Retries", 0)
        assert client.collection_exists("pages")  # yours: still open after close()
    finally:
        client.close()


def test_no_collection_and_blank_queries_are_one_line_errors(tmp_path, edge_dir):
    with pytest.raises(CollectionNotFoundError, match="'nope' not found"):
        open_collection(edge_dir, "nope")
    with pytest.raises(CollectionNotFoundError):
        open_collection(tmp_path / "nothing-here")
    with open_collection(edge_dir) as coll, pytest.raises(ConfigError, match="empty"):
        coll.search("  ")


def test_an_unreachable_server_is_a_config_error(monkeypatch):
    with pytest.raises(ConfigError, match="127.0.0.1:9"):
        open_collection("http://127.0.0.1:9", api_key="sekret")


def test_hits_of_points_without_a_metadata_object_or_a_title():
    hit = Hit.from_point(0.5, {"url": "https://e.com/a", "text": "t", "chunk_id": "c", "chunk_index": 0})
    assert hit.title == "" and hit.metadata == {"url": "https://e.com/a", "chunk_id": "c", "chunk_index": 0}
    stored = {"url": "u", "metadata": {"url": "u", "title": "T"}}
    assert Hit.from_point(0.1, stored).metadata == {"url": "u", "title": "T"}


def test_the_read_api_is_exported_by_sync():
    assert sync.open_collection is open_collection and sync.Collection is Collection and sync.Hit is Hit


class _Closing(HashEmbedder):
    """A HashEmbedder with a client to close, as a remote embedder has."""

    made: list["_Closing"] = []

    def __init__(self, dim: int):
        super().__init__(dim)
        self.closed = False
        _Closing.made.append(self)

    def close(self) -> None:
        self.closed = True


def test_an_embedder_made_from_a_name_is_closed_with_the_collection_and_a_given_one_is_not(edge_dir, monkeypatch):
    import embedders

    _Closing.made.clear()
    monkeypatch.setattr(embedders, "make_embedder", lambda name, **kw: _Closing(int(name.split("-")[1])))
    with open_collection(edge_dir, embedder="fake-16") as coll:
        coll.search("Install with pip.")
    assert [e.closed for e in _Closing.made] == [True]
    with pytest.raises(CollectionMismatchError):
        open_collection(edge_dir, embedder="fake-32")  # refused: the one made for it is closed too
    assert [e.closed for e in _Closing.made] == [True, True]
    mine = _Closing(16)
    with open_collection(edge_dir, embedder=mine):
        pass
    assert not mine.closed  # the caller's to close


def _hit(url: str, i: int) -> dict:
    return {"url": url, "chunk_index": i}


def test_a_page_that_matches_in_two_chunks_outranks_one_that_matches_in_one():
    found = [
        (0.033, _hit("/report/", 0)),
        (0.032, _hit("/status/", 0)),
        (0.031, _hit("/status/", 1)),
        (0.020, _hit("/other/", 0)),
    ]
    ranked = page_ranked(found, 3)
    assert [(p["url"], p["chunk_index"]) for _, p in ranked] == [("/status/", 0), ("/report/", 0), ("/status/", 1)]
    assert ranked[0][0] == pytest.approx(0.032 + PAGE_WEIGHT * 0.031)
    assert ranked[1][0] == 0.033  # alone on its page: its own score
    assert ranked[2][0] == 0.031  # not its page's best: its own score


def test_only_the_next_best_chunk_lifts_a_page_not_how_many_it_has():
    # A long page matching a little in many chunks is lifted by its next best chunk, once, and
    # its other chunks do not crowd the other pages out.
    found = (
        [(0.030, _hit("/answer/", 0)), (0.029, _hit("/answer/", 1))]
        + [(0.021, _hit("/changelog/", i)) for i in range(20)]
        + [(0.0205, _hit("/third/", 0))]
    )
    ranked = page_ranked(found, 5)
    assert [p["url"] for _, p in ranked][:3] == ["/answer/", "/changelog/", "/answer/"]
    assert len(ranked) == 5


def test_the_best_chunk_may_come_after_another_of_its_page():
    found = [(0.02, _hit("/a/", 0)), (0.03, _hit("/b/", 0)), (0.04, _hit("/a/", 1))]
    ranked = page_ranked(found, 3)
    assert ranked[0] == (pytest.approx(0.04 + PAGE_WEIGHT * 0.02), found[2][1])
    assert [p["url"] for _, p in ranked] == ["/a/", "/b/", "/a/"]


def test_equal_scores_keep_the_fusions_order():
    found = [(0.03, _hit("/a/", 0)), (0.03, _hit("/b/", 0))]
    assert [p["url"] for _, p in page_ranked(found, 2)] == ["/a/", "/b/"]


@pytest.mark.parametrize(
    "top, first",
    [
        (BOTH_FIRST, "/pasted/"),  # both searches rank it first: no lifted page passes it
        (1 / RRF_K + 1 / (RRF_K + 1), "/status/"),  # first in one list, second in the other: lifted past
    ],
)
def test_a_hit_both_searches_rank_first_stays_first(top, first):
    found = [(top, _hit("/pasted/", 0)), (2 / (RRF_K + 1), _hit("/status/", 0)), (2 / (RRF_K + 2), _hit("/status/", 1))]
    assert page_ranked(found, 3)[0][1]["url"] == first
    assert sorted(p["url"] for _, p in page_ranked(found, 3)) == ["/pasted/", "/status/", "/status/"]


def test_both_first_is_the_fused_score_of_the_stores_agreed_hit(edge_dir):
    # The store's own fusion: a passage searched word for word is first in both lists.
    store = EdgeStore(edge_dir, "pages")
    try:
        text = "A 429 waits for Retry-After."
        score, payload = store.search(HashEmbedder(16).embed([text])[0], 5, keywords=query_vector(text), mode="hybrid")[
            0
        ]
    finally:
        store.close()
    assert payload["text"] == text and score == pytest.approx(BOTH_FIRST, rel=1e-6)


class _TwoRankings:
    """A store whose keyword ranking and fused ranking disagree: each mode's hits as given."""

    collection = "pages"

    def __init__(self, by_mode: dict[str, list[tuple[float, dict]]]):
        self.by_mode = by_mode
        self.asked: list[str] = []

    def has_keywords(self) -> bool:
        return True

    def search(self, vector, limit, *, keywords=None, mode="dense"):
        self.asked.append(mode)
        return self.by_mode.get(mode, [])[:limit]

    def close(self) -> None:
        pass


def _chunk(url: str, i: int = 0) -> dict:
    return {"url": url, "chunk_index": i, "chunk_id": f"{url}_c{i}", "text": url}


@pytest.mark.parametrize(
    "query, first, asked",
    [
        ("CliRunner", "/testing/", ["keyword"]),  # a name: BM25's ranking alone
        ("--max-failed-share", "/testing/", ["keyword"]),
        ("how do I test a command", "/api/", ["hybrid"]),  # a question: the fusion's
    ],
)
def test_a_query_that_names_code_is_ranked_by_keyword_alone(query, first, asked):
    store = _TwoRankings(
        {
            "keyword": [(9.0, _chunk("/testing/")), (7.0, _chunk("/api/")), (6.5, _chunk("/api/", 1))],
            "hybrid": [(BOTH_FIRST, _chunk("/api/")), (1 / RRF_K, _chunk("/testing/"))],
        }
    )
    hits = Collection(store, HashEmbedder(16), owns_store=False).search(query, limit=3)
    assert hits[0].url == first and store.asked == asked


def test_the_first_keyword_hit_of_a_name_stays_first_and_pages_are_lifted_after_it():
    store = _TwoRankings(
        {
            "keyword": [
                (9.0, _chunk("/reference/")),
                (8.0, _chunk("/guide/")),
                (7.0, _chunk("/guide/", 1)),
                (6.0, _chunk("/other/")),
            ]
        }
    )
    hits = Collection(store, HashEmbedder(16), owns_store=False).search("CliRunner", limit=3)
    # /guide/ is lifted by its second chunk, yet the one BM25 ranks first keeps its place
    assert [h.url for h in hits] == ["/reference/", "/guide/", "/guide/"]
    assert hits[0].score == pytest.approx(1 / RRF_K)
    assert hits[1].score == pytest.approx(1 / (RRF_K + 1) + PAGE_WEIGHT / (RRF_K + 2))


def test_a_name_is_first_where_it_is_written_as_typed():
    """BM25 reads `--max-pages` and the field `max_pages` alike; the page with the flag comes first."""
    field = {**_chunk("/reference/api/"), "text": "max_pages: int | None = None"}
    flag = {**_chunk("/commands/run/"), "text": "`--max-pages N` stops the crawl after N pages."}
    store = _TwoRankings({"keyword": [(9.0, field), (8.0, flag)]})
    hits = Collection(store, HashEmbedder(16), owns_store=False).search("--max-pages", limit=2)
    assert [h.url for h in hits] == ["/commands/run/", "/reference/api/"]
    assert hits[0].score == pytest.approx(1 / RRF_K)  # the first hit as typed keeps the first place


def test_a_name_bm25_finds_nothing_for_is_searched_as_a_question():
    store = _TwoRankings({"keyword": [], "hybrid": [(BOTH_FIRST, _chunk("/close/"))]})
    hits = Collection(store, HashEmbedder(16), owns_store=False).search("CliRunnr", limit=3)
    assert [h.url for h in hits] == ["/close/"] and store.asked == ["keyword", "hybrid"]


def test_a_name_is_not_embedded_unless_bm25_finds_nothing_for_it():
    store = _TwoRankings({"keyword": [(9.0, _chunk("/testing/"))], "hybrid": [(BOTH_FIRST, _chunk("/api/"))]})
    model = HashEmbedder(16)  # (it counts its calls)
    Collection(store, model, owns_store=False).search("CliRunner", limit=3)
    assert model.calls == 0  # (a remote embedder would have sent a request for nothing)
    Collection(store, model, owns_store=False).search("how do I test a command", limit=3)  # a question: embedded once
    assert model.calls == 1
    store.by_mode["keyword"] = []
    hits = Collection(store, model, owns_store=False).search("CliRunnr", limit=3)
    assert model.calls == 2 and hits[0].url == "/api/"


def test_a_name_on_a_collection_without_keyword_vectors_is_searched_dense():
    store = _TwoRankings({"dense": [(0.9, _chunk("/dense/"))]})
    store.has_keywords = lambda: False  # type: ignore[method-assign]
    hits = Collection(store, HashEmbedder(16), owns_store=False).search("CliRunner", limit=3)
    assert [h.url for h in hits] == ["/dense/"] and store.asked == ["dense"]


def _ref(url: str, i: int = 0) -> dict:
    return {**_chunk(url, i), "page_kind": REFERENCE}


@pytest.mark.parametrize(
    "query, mode, first",
    [
        ("how do I test a command", "hybrid", "/testing/"),  # a question: the guide first
        ("CliRunner", "hybrid", "/api/"),  # a name: BM25's ranking alone, the reference where it is defined
        ("how do I test a command", "dense", "/api/"),  # the embedding alone, as it ranks
        ("how do I test a command", "keyword", "/api/"),  # BM25 alone, as it ranks
    ],
)
def test_a_question_ranks_a_guide_before_a_reference_close_to_it(query, mode, first):
    store = _TwoRankings(
        {
            mode_: [
                (1 / RRF_K + 1 / (RRF_K + 1), _ref("/api/")),
                (1 / (RRF_K + 1) + 1 / (RRF_K + 2), _chunk("/testing/")),
            ]
            for mode_ in ("hybrid", "dense", "keyword")
        }
    )
    hits = Collection(store, HashEmbedder(16), owns_store=False).search(query, limit=2, mode=mode)
    assert [h.url for h in hits][0] == first


def test_a_reference_both_searches_rank_first_stays_first_for_a_question():
    store = _TwoRankings({"hybrid": [(BOTH_FIRST, _ref("/api/")), (BOTH_FIRST * 0.9, _chunk("/guide/"))]})
    hits = Collection(store, HashEmbedder(16), owns_store=False).search("how do I test a command", limit=2)
    assert [h.url for h in hits] == ["/api/", "/guide/"]  # they agree on it
    store.by_mode["hybrid"][0] = (BOTH_FIRST * 0.99, _ref("/api/"))  # only nearly: weighed
    hits = Collection(store, HashEmbedder(16), owns_store=False).search("how do I test a command", limit=2)
    assert [h.url for h in hits] == ["/guide/", "/api/"]
    assert hits[1].score == pytest.approx(BOTH_FIRST * 0.99 * REFERENCE_WEIGHT)
