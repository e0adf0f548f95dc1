"""Pure rules of a remote embedder: token bounds, what a known model takes, requests per call.

No I/O here. `token_bound` is the one token rule pagesync counts by before it sends a text
(the spending guard, the input limit); what the provider then bills comes back in its
`usage` and is what the report says (`tokens_embedded`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["token_bound", "TOKEN_OVERHEAD", "ModelLimits", "KNOWN_MODELS", "limits_for", "plan_requests",
           "MAX_INPUTS_PER_REQUEST", "MAX_TOKENS_PER_REQUEST", "retry_wait"]

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


def plan_requests(bounds: Sequence[int], *, parts: int, max_inputs: int = MAX_INPUTS_PER_REQUEST,
                  max_tokens: int = MAX_TOKENS_PER_REQUEST, max_input_tokens: int | None = None) -> list[list[int]]:
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


def retry_wait(attempt: int, retry_after: float | None, *, base: float = 0.5, cap: float = 30.0,
               max_wait: float = 60.0, jitter: float = 1.0) -> float | None:
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
