"""What an OpenAI-compatible server answers is checked before a vector is kept: finite
numbers, no zero vector, every `index` once; its size is bounded as it is read (a gzip bomb,
a huge body); a server that keeps timing out is not asked again for a while."""

from __future__ import annotations

import json
import math
import tracemalloc
import zlib

import httpx
import pytest
from hypothesis import given, strategies as st

from embedders.limits import FLOAT32_MAX, TimeoutBreaker, answer_cap, check_vectors
from embedders.openai_api import OpenAIEmbedder
from sync.errors import EmbedBatchError, EmbedderError
from tests.embedders.fake_openai import KEY, FakeOpenAI


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGESYNC_CACHE_DIR", str(tmp_path / "cache"))


def answering(body: bytes | str, **kw) -> OpenAIEmbedder:
    """An embedder of 2-dimensional vectors whose server answers `body` to every request."""
    raw = body.encode() if isinstance(body, str) else body
    return OpenAIEmbedder(
        "m",
        dimensions=2,
        base_url="http://fake/v1",
        api_key=KEY,
        sleep=lambda s: None,
        transport=httpx.MockTransport(lambda r: httpx.Response(200, content=raw)),
        **kw,
    )


def data(*entries: str) -> str:
    return '{"data": [' + ", ".join(entries) + "]}"


# -- bad vectors are no vectors -----------------------------------------------------------
BAD_ANSWERS = {
    "NaN": data('{"index": 0, "embedding": [NaN, 1]}'),
    "Infinity": data('{"index": 0, "embedding": [Infinity, 1]}'),
    "-Infinity": data('{"index": 0, "embedding": [0.5, -Infinity]}'),
    "1e309 overflows": data('{"index": 0, "embedding": [1e309, 1]}'),
    "1e308 is past a 32-bit float": data('{"index": 0, "embedding": [1e308, 1e308]}'),
    "a huge integer": data('{"index": 0, "embedding": [' + "9" * 400 + ", 1]}"),
    "all zeros": data('{"index": 0, "embedding": [0, 0.0]}'),
    "booleans": data('{"index": 0, "embedding": [true, false]}'),
    "strings": data('{"index": 0, "embedding": ["0.5", "0.5"]}'),
    "nulls": data('{"index": 0, "embedding": [null, 1]}'),
    "a nested list": data('{"index": 0, "embedding": [[1], 1]}'),
    "no index": data('{"embedding": [1, 0]}'),
    "an index out of range": data('{"index": 1, "embedding": [1, 0]}'),
    "a boolean index": data('{"index": false, "embedding": [1, 0]}'),
    "a string index": data('{"index": "0", "embedding": [1, 0]}'),
}


@pytest.mark.parametrize("what", BAD_ANSWERS)
def test_a_vector_that_is_no_finite_nonzero_list_of_numbers_fails_the_request(what):
    emb = answering(BAD_ANSWERS[what])
    with pytest.raises(EmbedBatchError) as err:
        emb.embed(["one text"])
    assert err.value.vectors == [None] and "answer is refused" in str(err.value), str(err.value)


@pytest.mark.parametrize("indices", [[0, 0], [1, 1], [0, 2], [None, 1], [0, None]])
def test_indices_must_be_each_of_0_to_n_minus_1_once(indices):
    entries = [
        json.dumps({k: v for k, v in {"index": i, "embedding": [1, j]}.items() if v is not None})
        for j, i in enumerate(indices)
    ]
    with pytest.raises(EmbedBatchError) as err:
        answering(data(*entries), concurrency=1).embed(["a", "b"])
    assert "'index'" in str(err.value) and err.value.vectors == [None, None]


def test_vectors_answered_out_of_order_go_to_the_text_their_index_names():
    fake = FakeOpenAI(dimension=4)
    emb = OpenAIEmbedder(
        "m",
        base_url="http://fake/v1",
        api_key=KEY,
        dimensions=4,
        sleep=lambda s: None,
        concurrency=1,
        transport=httpx.MockTransport(lambda r: _reversed(fake.handler(r))),
    )
    inputs = ["first text", "second text", "third text"]
    for got, want in zip(emb.embed(inputs), fake.embedder.embed(inputs)):
        assert got == pytest.approx(want)


def _reversed(resp: httpx.Response) -> httpx.Response:
    body = json.loads(resp.read())
    body["data"] = body["data"][::-1]
    return httpx.Response(resp.status_code, json=body)


def test_a_refused_answer_is_not_retried_and_fails_only_its_request():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        inputs = json.loads(request.content)["input"]
        calls.append(inputs)
        vec = "[NaN, 1]" if "bad" in inputs[0] else "[1, 0]"
        return httpx.Response(200, content=data(*(f'{{"index": {i}, "embedding": {vec}}}' for i in range(len(inputs)))))

    emb = OpenAIEmbedder(
        "m",
        dimensions=2,
        concurrency=2,
        base_url="http://fake/v1",
        api_key=KEY,
        sleep=lambda s: None,
        transport=httpx.MockTransport(handler),
    )
    with pytest.raises(EmbedBatchError) as err:
        emb.embed(["bad text", "good text"])
    assert err.value.vectors == [None, [1.0, 0.0]] and len(calls) == 2


@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, min_value=-FLOAT32_MAX, max_value=FLOAT32_MAX),
        min_size=1,
        max_size=16,
    )
)
def test_every_finite_vector_that_is_not_zero_comes_back_at_unit_length(values):
    vectors, problem = check_vectors([{"index": 0, "embedding": values}], 1, None)
    if math.fsum(v * v for v in values) == 0:
        assert problem is not None and "zeros" in problem
    else:
        assert problem is None
        assert math.isclose(math.sqrt(math.fsum(v * v for v in vectors[0])), 1.0, rel_tol=1e-9)
        assert all(math.isfinite(v) for v in vectors[0])


