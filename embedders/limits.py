"""Pure rules of a remote embedder: token bounds, what a known model takes, requests per call,
what an answer may hold (`answer_cap`, `check_vectors`), when to stop asking a hanging
server (`TimeoutBreaker`).

No I/O here. `token_bound` is the one token rule pagesync counts by before it sends a text
(the spending guard, the input limit); what the provider then bills comes back in its
`usage` and is what the report says (`tokens_embedded`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = [
    "token_bound",
    "TOKEN_OVERHEAD",
    "ModelLimits",
    "KNOWN_MODELS",
    "limits_for",
    "plan_requests",
    "MAX_INPUTS_PER_REQUEST",
    "MAX_TOKENS_PER_REQUEST",
    "retry_wait",
    "answer_cap",
    "check_vectors",
    "TimeoutBreaker",
    "MAX_DIMENSION",
    "FLOAT32_MAX",
]

# Special tokens a tokenizer may add to one input ([CLS]/[SEP], BOS/EOS, a leading "▁").
TOKEN_OVERHEAD = 4
# OpenAI's embeddings endpoint: at most 2048 inputs and 300,000 tokens (summed) per request.
MAX_INPUTS_PER_REQUEST = 2048
MAX_TOKENS_PER_REQUEST = 300_000


def token_bound(text: str) -> int:
    """An upper bound of the tokens any common tokenizer makes of `text`, counted offline:
    its UTF-8 bytes plus `TOKEN_OVERHEAD`. Byte-level BPE (OpenAI's cl100k/o200k) makes at
    most one token per byte, WordPiece at most one per character, SentencePiece with byte
    fallback at most one per byte; each adds a few special tokens at most. English prose
    runs about 4 bytes a token, so the bound is about 4x what is billed."""
    return len(text.encode("utf-8", "surrogatepass")) + TOKEN_OVERHEAD


@dataclass(frozen=True)
class ModelLimits:
    """What pagesync knows of a model without asking: its vector size (without
    `dimensions`), whether it takes `dimensions`, its input limit in tokens."""

    dimension: int | None = None
    takes_dimensions: bool = False
    max_input_tokens: int | None = None


# OpenAI's embedding models (https://platform.openai.com/docs/guides/embeddings).
KNOWN_MODELS: dict[str, ModelLimits] = {
    "text-embedding-3-small": ModelLimits(1536, True, 8191),
    "text-embedding-3-large": ModelLimits(3072, True, 8191),
    "text-embedding-ada-002": ModelLimits(1536, False, 8191),
}


def limits_for(model: str) -> ModelLimits:
    """The known limits of `model` (all unknown for a model this table lacks)."""
    return KNOWN_MODELS.get(model, ModelLimits())


def plan_requests(
    bounds: Sequence[int],
    *,
    parts: int,
    max_inputs: int = MAX_INPUTS_PER_REQUEST,
    max_tokens: int = MAX_TOKENS_PER_REQUEST,
    max_input_tokens: int | None = None,
) -> list[list[int]]:
    """The requests one call's texts go in, as lists of text indices (each index once, in
    order within a request).

    A text whose bound exceeds the model's input limit goes alone, so that the server's
    refusal fails only the pages holding it. The others are spread over about `parts`
    requests (the concurrency: every slot busy), each within `max_inputs` texts and, unless
    it holds a single text, `max_tokens` bounded tokens.
    """
    alone = [[i] for i, b in enumerate(bounds) if max_input_tokens is not None and b > max_input_tokens]
    rest = [i for i, b in enumerate(bounds) if max_input_tokens is None or b <= max_input_tokens]
    size = max(1, min(max_inputs, math.ceil(len(rest) / max(1, parts)))) if rest else 1
    out: list[list[int]] = []
    cur: list[int] = []
    cur_tokens = 0
    for i in rest:
        if cur and (len(cur) >= size or cur_tokens + bounds[i] > max_tokens):
            out.append(cur)
            cur, cur_tokens = [], 0
        cur.append(i)
        cur_tokens += bounds[i]
    if cur:
        out.append(cur)
    return out + alone


def retry_wait(
    attempt: int,
    retry_after: float | None,
    *,
    base: float = 0.5,
    cap: float = 30.0,
    max_wait: float = 60.0,
    jitter: float = 1.0,
) -> float | None:
    """Seconds to wait before retry number `attempt` (1, 2, ...) of a request the server
    answered 429 or 5xx, or None when it is not worth retrying in this pass.

    The server's `Retry-After` is honoured as given up to `max_wait`; one asking for longer
    (an exhausted quota) is not waited for: the request fails now and its pages are retried
    by the next pass. Without one, exponential backoff from `base`, capped at `cap`, scaled
    by `jitter` (in [0.5, 1], drawn by the caller: requests in flight do not retry in step).
    """
    if retry_after is not None:
        return retry_after if retry_after <= max_wait else None
    return min(cap, base * 2 ** (attempt - 1)) * jitter


# Qdrant's largest vector: the size an answer is bounded by while the model's is not known.
MAX_DIMENSION = 65536
# What one number of an embeddings answer takes at most as JSON: 17 significant digits, a
# sign, a point, an exponent, a comma and a space ("-1.2345678901234567e-05, "), doubled for
# servers that pretty-print; and per vector its object's keys and indentation.
_BYTES_PER_VALUE = 64
_BYTES_PER_VECTOR = 4096
_ANSWER_OVERHEAD = 64 * 1024  # "usage", "model" and whatever else the server adds
# The largest float the store keeps (Qdrant's vectors are 32-bit floats).
FLOAT32_MAX = 3.4028234663852886e38


def answer_cap(texts: int, dimension: int | None) -> int:
    """The most bytes (decoded) an embeddings answer for `texts` inputs may take: their
    vectors of `dimension` numbers (`MAX_DIMENSION` while unknown) at their longest JSON
    form, and some room. A larger answer is no answer to this request (a bomb, an error page
    in a loop) and is not read past it: memory stays bounded whatever the server sends."""
    per_vector = (dimension or MAX_DIMENSION) * _BYTES_PER_VALUE + _BYTES_PER_VECTOR
    return max(1, texts) * per_vector + _ANSWER_OVERHEAD


def check_vectors(data: Any, n: int, dimension: int | None) -> tuple[list[list[float]], str | None]:
    """An answer's `data` as `n` unit-length vectors in input order, or ([], why not).

    `data` must be a list of `n` objects whose `index` values are each of 0..n-1 once (the
    order is theirs, not the list's), each `embedding` a list of `dimension` numbers (all of
    one length when `dimension` is None): JSON numbers, not booleans or strings, finite as
    the store's 32-bit floats, not all zero. A vector of NaN, of zeros, or another text's
    vector would be written as if it were this text's."""
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        return [], "it holds no list of embeddings"
    if len(data) != n:
        return [], f"{len(data)} vectors for {n} texts"
    indices = [d.get("index") for d in data]
    if any(type(i) is not int for i in indices) or sorted(indices) != list(range(n)):
        shown = ", ".join(repr(i) for i in indices[:5]) + (", ..." if n > 5 else "")
        return [], (
            f"its vectors are numbered ({shown}), not each of 0..{n - 1} once by 'index': which "
            f"text a vector is of is not known"
        )
    by_index = sorted(data, key=lambda d: d["index"])
    out: list[list[float]] = []
    size = dimension
    for d in by_index:
        raw = d.get("embedding")
        if not isinstance(raw, list) or not raw:
            return [], f"vector {d['index']} is no list of numbers"
        if size is not None and len(raw) != size:
            return [], f"a {len(raw)}-dimensional vector where the model makes {size}"
        size = len(raw)
        vec: list[float] = []
        for x in raw:
            if type(x) is not float and type(x) is not int:
                return [], f"vector {d['index']} holds {type(x).__name__} values, not numbers"
            try:
                f = float(x)
            except OverflowError:
                f = math.inf
            if not (math.isfinite(f) and abs(f) <= FLOAT32_MAX):
                return [], (
                    f"vector {d['index']} holds {x!r}, not a finite number (NaN, Infinity, or "
                    f"beyond a 32-bit float's range)"
                )
            vec.append(f)
        norm = math.sqrt(math.fsum(v * v for v in vec))  # each v <= FLOAT32_MAX: no overflow
        if norm == 0.0:
            return [], f"vector {d['index']} is all zeros (no direction)"
        out.append(vec if abs(norm - 1.0) < 1e-6 else [v / norm for v in vec])
    return out, None


