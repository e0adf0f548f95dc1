"""The embedder seam: a model id, a dimension, and batch embedding."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns a batch of texts into unit-length vectors of `dimension` floats.

    `model_id` goes into every point's `embedder` payload and into the pipeline
    fingerprint, so changing models re-embeds every page. `dimension` must be known
    without loading the model: a pass with nothing to embed never loads it (a remote
    model may ask its server once, in `check()`).

    Optional, read with getattr by the pass: `check()`, called before the first request
    (a model not installed, a server refusing the key: an exit-2 error); `tokens_embedded`,
    the tokens sent so far as the provider counted them; `token_bound(text)`, an upper
    bound counted offline (`embedders.limits.token_bound` otherwise). `embed` may raise
    `sync.errors.EmbedBatchError` when only some texts failed.
    """

    model_id: str

    @property
    def dimension(self) -> int: ...  # read-only: an attribute or a property (a size read lazily) both fit

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...
