"""Embedders: the `Embedder` protocol, the bundled offline default, and a test fake."""

from __future__ import annotations

from sync.errors import ConfigError

from .base import Embedder
from .fake import HashEmbedder
from .sentence import DEFAULT_MODEL_ID, MiniLMEmbedder

__all__ = ["Embedder", "HashEmbedder", "MiniLMEmbedder", "DEFAULT_MODEL_ID", "make_embedder", "EMBEDDER_NAMES"]

EMBEDDER_NAMES = ("all-MiniLM-L6-v2", DEFAULT_MODEL_ID, "fake")


def make_embedder(name: str | None) -> Embedder:
    """Embedder by CLI name: the bundled MiniLM (default) or `fake` (tests and dry demos only)."""
    if name in (None, "", "default", "all-MiniLM-L6-v2", DEFAULT_MODEL_ID):
        return MiniLMEmbedder()
    if name == "fake" or name.startswith("fake-"):
        dim = int(name.split("-", 1)[1]) if "-" in name else 16
        return HashEmbedder(dim)
    raise ConfigError(f"unknown embedder {name!r}; choose one of: {', '.join(EMBEDDER_NAMES)}")
