"""The embedder seam: a model id, a dimension, and batch embedding."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns a batch of texts into unit-length vectors of `dimension` floats.

    `model_id` goes into every point's `embedder` payload and into the pipeline
    fingerprint, so changing models re-embeds every page. `dimension` must be known
    without loading the model: a pass with nothing to embed never loads it.
    """

    model_id: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...