@dataclass
class TimeoutBreaker:
    """Stops asking a server that hangs: after `threshold` timeouts in a row (across every
    request in flight) it holds every request for `cool_down` seconds, so a pass's remaining
    embeds fail at once rather than each waiting out its retries at the full timeout. Any
    answer (even a 5xx) closes it; after the cool-down a request may try again, and one
    more timeout holds again. Times are the caller's clock (`now`)."""

    threshold: int = 2
    cool_down: float = 300.0
    in_a_row: int = 0
    held_until: float | None = None
    last: str = ""

    def timed_out(self, now: float, what: str = "timeout", timeout: float | None = None) -> None:
        self.in_a_row += 1
        after = f" after {timeout:g} s" if timeout is not None else ""
        self.last = f"{what}{after}"
        if self.in_a_row >= self.threshold:
            self.held_until = now + self.cool_down

    def answered(self) -> None:
        self.in_a_row, self.held_until = 0, None

    def holds(self, now: float) -> str | None:
        """Why a request is not sent now (the message its texts fail with), or None."""
        if self.held_until is None or now >= self.held_until:
            return None
        return (
            f"the embeddings server timed out {self.in_a_row} times in a row (last: {self.last}); it is not "
            f"asked again for {self.held_until - now:.0f} s: these pages keep their points and are retried "
            f"by the next pass"
        )
