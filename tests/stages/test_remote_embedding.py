"""A pass through a remote (OpenAI-compatible) embedder: a request that fails for good fails
only its pages, the spending guard stops the pass cleanly, the report counts the tokens the
server billed and those skip and reuse saved."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from chunking import extract_page
from demo.site_server import render_page
from embedders.limits import token_bound
from embedders.openai_api import OpenAIEmbedder
from sync.edges.state import StateDB
from tests.embedders.fake_openai import KEY, FakeOpenAI, words
from tests.helpers import page_html, para, reindex

PROBE = ["pagesync dimension probe"]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGESYNC_CACHE_DIR", str(tmp_path / "cache"))


def remote(fake: FakeOpenAI, **kw) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "m",
        base_url="http://fake/v1",
        api_key=KEY,
        transport=fake.transport(),
        sleep=lambda s: None,
        jitter=lambda: 1.0,
        **kw,
    )


def texts_of(points: dict, url: str) -> list[str]:
    return [p["text"] for p in sorted(points.values(), key=lambda p: p["chunk_index"]) if p["url"] == url]


def test_a_request_failing_for_good_fails_only_its_pages_and_keeps_their_points(site, harness):
    for i in range(3):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-v1")]))
    rep = harness.run(embedder=remote(FakeOpenAI()))
    assert rep.pages_added == 3 and rep.pages_failed == 0
    before = harness.points()
    url1 = site.server.url("/p1.html")
    for i in range(3):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-v2")]))

    def refuse_p1(n, inputs):
        if any("p1-v2" in t for t in inputs):
            return httpx.Response(400, json={"error": {"message": "this input is refused"}})
        return None

    fake = FakeOpenAI(script=refuse_p1)
    rep = harness.run(embedder=remote(fake, concurrency=1), full=True)  # one request: split to find p1's texts
    assert rep.pages_changed == 2 and rep.pages_failed == 1
    assert [e["url"] for e in rep.errors] == [url1] and "this input is refused" in rep.errors[0]["error"]
    after = harness.points()
    assert texts_of(after, url1) == texts_of(before, url1)  # the old points, untouched
    for i in (0, 2):
        new = " ".join(texts_of(after, site.server.url(f"/p{i}.html")))
        assert f"p{i}-v2" in new and "v1" not in new
    # The next pass retries the failed page (due after its failure backoff) and writes it.
    rep = harness.run(embedder=remote(FakeOpenAI()), advance=timedelta(hours=2))
    assert rep.pages_changed == 1 and rep.pages_failed == 0
    assert "p1-v2" in " ".join(texts_of(harness.points(), url1))


def page_bound(html: str, url: str, splitter) -> int:
    """The offline token bound of one page's embedded texts (heading path and chunk), as the
    pass counts it."""
    ex = extract_page(html.encode(), "text/html", url)
    return sum(token_bound(c.embedded) for c in splitter.chunks(ex.markdown, ex.title))


def test_the_token_budget_stops_the_pass_before_it_would_pass_it(site, harness):
    # Pages of one size: each costs the same bound.
    html = {i: page_html(f"Page {i}", [f"p{i} " + "alpha beta gamma " * 20]) for i in range(4)}
    for i in range(4):
        site.set(f"/p{i}.html", html[i])
    bounds = {page_bound(html[i], site.server.url(f"/p{i}.html"), harness.splitter) for i in range(4)}
    assert len(bounds) == 1
    bound = bounds.pop()
    fake = FakeOpenAI(usage=False)  # billed at the offline bound: the spend is exact
    rep = harness.run(embedder=remote(fake), max_embed_tokens=2 * bound + 1, embed_batch=1, workers=1)
    assert rep.embed_budget_reached and not rep.ok
    assert rep.pages_added == 2 and rep.pages_over_token_budget >= 1
    assert rep.tokens_embedded == 2 * bound <= 2 * bound + 1
    assert [e["url"] for e in rep.errors] == ["(pass)"]
    assert "token budget reached (--max-embed-tokens" in rep.errors[0]["error"]
    assert len({p["url"] for p in harness.points().values()}) == 2
    with StateDB(harness.state_path) as st:  # the pages left are due again, as before the pass
        left = [p for p in st.all_pages() if not p.indexed]
    assert len(left) == 2 and all(p.failures == 0 for p in left)
    # The next pass, without the guard, embeds just the pages left.
    rep = harness.run(embedder=remote(FakeOpenAI()))
    assert rep.pages_added == 2 and rep.ok
    assert len({p["url"] for p in harness.points().values()}) == 4


def test_a_budget_of_zero_sends_nothing(site, harness):
    site.set("/p0.html", page_html("Page 0", [para("p0")]))
    fake = FakeOpenAI(dimension=8)
    emb = remote(fake, dimensions=8)  # no probe either
    rep = harness.run(embedder=emb, max_embed_tokens=0)
    assert rep.embed_budget_reached and rep.pages_over_token_budget == 1 and rep.tokens_embedded == 0
    assert fake.embedding_requests == [] and harness.points() == {}


def test_the_report_counts_tokens_sent_and_saved(site, harness):
    for i in range(3):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-a"), para(f"p{i}-b")]))
    fake = FakeOpenAI()
    rep = harness.run(embedder=remote(fake))
    sent = [t for b in fake.batches if b != PROBE for t in b]
    assert rep.chunks_embedded == len(sent) > 0
    assert rep.tokens_embedded == sum(words(t) for t in sent)
    assert rep.tokens_per_chunk == round(rep.tokens_embedded / rep.chunks_embedded, 2)
    # No change: nothing is sent; the skipped pages' chunks are what skip saved.
    fake.requests.clear()
    rep2 = harness.run(embedder=remote(fake), full=True)
    assert rep2.pages_not_modified + rep2.pages_unchanged == 3
    assert fake.embedding_requests == [] and rep2.tokens_embedded == 0
    assert rep2.tokens_saved_by_skip == round(rep.chunks_written * rep.tokens_per_chunk)  # the last pass's rate
    # One section added to one page: only its text is sent; the page's other chunks are reused.
    site.set("/p0.html", page_html("Page 0", [para("p0-a"), para("p0-b"), para("p0-c")]))
    rep3 = harness.run(embedder=remote(fake), full=True)
    assert rep3.pages_changed == 1 and rep3.chunks_reused > 0
    assert rep3.tokens_saved_by_reuse == round(rep3.chunks_reused * rep3.tokens_per_chunk)


def test_the_model_id_names_the_model_and_size_in_every_point(site, harness):
    site.set("/p0.html", page_html("Page 0", [para("p0")]))
    rep = harness.run(embedder=remote(FakeOpenAI(dimension=8), dimensions=8))
    assert rep.embedder == "openai:m@8"
    assert {p["embedder"] for p in harness.points().values()} == {"openai:m@8"}


def test_reindex_onto_a_remote_model_reports_its_tokens(site, harness):
    for i in range(2):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}")]))
    harness.run()
    fake = FakeOpenAI(dimension=8)
    rep = reindex(harness, remote(fake, dimensions=8))
    sent = [t for b in fake.batches for t in b]
    assert rep.ok and rep.tokens_embedded == sum(words(t) for t in sent) > 0
    assert rep.to_dict()["tokens_embedded"] == rep.tokens_embedded
    assert {p["embedder"] for p in harness.points().values()} == {"openai:m@8"}


def test_under_the_guard_a_page_needing_no_new_text_is_still_written(site, harness):
    def sections(*names: str) -> str:  # each section under its own heading, in this order
        return render_page("Page 0", "".join(f"<h2>Part {n}</h2><p>{para(n)}</p>" for n in names))

    site.set("/p0.html", sections("p0-a", "p0-b"))
    site.set("/p1.html", page_html("Page 1", [para("p1")]))
    fake = FakeOpenAI(dimension=8)
    harness.run(embedder=remote(fake, dimensions=8))
    site.set("/p0.html", sections("p0-b", "p0-a"))  # reordered: every embedded text known
    site.set("/p1.html", page_html("Page 1", [para("p1-new")]))  # a new text: over a budget of 0
    fake.requests.clear()
    rep = harness.run(embedder=remote(fake, dimensions=8), max_embed_tokens=0, full=True)
    assert rep.pages_changed == 1 and rep.pages_over_token_budget == 1 and rep.embed_budget_reached
    assert fake.embedding_requests == [] and rep.chunks_reused > 0
    texts = texts_of(harness.points(), site.server.url("/p0.html"))
    assert " ".join(texts).index("p0-b") < " ".join(texts).index("p0-a")  # written in its new order


def test_the_key_is_in_no_log_line_and_no_report_of_a_pass_with_retries_and_failures(site, harness, caplog):
    import json
    import logging

    site.set("/p0.html", page_html("Page 0", [para("p0")]))
    site.set("/p1.html", page_html("Page 1", [para("p1")]))

    def trouble(n, inputs):
        if n == 1:
            return httpx.Response(429, headers={"retry-after": "1"}, json={"error": {"message": f"slow, {KEY}"}})
        if any("p1" in t for t in inputs):
            return httpx.Response(400, json={"error": {"message": f"Incorrect input for key {KEY[:12]}***"}})
        return None

    caplog.set_level(logging.DEBUG)
    rep = harness.run(
        embedder=remote(FakeOpenAI(dimension=8, script=trouble), dimensions=8, concurrency=4, max_inputs=1)
    )
    assert rep.pages_failed == 1 and rep.pages_added == 1
    text = caplog.text + json.dumps(rep.to_dict())
    assert KEY not in text and KEY[:12] not in text and KEY[-6:] not in text


def test_the_guard_counts_by_the_bound_for_an_embedder_that_counts_no_tokens(site, harness):
    from embedders import HashEmbedder

    html = {i: page_html(f"Page {i}", [f"p{i} " + "delta epsilon " * 25]) for i in range(3)}
    for i in range(3):
        site.set(f"/p{i}.html", html[i])
    bound = page_bound(html[0], site.server.url("/p0.html"), harness.splitter)
    emb = HashEmbedder(16)
    rep = harness.run(embedder=emb, max_embed_tokens=2 * bound + 1, embed_batch=1, workers=1)
    assert rep.pages_added == 2 and rep.embed_budget_reached
    assert emb.texts_embedded == rep.chunks_embedded
    assert rep.tokens_embedded == 0 and rep.tokens_saved_by_skip == 0  # a local model bills nothing
