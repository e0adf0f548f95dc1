"""A pass through a remote embedder whose server answers badly: vectors that are no vectors
fail their pages, which keep their old points; a server that hangs fails the pass's
remaining pages at once instead of each batch waiting out every retry."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import httpx
import pytest

from embedders.openai_api import OpenAIEmbedder
from tests.embedders.fake_openai import KEY, FakeOpenAI
from tests.helpers import page_html, para


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGESYNC_CACHE_DIR", str(tmp_path / "cache"))


def remote(handler, **kw) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "m",
        dimensions=8,
        base_url="http://fake/v1",
        api_key=KEY,
        sleep=lambda s: None,
        jitter=lambda: 1.0,
        transport=httpx.MockTransport(handler),
        **kw,
    )


def spoiling(fake: FakeOpenAI, value: str):
    """The fake's answers with every vector's numbers replaced by `value` (raw JSON)."""

    def handler(request: httpx.Request) -> httpx.Response:
        resp = fake.handler(request)
        if not request.url.path.endswith("/embeddings") or resp.status_code != 200:
            return resp
        body = json.loads(resp.read())
        for d in body["data"]:
            d["embedding"] = ["@"] * len(d["embedding"])
        return httpx.Response(200, content=json.dumps(body).replace('"@"', value).encode())

    return handler


@pytest.mark.parametrize("value", ["NaN", "0", "true", "1e309"])
def test_bad_vectors_fail_their_pages_and_the_old_points_stay(site, harness, value):
    for i in range(3):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-v1")]))
    rep = harness.run(embedder=remote(FakeOpenAI(dimension=8).handler))
    assert rep.pages_added == 3
    before = harness.points_and_vectors()
    for i in range(3):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-v2")]))
    rep = harness.run(embedder=remote(spoiling(FakeOpenAI(dimension=8), value)), full=True)
    assert rep.pages_failed == 3 and rep.pages_changed == 0
    assert all("answer is refused" in e["error"] for e in rep.errors), rep.errors
    assert harness.points_and_vectors() == before
    for vec in harness.vectors().values():
        assert all(math.isfinite(x) for x in vec) and any(x != 0 for x in vec)


def test_a_hanging_server_fails_the_pass_fast(site, harness):
    for i in range(6):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}")]))
    sent: list[int] = []
    waited: list[float] = []

    fake = FakeOpenAI(dimension=8)

    def hang(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return fake.handler(request)  # it answered before the pass; now it hangs
        sent.append(1)
        raise httpx.ReadTimeout("timed out", request=request)

    emb = OpenAIEmbedder(
        "m",
        dimensions=8,
        base_url="http://fake/v1",
        api_key=KEY,
        sleep=waited.append,
        jitter=lambda: 1.0,
        concurrency=1,
        transport=httpx.MockTransport(hang),
    )
    rep = harness.run(embedder=emb, embed_batch=1)  # one page a batch: six batches
    assert rep.pages_failed == 6 and rep.pages_added == 0
    assert len(sent) == 2 and len(waited) == 1  # two timeouts, then nothing sent: not 7 tries a batch
    assert sum("not asked again" in e["error"] for e in rep.errors) >= 5
    # The next pass, after the cool-down, asks again.
    rep = harness.run(embedder=remote(FakeOpenAI(dimension=8).handler), advance=timedelta(hours=2))
    assert rep.pages_added == 6 and rep.pages_failed == 0
