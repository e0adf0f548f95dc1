"""`--embedder openai:MODEL`: OpenAI's embeddings API, or any server that speaks it.

The server is `OPENAI_BASE_URL` (default `https://api.openai.com/v1`), the key
`OPENAI_API_KEY`: the variables OpenAI's own SDK reads. The key, and a password in the
URL, go into the request and nowhere else: no message, log line, report or cache file holds
them in any encoding (`_scrub`, `sync.core.secrets`), and a server's raw body is never shown.

Requests go through httpx, which pagesync already uses for the site, so that retries are
pagesync's own and testable: a 429 or 5xx (or a dropped connection) is retried after the
server's `Retry-After`, else after a bounded exponential backoff (`limits.retry_wait`); a
request that still fails fails only the texts it held (`EmbedBatchError`), so only their
pages fail, and one the server refuses for its content (400) is split to find the texts it
refuses. One call's texts are spread over up to `concurrency` requests in flight, each
within the provider's inputs and tokens per request (`limits.plan_requests`).

An answer is checked before a vector is kept: at most `answer_cap` bytes once decoded (read
streaming, like a page, `sync.core.inflate`), one finite, non-zero vector of numbers per text,
numbered by `index` 0..n-1; anything else fails the request's texts. A server that times out
`TimeoutBreaker.threshold` times in a row is asked nothing more for a while (`limits.TimeoutBreaker`):
the pass's remaining embeds fail at once instead of waiting out every retry.

The vector size comes from the model: OpenAI's known models and `dimensions` say it;
another model is asked once with a one-text probe, whose answer is kept in the cache
directory, so a later process sends nothing to learn it. `check()`, before a pass fetches
anything, asks the server's model list (no tokens): a wrong key or a server that does not
answer is exit 2 with one line.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import random
import re
import threading
import time
from typing import Any, Callable, Sequence

import httpx

from sync.core.inflate import ACCEPT_ENCODING, BoundedDecoder
from sync.core.secrets import public_url, redact, url_secrets
from sync.errors import ConfigError, EmbedBatchError, EmbedderError, EmbedderUnavailableError

from .dimension_cache import DimensionCache
from .limits import (
    MAX_INPUTS_PER_REQUEST,
    MAX_TOKENS_PER_REQUEST,
    TimeoutBreaker,
    answer_cap,
    check_vectors,
    limits_for,
    plan_requests,
    retry_wait,
    token_bound,
)

__all__ = ["OpenAIEmbedder", "PREFIX", "DEFAULT_BASE_URL", "DEFAULT_CONCURRENCY", "parse_model_id"]

log = logging.getLogger("pagesync.embedders")

PREFIX = "openai:"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_CONCURRENCY = 4  # requests in flight: well inside a hosted API's rate limits, enough to hide latency
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
PROBE_TEXT = "pagesync dimension probe"
_KEYLIKE = re.compile(r"\b(?:sk|pk|key)-[A-Za-z0-9_\-*.]{4,}")
ERROR_BODY_CAP = 64 * 1024  # an error answer is read for its message only
MODELS_BODY_CAP = 4 * 1024 * 1024  # GET /models: a few hundred models at most


def parse_model_id(name: str) -> tuple[str, int | None]:
    """`openai:MODEL` or `openai:MODEL@DIMENSIONS` (the model id of points made with
    `dimensions`) -> (MODEL, DIMENSIONS or None); `ConfigError` for anything else."""
    rest = name[len(PREFIX) :] if name.startswith(PREFIX) else name
    model, at, dims = rest.rpartition("@") if "@" in rest else (rest, "", "")
    if not model.strip():
        raise ConfigError(f"--embedder {name!r}: give the model, e.g. openai:text-embedding-3-small")
    if at and not (dims.isdigit() and int(dims) > 0):
        raise ConfigError(f"--embedder {name!r}: after '@' the vector size, a positive number")
    return model, int(dims) if at else None


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint as an `Embedder`.

    `model_id` is `openai:MODEL`, `openai:MODEL@N` with `dimensions=N`: another model or
    size is another embedder (no reuse across them, a collection mismatch is exit 2).
    `tokens_embedded` counts what the server billed (`usage`), the probe excluded.
    `transport`, `sleep` and `jitter` are for tests (httpx.MockTransport, no real waits).
    """

    def __init__(
        self,
        model: str,
        *,
        dimensions: int | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 6,
        max_inputs: int = MAX_INPUTS_PER_REQUEST,
        max_tokens: int = MAX_TOKENS_PER_REQUEST,
        max_input_tokens: int | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = lambda: 0.5 + random.random() / 2,
        cache_dimensions: bool = True,
        clock: Callable[[], float] = time.monotonic,
        breaker: TimeoutBreaker | None = None,
    ):
        if dimensions is not None and dimensions < 1:
            raise ConfigError(f"--embed-dimensions {dimensions}: a vector size is at least 1")
        if concurrency < 1:
            raise ConfigError(f"--embed-concurrency {concurrency}: at least 1 request in flight")
        known = limits_for(model)
        if dimensions is not None and known.dimension is not None and not known.takes_dimensions:
            raise ConfigError(
                f"{model} takes no dimensions (it always makes {known.dimension}): leave out --embed-dimensions"
            )
        self.model, self.dimensions, self.concurrency = model, dimensions, concurrency
        self.model_id = PREFIX + model + (f"@{dimensions}" if dimensions is not None else "")
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.__key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or None
        self.max_retries, self.max_inputs, self.max_tokens = max_retries, max_inputs, max_tokens
        self.max_input_tokens = max_input_tokens or known.max_input_tokens
        self._dimension = dimensions or known.dimension
        self._sleep, self._jitter, self._clock = sleep, jitter, clock
        self._timeout = timeout
        self._breaker = breaker or TimeoutBreaker()
        self._checked = False
        self._from_cache = False  # the vector size is an earlier probe's, read from the cache file
        self._lock = threading.Lock()
        self.tokens_embedded = 0  # as the server counted them (its `usage`), every request but the probe
        self.requests_sent = 0  # embedding requests, retries and the probe included
        self.texts_embedded = 0
        headers = {"Authorization": f"Bearer {self.__key}"} if self.__key else {}
        # Only the codings decoded under the answer's cap (`_read_capped`).
        headers["Accept-Encoding"] = ACCEPT_ENCODING
        # A password in the URL (https://user:pass@host/v1) is a secret like the key, and so is
        # the Basic header httpx derives from it (`url_secrets`, base64 in `secret_forms`).
        self.__secrets = tuple(x for x in (self.__key, *url_secrets(self.base_url)) if x)
        self.shown_url = public_url(self.base_url)  # the server as messages and the cache name it
        # Never the URL's userinfo in the key: the file is kept.
        self._sizes = DimensionCache(f"{self.shown_url} {self.model_id}", enabled=cache_dimensions)
        try:
            httpx.URL(self.base_url)
            self._client = httpx.Client(
                base_url=self.base_url + "/",
                headers=headers,
                timeout=timeout,
                transport=transport,
                follow_redirects=False,
                limits=httpx.Limits(max_connections=max(10, concurrency)),
            )
        except httpx.InvalidURL as exc:
            raise ConfigError(f"the embeddings server's URL (OPENAI_BASE_URL) is not a URL: {exc}") from None

    def __repr__(self) -> str:  # never the key
        return self._scrub(f"OpenAIEmbedder({self.model_id!r}, base_url={self.shown_url!r})")

    def close(self) -> None:
        self._client.close()

    # -- what the server says, scrubbed ------------------------------------------------------
    def _scrub(self, text: str) -> str:
        """`text` without the API key or the URL's password in any form (`redact`: as is,
        URL-encoded, JSON-escaped, base64 as in a Basic header), without any URL's userinfo,
        and without anything that looks like a key (a server echoes a masked one:
        "Incorrect API key provided: sk-ab***yz")."""
        return _KEYLIKE.sub("***", redact(text, self.__secrets))

    def _said(self, r: httpx.Response, body: bytes | None) -> str:
        """The server's own error message (OpenAI's `{"error": {"message"}}`, or a `detail` or
        `message` string), on one line, short and scrubbed; never the raw body, which may
        echo the request's headers: an answer without such a message is said by its size."""
        msg = None
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            doc = None
        err = doc.get("error", doc) if isinstance(doc, dict) else doc
        if isinstance(err, dict):
            err = err.get("message") or err.get("detail")
        if isinstance(err, str) and err.strip():
            msg = err
        if msg is None:
            size = "an answer over the size read" if body is None else f"a {len(body)}-byte answer"
            kind = r.headers.get("content-type", "").split(";")[0].strip() or "untyped"
            return f"no error message ({size}, {kind}, not shown)"
        msg = " ".join("".join(c if c.isprintable() else " " for c in msg).split())
        return self._scrub(msg[:300])

    def _request(
        self, method: str, path: str, cap: int, payload: dict | None = None
    ) -> tuple[httpx.Response, bytes | None]:
        """One request, its answer read streaming: (the answer, its decoded body, or None when
        the body is over `cap` bytes, or over `ERROR_BODY_CAP` for an error status). The
        whole answer must come within the timeout (a server trickling bytes is a timeout)."""
        request = self._client.build_request(method, path, json=payload)
        r = self._client.send(request, stream=True)
        try:
            return r, _read_capped(
                r, cap if r.status_code < 400 else min(cap, ERROR_BODY_CAP), self._clock, self._clock() + self._timeout
            )
        finally:
            r.close()

    # -- the checks before a pass ------------------------------------------------------------
    def check(self) -> None:
        """Before any page is fetched: the server answers and takes the key, the model is
        served, the vector size is known (`EmbedderUnavailableError`, exit 2, otherwise).
        Asks the model list (no tokens); only when that cannot tell (no list, the model not
        in it, the vector size unknown) does it embed one short probe text. Once it
        passed, a second call (the command's, then the pass's) asks nothing."""
        if self._checked:
            return
        if not self.__key and self.base_url == DEFAULT_BASE_URL:
            raise EmbedderUnavailableError(
                "OPENAI_API_KEY is not set: the key of the OpenAI API (or set "
                "OPENAI_BASE_URL to a server that needs none)"
            )
        try:
            r, body = self._request("GET", "models", MODELS_BODY_CAP)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if r.status_code in (401, 403):
            raise self._refused(r, body)
        served: list[str] = []
        if r.status_code == 200:
            try:
                data = json.loads(body or b"").get("data") or []
                served = [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
            except (ValueError, AttributeError, TypeError):  # not JSON, not an object, a "data" that is no list
                served = []
        if r.status_code != 200:
            # No model list here (a server without GET /models): one probe checks the key and the model.
            self._probe()
        elif served and self.model not in served:
            # Some servers list aliases only: the probe decides, and names what is served if it fails.
            self._probe(served=served)
        _ = self.dimension  # known, cached or probed: before the collection is opened
        self._checked = True

    def _unreachable(self, exc: BaseException) -> EmbedderUnavailableError:
        return EmbedderUnavailableError(
            self._scrub(
                f"the embeddings server at {self.shown_url} does not answer "
                f"({type(exc).__name__}: {exc or 'no answer'}); "
                f"check OPENAI_BASE_URL"
            )
        )

    def _refused(self, r: httpx.Response, body: bytes | None) -> EmbedderUnavailableError:
        return EmbedderUnavailableError(
            self._scrub(
                f"the embeddings server at {self.shown_url} refused the API key "
                f"(HTTP {r.status_code}: {self._said(r, body)}); check OPENAI_API_KEY"
            )
        )

    # -- the vector size ---------------------------------------------------------------------
    @property
    def dimension(self) -> int:
        """The model's vector size: `dimensions`, the known model's, the cached answer of an
        earlier probe, else one probe now (an `EmbedderError` when the server cannot tell)."""
        if self._dimension is None:
            cached = self._sizes.read()
            if cached is not None:
                self._dimension, self._from_cache = cached, True
            else:
                self._dimension = self._probe()
        return self._dimension

    def _probe(self, served: Sequence[str] = ()) -> int:
        """Embed one short text to learn the vector size (its tokens are not `tokens_embedded`)."""
        try:
            vectors, _ = self._post([PROBE_TEXT], probe=True)
        except EmbedderError as exc:
            also = f" (it serves: {', '.join(list(served)[:10])})" if served else ""
            raise EmbedderUnavailableError(
                self._scrub(f"model {self.model!r} at {self.shown_url}: {exc}{also}")
            ) from None
        dim = len(vectors[0])
        if self.dimensions is not None and dim != self.dimensions:
            raise EmbedderUnavailableError(
                self._scrub(
                    f"model {self.model!r} at {self.shown_url} made {dim}-dimensional "
                    f"vectors when asked for {self.dimensions} (--embed-dimensions)"
                )
            )
        self._dimension = dim
        self._sizes.write(dim)
        return dim

    # -- embedding ---------------------------------------------------------------------------
    def token_bound(self, text: str) -> int:
        """The offline upper bound of `text`'s tokens (`limits.token_bound`)."""
        return token_bound(text)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of `texts`, in order, from up to `concurrency` requests in flight.
        `EmbedBatchError` when some requests failed for good (the others' vectors in it)."""
        texts = list(texts)
        if not texts:
            return []
        plan = plan_requests(
            [token_bound(t) for t in texts],
            parts=self.concurrency,
            max_inputs=self.max_inputs,
            max_tokens=self.max_tokens,
            max_input_tokens=self.max_input_tokens,
        )
        out: list[list[float] | None] = [None] * len(texts)
        errors: dict[int, str] = {}

        def attempt(indices: list[int]) -> EmbedderError | None:
            """One request for `indices`: their vectors into `out`, or the error."""
            try:
                vectors, _ = self._post([texts[i] for i in indices])
            except EmbedderError as exc:
                return exc
            for i, v in zip(indices, vectors):
                out[i] = v
            return None

        def fail(indices: list[int], exc: EmbedderError) -> None:
            msg = str(exc)
            if len(indices) == 1 and self._too_long(texts[indices[0]]):
                msg = (
                    f"a chunk of up to {token_bound(texts[indices[0]])} tokens (counted offline) is longer "
                    f"than {self.model}'s input of {self.max_input_tokens} tokens and was refused ({msg}); "
                    f"pagesync does not cut chunks: use a smaller chunk size"
                )
            for i in indices:
                errors[i] = msg

        def isolate(indices: list[int], exc: EmbedderError) -> None:
            """A request the server refused for its content (400, 413, 422): its halves are sent
            apart, and only a half refused while the other was taken is split again, so one
            bad text fails alone; both halves refused (the request as such) fail as they are."""
            if not (isinstance(exc, _Refused) and len(indices) > 1):
                fail(indices, exc)
                return
            halves = [indices[: len(indices) // 2], indices[len(indices) // 2 :]]
            outcomes = [attempt(h) for h in halves]
            both = all(e is not None for e in outcomes)
            for half, e in zip(halves, outcomes):
                if e is None:
                    continue
                if both:
                    fail(half, e)
                else:
                    isolate(half, e)

        def one(indices: list[int]) -> None:
            exc = attempt(indices)
            if exc is not None:
                isolate(indices, exc)

        _bounded(one, plan, self.concurrency)
        if errors:
            first = errors[min(errors)]
            raise EmbedBatchError(f"{len(errors)} of {len(texts)} texts not embedded: {first}", out, errors)
        return out  # type: ignore[return-value]

    def _too_long(self, text: str) -> bool:
        return self.max_input_tokens is not None and token_bound(text) > self.max_input_tokens

    def _post(self, inputs: list[str], probe: bool = False) -> tuple[list[list[float]], int]:
        """One embeddings request, retried on 429/5xx/connection errors: its vectors (unit
        length, in input order) and the tokens the server counted."""
        payload: dict[str, Any] = {"model": self.model, "input": inputs}
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        cap = answer_cap(len(inputs), self._dimension)
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            with self._lock:
                held = self._breaker.holds(self._clock())
                if held is None:
                    self.requests_sent += 1
            if held is not None:
                raise EmbedderError(held)
            try:
                r, body = self._request("POST", "embeddings", cap, payload)
            except httpx.TimeoutException as exc:
                with self._lock:
                    self._breaker.timed_out(self._clock(), type(exc).__name__, self._timeout)
                    held = self._breaker.holds(self._clock())
                if held is not None:
                    raise EmbedderError(held) from None  # no retry: the server hangs
                problem = f"{type(exc).__name__}: {self._scrub(str(exc)) or 'no answer'}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {self._scrub(str(exc)) or 'no answer'}"
            else:
                with self._lock:
                    self._breaker.answered()
                if r.status_code < 400:
                    if body is None:
                        raise EmbedderError(
                            f"the embeddings server's answer is larger than {cap} bytes, more than "
                            f"{len(inputs)} vector(s) can take: not read"
                        )
                    return self._parse(body, inputs, probe)
                if r.status_code in (401, 403):
                    raise self._refused(r, body)
                problem = f"HTTP {r.status_code}: {self._said(r, body)}"
                if r.status_code not in RETRY_STATUSES:
                    raise _Refused(f"the embeddings server refused the request ({problem})")
                from sync.edges.fetcher import parse_retry_after

                retry_after = _retry_after_ms(r) or parse_retry_after(r.headers.get("retry-after"))
            wait = retry_wait(attempt, retry_after, jitter=self._jitter()) if attempt <= self.max_retries else None
            if wait is None:
                asked = f"; it asks to retry in {retry_after:.0f} s" if retry_after is not None else ""
                raise EmbedderError(f"the embeddings server failed {attempt} time(s) ({problem}{asked})")
            log.debug("embeddings request: %s; retry %d in %.1f s", problem, attempt, wait)
            self._sleep(wait)

    def _parse(self, body: bytes, inputs: list[str], probe: bool) -> tuple[list[list[float]], int]:
        """The vectors of an answer, in input order and at unit length (`limits.check_vectors`
        says what it must hold), and the tokens the server counted."""
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            raise EmbedderError("the embeddings server's answer is not JSON") from None
        data = doc.get("data") if isinstance(doc, dict) else None
        want = self._dimension
        vectors, problem = check_vectors(data, len(inputs), want)
        if problem is not None:
            why = ""
            if "dimensional" in problem and self._from_cache:
                why = (
                    f" (as an earlier probe found, remembered in {self._sizes.path}: delete it if the "
                    f"server's model changed)"
                )
            raise EmbedderError(f"the embeddings server's answer is refused: {problem}{why}")
        usage = doc.get("usage")
        counted = usage.get("prompt_tokens", usage.get("total_tokens")) if isinstance(usage, dict) else None
        # A server that counts nothing is charged the offline bound, so the budget guard holds.
        valid = isinstance(counted, (int, float)) and not isinstance(counted, bool) and math.isfinite(counted)
        tokens = int(counted) if valid and counted is not None else sum(token_bound(t) for t in inputs)
        if not probe:
            with self._lock:
                self.tokens_embedded += tokens
                self.texts_embedded += len(inputs)
        return vectors, tokens


class _Refused(EmbedderError):
    """The server refused a request for what it holds (a 4xx other than the key's): not
    retried as it is; split, so that only the texts it refuses fail (`embed`)."""


def _retry_after_ms(r: httpx.Response) -> float | None:
    """OpenAI's `retry-after-ms`, in seconds."""
    raw = r.headers.get("retry-after-ms")
    try:
        value = float(raw) / 1000 if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def _read_capped(r: httpx.Response, cap: int, clock: Callable[[], float], deadline: float) -> bytes | None:
    """`r`'s body decoded through its Content-Encoding under `cap` bytes (`BoundedDecoder`:
    a gzip bomb never inflates past the cap), or None when it is larger. Past `deadline`
    (by `clock`) the read is a `httpx.ReadTimeout`: a server trickling bytes hangs too."""
    try:
        body = r.content  # an answer built in memory (a test transport's) was read when built
        return body if len(body) <= cap else None
    except httpx.ResponseNotRead:
        pass
    decoder = BoundedDecoder(r.headers.get("content-encoding"), cap)
    chunks: list[bytes] = []
    size = 0
    for raw in r.iter_raw():
        for piece in decoder.feed(raw):
            chunks.append(piece)
            size += len(piece)
        if decoder.full or size > cap:
            return None
        if clock() > deadline:
            raise httpx.ReadTimeout("the whole answer took longer than the timeout", request=r.request)
    return b"".join(chunks)


def _bounded(fn: Callable[[list[int]], None], jobs: list[list[int]], limit: int) -> None:
    """`fn(job)` for every job, at most `limit` at once, in daemon threads (a pass stopped by
    Ctrl-C does not wait for requests in flight: `sync.edges.threads`). `fn` catches its own
    errors; anything else it raises is raised here once every job is done."""
    if len(jobs) <= 1 or limit <= 1:
        for job in jobs:
            fn(job)
        return
    todo: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
    for job in jobs:
        todo.put(job)
    raised: list[BaseException] = []

    def worker() -> None:
        while True:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            try:
                fn(job)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                raised.append(exc)

    threads = [
        threading.Thread(target=worker, name="pagesync-embed-request", daemon=True)
        for _ in range(min(limit, len(jobs)))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if raised:
        raise raised[0]