# -- the answer's size is bounded -----------------------------------------------------------
class Chunks(httpx.SyncByteStream):
    """A body sent in pieces, counting what was read of it."""

    def __init__(self, pieces):
        self.pieces, self.read = pieces, 0

    def __iter__(self):
        for piece in self.pieces:
            self.read += len(piece)
            yield piece


def gzip_bomb(size: int) -> list[bytes]:
    """`size` bytes of spaces, gzipped (about 64 KB for 64 MiB), in 4 KiB pieces."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    out = b"".join(z.compress(block) for _ in range(size >> 20)) + z.flush()
    return [out[i : i + 4096] for i in range(0, len(out), 4096)]


def streaming(stream: Chunks, headers: dict[str, str]) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "m",
        dimensions=8,
        base_url="http://fake/v1",
        api_key=KEY,
        sleep=lambda s: None,
        transport=httpx.MockTransport(lambda r: httpx.Response(200, headers=headers, stream=stream)),
    )


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
def test_an_answer_larger_than_its_vectors_can_take_is_not_read_past_the_cap(encoding):
    size = 64 << 20  # 64 MiB decoded, for one 8-dimensional vector
    if encoding == "gzip":
        stream = Chunks(gzip_bomb(size))
        headers = {"content-encoding": "gzip", "content-type": "application/json"}
    else:
        stream = Chunks([b" " * (1 << 20)] * (size >> 20))
        headers = {"content-type": "application/json"}
    total = sum(len(p) for p in stream.pieces)
    emb = streaming(stream, headers)
    tracemalloc.start()
    try:
        with pytest.raises(EmbedBatchError) as err:
            emb.embed(["one text"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "larger than" in str(err.value)
    assert stream.read < total  # reading stopped at the cap
    assert peak < 8 << 20, peak  # never the whole body in memory


def test_an_answer_within_its_cap_is_read_whole_through_its_encoding():
    body = json.dumps({"data": [{"index": 0, "embedding": [0.0] * 7 + [2.0]}]}).encode()
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = gz.compress(body) + gz.flush()
    emb = streaming(Chunks([packed[:10], packed[10:]]), {"content-encoding": "gzip"})
    assert emb.embed(["a"]) == [[0.0] * 7 + [1.0]]


def test_the_cap_grows_with_the_texts_and_the_vector_size():
    assert answer_cap(16, 1536) > 16 * 1536 * len("-0.012345678901234567, ")
    assert answer_cap(1, 8) < answer_cap(2, 8) < answer_cap(2, 16) < answer_cap(2, None)


# -- a hanging server --------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def hanging(clock: Clock, **kw) -> tuple[OpenAIEmbedder, list[int]]:
    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(len(json.loads(request.content)["input"]))
        clock.now += 60  # the request waited its whole timeout
        raise httpx.ReadTimeout("timed out", request=request)

    emb = OpenAIEmbedder(
        "m",
        dimensions=8,
        base_url="http://fake/v1",
        api_key=KEY,
        sleep=clock.sleep,
        clock=clock,
        jitter=lambda: 1.0,
        transport=httpx.MockTransport(handler),
        **kw,
    )
    return emb, sent


def test_two_timeouts_in_a_row_fail_the_remaining_embeds_at_once():
    clock = Clock()
    emb, sent = hanging(clock, concurrency=1)
    with pytest.raises(EmbedBatchError) as err:
        emb.embed(["a", "b"])
    assert len(sent) == 2  # not 7 tries
    assert "timed out 2 times in a row" in str(err.value) and "next pass" in str(err.value)
    spent = clock.now
    for _ in range(5):  # the pass's later batches: nothing sent, no time spent
        with pytest.raises(EmbedBatchError, match="not asked again"):
            emb.embed(["c", "d"])
    assert len(sent) == 2 and clock.now == spent


def test_after_the_cool_down_the_server_is_tried_again_and_an_answer_closes_the_breaker():
    clock = Clock()
    breaker = TimeoutBreaker(threshold=2, cool_down=300)
    emb, sent = hanging(clock, concurrency=1, breaker=breaker)
    with pytest.raises(EmbedBatchError):
        emb.embed(["a"])
    clock.now += 301
    with pytest.raises(EmbedBatchError):
        emb.embed(["b"])
    assert len(sent) == 3  # one try after the cool-down, which timed out again
    breaker.answered()
    assert breaker.holds(clock.now) is None


def test_timeouts_broken_by_an_answer_do_not_trip_the_breaker():
    breaker = TimeoutBreaker(threshold=2)
    breaker.timed_out(0.0)
    breaker.answered()
    breaker.timed_out(1.0)
    assert breaker.holds(1.0) is None
    breaker.timed_out(2.0)
    assert breaker.holds(2.0) is not None and breaker.holds(2.0 + breaker.cool_down) is None


def test_a_server_trickling_its_answer_past_the_timeout_is_a_timeout():
    clock = Clock()

    class Trickle(httpx.SyncByteStream):
        def __iter__(self):
            for _ in range(100):
                clock.now += 10  # a byte every 10 s: each read within the timeout, the whole not
                yield b" "

    emb = OpenAIEmbedder(
        "m",
        dimensions=8,
        base_url="http://fake/v1",
        api_key=KEY,
        sleep=clock.sleep,
        clock=clock,
        concurrency=1,
        timeout=60,
        jitter=lambda: 1.0,
        transport=httpx.MockTransport(lambda r: httpx.Response(200, stream=Trickle())),
    )
    with pytest.raises(EmbedderError, match="timed out 2 times"):
        emb.embed(["a"])
