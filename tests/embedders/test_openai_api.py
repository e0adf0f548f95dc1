"""The OpenAI-compatible embedder against a fake server (httpx.MockTransport): requests
within the provider's limits and the concurrency, retries on 429 and 5xx as the server
asks, a failing request failing only its texts, the vector size learned once, the key
never in a message."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from hypothesis import given, strategies as st

from embedders import make_embedder, name_for_model_id
from embedders.limits import TOKEN_OVERHEAD, plan_requests, retry_wait, token_bound
from embedders.openai_api import OpenAIEmbedder, parse_model_id
from sync.errors import ConfigError, EmbedBatchError, EmbedderError, EmbedderUnavailableError
from tests.embedders.fake_openai import KEY, FakeOpenAI


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGESYNC_CACHE_DIR", str(tmp_path / "cache"))


def make(fake: FakeOpenAI, model: str = "m", **kw) -> tuple[OpenAIEmbedder, list[float]]:
    sleeps: list[float] = []
    kw.setdefault("api_key", KEY)
    emb = OpenAIEmbedder(
        model, base_url="http://fake/v1", transport=fake.transport(), sleep=sleeps.append, jitter=lambda: 1.0, **kw
    )
    return emb, sleeps


def texts(n: int) -> list[str]:
    return [f"text number {i}" for i in range(n)]


# -- sizes and ids ------------------------------------------------------------------------
def test_the_vector_size_is_asked_once_and_remembered_by_the_next_process():
    fake = FakeOpenAI(dimension=12)
    emb, _ = make(fake)
    emb.check()
    assert emb.dimension == 12
    assert [m for m, _, _ in fake.requests] == ["GET", "POST"]  # the model list, one probe
    assert emb.tokens_embedded == 0  # the probe is not the pass's spend
    again, _ = make(fake)
    again.check()
    assert again.dimension == 12
    assert [m for m, _, _ in fake.requests] == ["GET", "POST", "GET"]  # no second probe


def test_a_known_model_needs_no_probe_and_dimensions_are_sent_and_part_of_the_id():
    fake = FakeOpenAI(models=("text-embedding-3-small",))
    emb, _ = make(fake, "text-embedding-3-small")
    assert emb.dimension == 1536 and emb.model_id == "openai:text-embedding-3-small"
    small, _ = make(fake, "text-embedding-3-small", dimensions=16)
    assert small.dimension == 16 and small.model_id == "openai:text-embedding-3-small@16"
    assert fake.requests == []
    assert len(small.embed(["a b"])[0]) == 16
    assert fake.embedding_requests[-1]["dimensions"] == 16


def test_model_ids_map_back_to_the_embedder_that_makes_them():
    emb = make_embedder("openai:text-embedding-3-small", dimensions=256)
    assert name_for_model_id(emb.model_id) == "openai:text-embedding-3-small@256"
    back = make_embedder(name_for_model_id(emb.model_id))
    assert back.model_id == emb.model_id and back.dimension == 256
    assert parse_model_id("openai:m") == ("m", None)
    with pytest.raises(ConfigError):
        make_embedder("openai:m@256", dimensions=512)
    with pytest.raises(ConfigError, match="takes no dimensions"):
        make_embedder("openai:text-embedding-ada-002", dimensions=256)
    with pytest.raises(ConfigError, match="remote embedder"):
        make_embedder("fake", dimensions=8)


def test_a_wrong_vector_size_from_the_server_is_an_error_not_a_point():
    fake = FakeOpenAI(dimension=8, models=("text-embedding-3-small",))
    emb, _ = make(fake, "text-embedding-3-small")  # expects 1536
    with pytest.raises(EmbedBatchError, match="8-dimensional"):
        emb.embed(["a"])


# -- requests -------------------------------------------------------------------------------
def test_a_call_is_spread_over_the_concurrency_within_the_inputs_per_request():
    fake = FakeOpenAI()
    emb, _ = make(fake, concurrency=3)
    emb._dimension = 8
    out = emb.embed(texts(10))
    assert sorted(len(b) for b in fake.batches) == [2, 4, 4]
    assert out == fake.embedder.embed(texts(10))  # in order, whatever order the requests ran in
    capped, _ = make(fake, concurrency=3, max_inputs=2)
    capped._dimension = 8
    fake.batches.clear()
    capped.embed(texts(10))
    assert sorted(len(b) for b in fake.batches) == [2] * 5


def test_requests_stay_within_the_tokens_per_request():
    fake = FakeOpenAI()
    emb, _ = make(fake, concurrency=1, max_tokens=3 * token_bound("text number 0"))
    emb._dimension = 8
    emb.embed(texts(7))
    assert [len(b) for b in fake.batches] == [3, 3, 1]


@given(
    bounds=st.lists(st.integers(1, 500), max_size=60),
    parts=st.integers(1, 8),
    max_inputs=st.integers(1, 10),
    max_tokens=st.integers(1, 2000),
    limit=st.one_of(st.none(), st.integers(1, 500)),
)
def test_the_request_plan_holds_every_text_once_within_the_limits(bounds, parts, max_inputs, max_tokens, limit):
    plan = plan_requests(bounds, parts=parts, max_inputs=max_inputs, max_tokens=max_tokens, max_input_tokens=limit)
    assert sorted(i for req in plan for i in req) == list(range(len(bounds)))
    for req in plan:
        assert len(req) <= max_inputs
        assert len(req) == 1 or sum(bounds[i] for i in req) <= max_tokens
        if limit is not None and any(bounds[i] > limit for i in req):
            assert len(req) == 1  # a text over the input limit goes alone


def test_no_more_requests_in_flight_than_the_concurrency():
    fake = FakeOpenAI()
    barrier = threading.Barrier(3, timeout=10)  # three must be in flight together, or it breaks
    fake.hold = barrier.wait
    emb, _ = make(fake, concurrency=3, max_inputs=1)
    emb._dimension = 8
    emb.embed(texts(9))
    assert len(fake.batches) == 9
    assert fake.max_in_flight == 3


# -- retries --------------------------------------------------------------------------------
def test_a_429_is_retried_after_the_servers_retry_after():
    fake = FakeOpenAI(
        script=lambda n, _: (
            httpx.Response(429, headers={"retry-after": "7"}, json={"error": {"message": "slow down"}})
            if n == 1
            else None
        )
    )
    emb, sleeps = make(fake)
    emb._dimension = 8
    assert emb.embed(["a b c"]) == fake.embedder.embed(["a b c"])
    assert sleeps == [7.0]
    assert emb.tokens_embedded == 3  # counted once, from the answer that came


def test_retry_after_ms_is_honoured():
    fake = FakeOpenAI(script=lambda n, _: httpx.Response(429, headers={"retry-after-ms": "250"}) if n == 1 else None)
    emb, sleeps = make(fake)
    emb._dimension = 8
    emb.embed(["a"])
    assert sleeps == [0.25]


def test_5xx_are_retried_with_a_bounded_exponential_backoff():
    fake = FakeOpenAI(script=lambda n, _: httpx.Response(503) if n <= 3 else None)
    emb, sleeps = make(fake)
    emb._dimension = 8
    emb.embed(["a"])
    assert sleeps == [0.5, 1.0, 2.0]
    assert [retry_wait(n, None) for n in (1, 7, 20)] == [0.5, 30.0, 30.0]


def test_a_server_failing_every_retry_fails_the_call_after_max_retries():
    fake = FakeOpenAI(script=lambda n, _: httpx.Response(500, json={"error": {"message": "boom"}}))
    emb, sleeps = make(fake, max_retries=3)
    emb._dimension = 8
    with pytest.raises(EmbedBatchError, match="failed 4 time.*HTTP 500: boom"):
        emb.embed(["a"])
    assert len(sleeps) == 3 and len(fake.embedding_requests) == 4


def test_a_retry_after_longer_than_a_minute_is_not_waited_for():
    fake = FakeOpenAI(script=lambda n, _: httpx.Response(429, headers={"retry-after": "3600"}))
    emb, sleeps = make(fake)
    emb._dimension = 8
    with pytest.raises(EmbedBatchError, match="retry in 3600 s"):
        emb.embed(["a"])
    assert sleeps == [] and len(fake.embedding_requests) == 1


def test_a_request_that_fails_for_good_fails_only_its_texts():
    fake = FakeOpenAI(
        script=lambda n, inputs: (
            httpx.Response(500, json={"error": {"message": "broken"}}) if "text number 3" in inputs else None
        )
    )
    emb, _ = make(fake, concurrency=5, max_retries=1)
    emb._dimension = 8
    with pytest.raises(EmbedBatchError) as info:
        emb.embed(texts(10))
    err = info.value
    assert set(err.errors) == {2, 3}  # the request of texts 2 and 3
    assert "broken" in err.errors[3]
    good = [i for i in range(10) if i not in err.errors]
    assert [err.vectors[i] for i in good] == fake.embedder.embed([texts(10)[i] for i in good])


def test_a_request_refused_for_its_content_is_split_until_the_refused_text_fails_alone():
    fake = FakeOpenAI(
        script=lambda n, inputs: (
            httpx.Response(400, json={"error": {"message": "bad input"}}) if "text number 5" in inputs else None
        )
    )
    emb, _ = make(fake, concurrency=1)
    emb._dimension = 8
    with pytest.raises(EmbedBatchError) as info:
        emb.embed(texts(8))
    assert info.value.errors == {5: info.value.errors[5]} and "bad input" in info.value.errors[5]
    assert len(fake.embedding_requests) == 7  # 8 texts; then 4+4, 2+2, 1+1
    assert all(info.value.vectors[i] is not None for i in range(8) if i != 5)


def test_a_request_refused_as_such_is_not_split_further():
    fake = FakeOpenAI(script=lambda n, inputs: httpx.Response(400, json={"error": {"message": "bad dimensions"}}))
    emb, _ = make(fake, concurrency=1)
    emb._dimension = 8
    with pytest.raises(EmbedBatchError) as info:
        emb.embed(texts(8))
    assert set(info.value.errors) == set(range(8))
    assert len(fake.embedding_requests) == 3  # the request, then both halves refused: no further split


def test_a_chunk_longer_than_the_models_input_goes_alone_and_its_refusal_says_why():
    long = "word " * 40

    def refuse_long(n, inputs):
        if long in inputs:
            return httpx.Response(400, json={"error": {"message": "maximum context length is 20 tokens"}})
        return None

    fake = FakeOpenAI(script=refuse_long)
    emb, _ = make(fake, concurrency=1, max_input_tokens=20)
    emb._dimension = 8
    with pytest.raises(EmbedBatchError) as info:
        emb.embed(["short one", long, "short two"])
    assert sorted(len(b) for b in fake.batches) == [2]  # the short ones together, the long one alone
    assert set(info.value.errors) == {1}
    assert "longer than m's input of 20 tokens" in info.value.errors[1]
    assert "does not cut chunks" in info.value.errors[1]


# -- the check, the key -------------------------------------------------------------------
def test_a_wrong_key_is_refused_by_check_and_never_said():
    fake = FakeOpenAI()
    emb, _ = make(fake, api_key="sk-wrong-key-0000SECRET")
    with pytest.raises(EmbedderUnavailableError) as info:
        emb.check()
    msg = str(info.value)
    assert "refused the API key" in msg and "HTTP 401" in msg
    assert "sk-wrong-key-0000SECRET" not in msg and "SECRET" not in msg
    assert "SECRET" not in repr(emb)
    assert isinstance(info.value, ConfigError)  # exit 2


def test_the_key_is_in_no_error_a_request_can_raise():
    echo = f"invalid request from {KEY}"
    fake = FakeOpenAI(script=lambda n, _: httpx.Response(400, json={"error": {"message": echo}}))
    emb, _ = make(fake)
    emb._dimension = 8
    with pytest.raises(EmbedderError) as info:
        emb.embed(["a"])
    assert KEY not in str(info.value) and KEY not in str(info.value.errors)


def test_an_unreachable_server_is_refused_by_check():
    def down(request):
        raise httpx.ConnectError("connection refused", request=request)

    emb = OpenAIEmbedder("m", base_url="http://fake/v1", api_key=KEY, transport=httpx.MockTransport(down))
    with pytest.raises(EmbedderUnavailableError, match="does not answer"):
        emb.check()


def test_a_model_the_server_does_not_serve_is_refused_by_check():
    fake = FakeOpenAI(models=("other",))
    emb, _ = make(fake, "m")
    with pytest.raises(EmbedderUnavailableError, match=r"does not exist.*it serves: other"):
        emb.check()


def test_no_key_for_openai_itself_is_refused(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EmbedderUnavailableError, match="OPENAI_API_KEY is not set"):
        OpenAIEmbedder("text-embedding-3-small").check()


def test_the_base_url_and_key_come_from_the_sdks_variables(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://fake/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake = FakeOpenAI()
    emb = OpenAIEmbedder("m", transport=fake.transport())
    emb.check()
    assert emb.base_url == "http://fake/v1"
    assert fake.requests[0][1] == "/v1/models"


# -- tokens ---------------------------------------------------------------------------------
def test_tokens_are_the_servers_count_else_the_offline_bound():
    fake = FakeOpenAI()
    emb, _ = make(fake)
    emb._dimension = 8
    emb.embed(["one two three", "four"])
    assert emb.tokens_embedded == 4
    silent = FakeOpenAI(usage=False)
    emb2, _ = make(silent)
    emb2._dimension = 8
    emb2.embed(["one two three"])
    assert emb2.tokens_embedded == token_bound("one two three") == len("one two three") + TOKEN_OVERHEAD


def test_a_remembered_size_the_server_no_longer_makes_says_where_it_is_kept():
    emb, _ = make(FakeOpenAI(dimension=12))
    emb.check()
    changed, _ = make(FakeOpenAI(dimension=6))  # the same name now serves another model
    assert changed.dimension == 12
    with pytest.raises(EmbedBatchError, match=r"remembered in .*remote-dimensions.json: delete it"):
        changed.embed(["a"])


def test_without_a_model_list_the_check_probes_so_a_wrong_key_is_still_refused():
    fake = FakeOpenAI(list_models=False, models=("text-embedding-3-small",))
    good, _ = make(fake, "text-embedding-3-small", dimensions=8)  # a known size: no probe needed for it
    good.check()
    assert [m for m, _, _ in fake.requests] == ["GET", "POST"]
    bad, _ = make(fake, "text-embedding-3-small", dimensions=8, api_key="sk-nope-000000")
    with pytest.raises(EmbedderUnavailableError, match="refused the API key"):
        bad.check()


# -- what a server or a setting may get wrong -------------------------------------------------
def test_a_base_url_that_is_no_url_is_a_config_error_not_a_traceback():
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        OpenAIEmbedder("m", base_url="http://[::1/", api_key=KEY)


def test_a_password_in_the_base_url_is_in_no_message():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    emb = OpenAIEmbedder(
        "m", base_url="http://me:hunter2pass@fake/v1", api_key=KEY, transport=httpx.MockTransport(refuse)
    )
    assert "hunter2pass" not in repr(emb)
    with pytest.raises(EmbedderUnavailableError) as err:
        emb.check()
    assert "does not answer" in str(err.value) and "hunter2pass" not in str(err.value)


@pytest.mark.parametrize("body", [{"data": 5}, {"data": {"id": "m"}}, [1, 2]])
def test_a_model_list_of_another_shape_is_no_list_and_the_probe_decides(body):
    fake = FakeOpenAI(dimension=8)
    inner = fake.handler

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json=body)
        return inner(request)

    emb = OpenAIEmbedder("m", base_url="http://fake/v1", api_key=KEY, transport=httpx.MockTransport(handler))
    emb.check()
    assert emb.dimension == 8


@pytest.mark.parametrize("count", [float("nan"), float("inf"), True, "12"])
def test_a_token_count_that_is_no_finite_number_is_charged_the_offline_bound(count):
    def handler(request: httpx.Request) -> httpx.Response:
        inputs = json.loads(request.content)["input"]
        data = [{"index": i, "embedding": [1.0, 0.0]} for i in range(len(inputs))]
        return httpx.Response(
            200,
            content=json.dumps({"data": data, "usage": {"prompt_tokens": count}}),
            headers={"content-type": "application/json"},
        )

    emb = OpenAIEmbedder("m", base_url="http://fake/v1", api_key=KEY, transport=httpx.MockTransport(handler))
    emb._dimension = 2
    emb.embed(["one two"])
    assert emb.tokens_embedded == token_bound("one two")
