"""A deterministic, model-free embedder for fast unit tests (never the default)."""

from __future__ import annotations

import hashlib
import math
from typing import Sequence

__all__ = ["HashEmbedder"]


class HashEmbedder:
    """Vectors from SHA-256 of the text: equal texts get equal vectors, nothing is learned.

    Counts calls and texts so tests can assert what was (not) embedded.
    """

    def __init__(self, dimension: int = 16, model_id: str | None = None):
        self.dimension = dimension
        self.model_id = model_id or f"fake-hash-{dimension}"
        self.calls = 0
        self.texts_embedded = 0
        self.fail_next = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("injected embedder failure")
        self.calls += 1
        self.texts_embedded += len(texts)
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        raw = b""
        counter = 0
        while len(raw) < self.dimension:
            raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
            counter += 1
        vec = [(b - 127.5) / 127.5 for b in raw[: self.dimension]]
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]
