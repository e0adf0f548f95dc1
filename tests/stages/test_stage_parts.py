"""The stages' small parts alone: the token guard of the embed queue, the crawl's link memory,
and a reindex's vectors on disk."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Sequence

import pytest

from embedders import HashEmbedder
from sync.core.links import PageLinks
from sync.core.report import Report
from sync.edges.vector_memo import VectorMemo
from sync.stages.crawl_links import LinkMemory
from sync.stages.token_spend import TokenSpend


@dataclass
class Queued:
    chunks: list[str]
    keys: list[str]
    vectors: list[Sequence[float] | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.vectors = self.vectors or [None] * len(self.chunks)


def words(n: int) -> str:
    return " ".join(["word"] * n)


class Counting(HashEmbedder):
    """An embedder whose provider counts tokens (as a remote one's `usage` does)."""

    tokens_embedded = 0


def test_the_guard_keeps_the_pages_that_fit_and_stops_at_the_first_that_does_not():
    big = TokenSpend(HashEmbedder(8), Report(), None).token_bound(words(20))
    small = TokenSpend(HashEmbedder(8), Report(), None).token_bound(words(5))
    limit = 2 * big + small  # a and b fit; c does not; d would fit in what is left
    spend = TokenSpend(HashEmbedder(8), Report(), limit=limit)
    to_embed = {"a": words(20), "b": words(20), "c": words(20), "d": words(5)}
    batch = [Queued(["x"], ["a"]), Queued(["y"], ["b"]), Queued(["z"], ["c"]), Queued(["w"], ["d"])]
    kept, inputs = spend.within_budget(batch, to_embed, dedup=True)
    assert kept == batch[:2] and list(inputs) == ["a", "b"]
    # The first page that does not fit stops the embedding: no later page is sent, however small.
    assert spend.stopped and spend.report.embed_budget_reached
    assert spend.report.pages_over_token_budget == 2
    assert f"token budget reached (--max-embed-tokens {limit})" in spend.report.errors[0]["error"]


def test_pages_needing_no_model_input_are_kept_after_the_stop():
    spend = TokenSpend(HashEmbedder(8), Report(), limit=1)
    reused = Queued(["x"], ["a"], vectors=[[0.0] * 8])
    kept, inputs = spend.within_budget([Queued(["y"], ["b"]), reused], {"b": words(10)}, dedup=True)
    assert kept == [reused] and inputs == {} and spend.stopped


def test_a_text_two_pages_hold_is_one_input_with_reuse_and_two_without():
    batch = [Queued(["t"], ["k"]), Queued(["t"], ["k"])]
    shared = TokenSpend(HashEmbedder(8), Report(), limit=10_000)
    kept, inputs = shared.within_budget(batch, {"k": words(10)}, dedup=True)
    assert kept == batch and list(inputs) == ["k"]
    own = TokenSpend(HashEmbedder(8), Report(), limit=10_000)
    kept, inputs = own.within_budget(batch, {"k#0": words(10), "k#1": words(10)}, dedup=False)
    assert kept == batch and list(inputs) == ["k#0", "k#1"]


def test_the_spend_is_the_providers_count_when_there_is_one_else_the_offline_bounds():
    local = TokenSpend(HashEmbedder(8), Report(), limit=100)
    local.sent([words(3), words(4)])
    assert local.spent() == local.token_bound(words(3)) + local.token_bound(words(4))
    remote_model = Counting(8)
    remote_model.tokens_embedded = 40  # counted before this pass: not this pass's
    remote = TokenSpend(remote_model, Report(), limit=100)
    remote_model.tokens_embedded = 57
    remote.note()
    assert remote.spent() == 17 and remote.report.tokens_embedded == 17


@pytest.mark.parametrize("per_chunk, last, want", [(None, 12.0, 12 * 3), (None, None, 256 * 3), (5.0, 12.0, 5 * 3)])
def test_what_skips_saved_is_counted_at_this_pass_then_the_last_then_the_chunk_size(per_chunk, last, want):
    model = Counting(8)
    spend = TokenSpend(model, Report(), limit=None)
    if per_chunk is not None:
        model.tokens_embedded, spend.report.chunks_embedded = int(per_chunk * 2), 2
    spend.count_tokens(chunks_skipped=3, last_per_chunk=last, chunk_tokens=256)
    assert spend.report.tokens_saved_by_skip == want


class Links:
    """A state's kept links (`LinkKeeper`), in a dict."""

    def __init__(self):
        self.kept: dict[str, str] = {}

    def put_links(self, items):
        self.kept.update(items)

    def get_links(self, urls):
        return {u: self.kept[u] for u in urls if u in self.kept}

    def drop_links(self, urls):
        for u in urls:
            self.kept.pop(u, None)


def test_links_read_go_to_the_state_and_are_read_back():
    state = Links()
    memory = LinkMemory(state, dry_run=False)
    memory.keep("https://a.test/", PageLinks(links=("https://a.test/b",)))
    assert "https://a.test/" in state.kept and memory.local == {}
    assert LinkMemory(state, dry_run=False).get(["https://a.test/", "https://a.test/x"]) == {
        "https://a.test/": PageLinks(links=("https://a.test/b",))
    }
    memory.forget("https://a.test/")
    assert state.kept == {} and memory.get(["https://a.test/"]) == {}


def test_a_dry_run_reads_the_kept_links_and_writes_none():
    state = Links()
    LinkMemory(state, dry_run=False).keep("https://a.test/old", PageLinks(links=("https://a.test/1",)))
    memory = LinkMemory(state, dry_run=True)
    memory.keep("https://a.test/new", PageLinks(links=("https://a.test/2",)))
    memory.forget("https://a.test/old")
    assert list(state.kept) == ["https://a.test/old"]  # untouched
    got = memory.get(["https://a.test/new", "https://a.test/old"])
    assert got["https://a.test/new"].links == ("https://a.test/2",)
    assert got["https://a.test/old"].links == ("https://a.test/1",)  # forgotten for the pass, kept in the state


def test_held_links_stand_for_the_pass_over_the_states():
    state = Links()
    memory = LinkMemory(state, dry_run=False)
    memory.keep("https://a.test/", PageLinks(links=("https://a.test/1",)))
    memory.hold("https://a.test/", PageLinks(links=("https://a.test/1", "https://a.test/2")))
    assert memory.get(["https://a.test/"])["https://a.test/"].links == ("https://a.test/1", "https://a.test/2")
    assert "2" not in state.kept["https://a.test/"]  # the state keeps what it had


def test_a_state_that_keeps_no_links_leaves_them_to_the_pass():
    memory = LinkMemory(None, dry_run=False)
    memory.keep("https://a.test/", PageLinks(links=("https://a.test/1",)))
    assert memory.get(["https://a.test/"])["https://a.test/"].links == ("https://a.test/1",)
    memory.forget("https://a.test/")
    assert memory.get(["https://a.test/"]) == {}


def test_the_vector_memo_keeps_every_vector_by_key_as_float32(tmp_path):
    memo = VectorMemo(tmp_path / "v.db")
    try:
        assert "k" not in memo and memo.get("k") is None
        memo.put("k", [0.1, 0.2])
        memo.put("k2", array("f", [1.0]))
        assert "k" in memo and memo.get("k") == array("f", [0.1, 0.2])
        memo.put("k", [0.3, 0.4])  # the last vector put wins
        assert memo.get("k") == array("f", [0.3, 0.4]) and memo.get("k2") == array("f", [1.0])
    finally:
        memo.close()
