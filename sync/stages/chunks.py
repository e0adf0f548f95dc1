"""The pass's splitter: chunk sizes in the embedder's own tokens, bounded by what it reads.

`chunk_sizes` is the rule (pure): `--chunk-tokens` defaults to the model's input (at most
`DEFAULT_CHUNK_TOKENS`), `--chunk-overlap` to a tenth of it, and `--max-chunk-tokens` (the
bound of every embedded text, heading path and special tokens included) to the model's
input limit (a remote model of unknown input: an assumed one, which the flag may raise); a
model's known limit cannot be raised. `splitter_for` builds the splitter.
"""

from __future__ import annotations

from dataclasses import dataclass

from chunking import Splitter

from ..errors import ConfigError

__all__ = ["ChunkSizes", "chunk_sizes", "splitter_for", "DEFAULT_CHUNK_TOKENS"]

# Chunks for a model that reads more than this are this long: a retrieval-sized passage
# (a 8,191-token input makes one vector of a whole page).
DEFAULT_CHUNK_TOKENS = 1024
# Without a tokenizer (the test fake) sizes are characters, as before tokens were counted.
CHAR_CHUNK_SIZE, CHAR_CHUNK_OVERLAP = 1000, 100


@dataclass(frozen=True)
class ChunkSizes:
    chunk_tokens: int
    chunk_overlap: int
    max_tokens: int | None


def chunk_sizes(
    model_limit: int | None,
    *,
    chunk_tokens: int | None = None,
    chunk_overlap: int | None = None,
    max_chunk_tokens: int | None = None,
    assumed_limit: int | None = None,
) -> ChunkSizes:
    """The sizes a pass chunks with; `ConfigError` (exit 2) for sizes that cannot hold.

    `assumed_limit`: the bound when the model's limit is unknown and `max_chunk_tokens` is
    not given (a remote model of unknown input); unlike a known limit, the flag may raise it."""
    if max_chunk_tokens is not None:
        if max_chunk_tokens < 16:
            raise ConfigError(f"--max-chunk-tokens {max_chunk_tokens}: at least 16")
        if model_limit is not None and max_chunk_tokens > model_limit:
            raise ConfigError(
                f"--max-chunk-tokens {max_chunk_tokens}: the model reads {model_limit} tokens of an "
                f"input and drops the rest"
            )
    bound = max_chunk_tokens or model_limit or assumed_limit
    size = chunk_tokens if chunk_tokens is not None else min(bound or DEFAULT_CHUNK_TOKENS, DEFAULT_CHUNK_TOKENS)
    if size < 8:
        raise ConfigError(f"--chunk-tokens {size}: at least 8")
    if bound is not None and size > bound:
        why = (
            " (--max-chunk-tokens)"
            if max_chunk_tokens
            else ""
            if model_limit
            else ", assumed of a model whose input is not known: give --max-chunk-tokens N"
        )
        raise ConfigError(f"--chunk-tokens {size} is more than the model reads ({bound} tokens{why})")
    overlap = chunk_overlap if chunk_overlap is not None else size // 10
    if not 0 <= overlap < size:
        raise ConfigError(f"--chunk-overlap {overlap}: from 0 to less than the chunk size ({size})")
    return ChunkSizes(size, overlap, bound)


def splitter_for(
    embedder: object,
    *,
    chunk_tokens: int | None = None,
    chunk_overlap: int | None = None,
    max_chunk_tokens: int | None = None,
) -> Splitter:
    """The splitter for `embedder`'s tokens (`embedders.tokens.counter_for`); characters
    for an embedder without a tokenizer, where the same flags count characters."""
    from embedders.tokens import counter_for

    counter = counter_for(embedder)
    if counter is None:
        size = chunk_tokens if chunk_tokens is not None else CHAR_CHUNK_SIZE
        overlap = (
            chunk_overlap if chunk_overlap is not None else (CHAR_CHUNK_OVERLAP if chunk_tokens is None else size // 10)
        )
        if size < 8 or not 0 <= overlap < size:
            raise ConfigError(f"--chunk-tokens {size} / --chunk-overlap {overlap}: need 0 <= overlap < size, size >= 8")
        return Splitter(chunk_size=size, chunk_overlap=overlap)
    sizes = chunk_sizes(
        counter.limit,
        chunk_tokens=chunk_tokens,
        chunk_overlap=chunk_overlap,
        max_chunk_tokens=max_chunk_tokens,
        assumed_limit=getattr(counter, "assumed", None),
    )
    return Splitter(
        chunk_size=sizes.chunk_tokens, chunk_overlap=sizes.chunk_overlap, counter=counter, max_tokens=sizes.max_tokens
    )
