"""Embedders: the `Embedder` protocol, the bundled offline default (ONNX Runtime or torch), a remote
OpenAI-compatible endpoint (`openai:MODEL`), and a test fake."""

from __future__ import annotations

from sync.errors import ConfigError

from . import onnx_backend
from .base import Embedder
from .fake import HashEmbedder
from .onnx_backend import OnnxMiniLMEmbedder
from .openai_api import OpenAIEmbedder
from .sentence import DEFAULT_MODEL_ID, MiniLMEmbedder

__all__ = ["Embedder", "HashEmbedder", "MiniLMEmbedder", "OnnxMiniLMEmbedder", "OpenAIEmbedder", "DEFAULT_MODEL_ID",
           "make_embedder", "EMBEDDER_NAMES", "name_for_model_id", "REMOTE_PREFIXES"]

# The default and its model names pick the fastest backend that can run here (ONNX Runtime,
# else torch); `minilm-onnx` and `minilm-torch` force one. Both give the same vectors under
# the same model id, so switching between them re-embeds nothing.
DEFAULT_NAMES = ("default", "all-MiniLM-L6-v2", DEFAULT_MODEL_ID)
EMBEDDER_NAMES = (*DEFAULT_NAMES[1:], "minilm-onnx", "minilm-torch", "openai:MODEL", "fake")
REMOTE_PREFIXES = ("openai:",)  # embedders that take --embed-dimensions and --embed-concurrency


def make_embedder(name: str | None, *, dimensions: int | None = None, concurrency: int | None = None) -> Embedder:
    """Embedder by CLI name: the bundled MiniLM (default), a forced backend, `openai:MODEL`
    (`openai:MODEL@N`: with `dimensions` N, the form its points' model id takes), or
    `fake[-N]` (tests only). `dimensions` and `concurrency` are the remote embedders' only."""
    if name and name.startswith(REMOTE_PREFIXES):
        from .openai_api import DEFAULT_CONCURRENCY, parse_model_id

        model, dims = parse_model_id(name)
        if dims is not None and dimensions is not None and dims != dimensions:
            raise ConfigError(f"--embedder {name!r} and --embed-dimensions {dimensions} name two vector sizes")
        return OpenAIEmbedder(model, dimensions=dimensions or dims, concurrency=concurrency or DEFAULT_CONCURRENCY)
    if dimensions is not None or concurrency is not None:
        flag = "--embed-dimensions" if dimensions is not None else "--embed-concurrency"
        raise ConfigError(f"{flag} is for a remote embedder (--embedder openai:MODEL), not {name or 'the default'}")
    if name in (None, "", *DEFAULT_NAMES):
        if onnx_backend.runtime_available():
            return OnnxMiniLMEmbedder(fallback=MiniLMEmbedder)
        return MiniLMEmbedder()
    if name == "minilm-onnx":
        return OnnxMiniLMEmbedder()
    if name == "minilm-torch":
        return MiniLMEmbedder()
    if name == "fake" or name.startswith("fake-"):
        dim = int(name.split("-", 1)[1]) if "-" in name else 16
        return HashEmbedder(dim)
    raise ConfigError(f"unknown embedder {name!r}; choose one of: {', '.join(EMBEDDER_NAMES)}")


def name_for_model_id(model_id: object) -> str | None:
    """The `make_embedder` name that makes points with this `embedder` payload (model id),
    or None when pagesync has no such embedder."""
    if not isinstance(model_id, str):
        return None
    if model_id in DEFAULT_NAMES:
        return model_id
    if model_id.startswith(REMOTE_PREFIXES):  # openai:MODEL[@N] is its own name
        return model_id
    prefix = "fake-hash-"  # HashEmbedder(dimension).model_id
    if model_id.startswith(prefix) and model_id[len(prefix):].isdigit():
        return f"fake-{int(model_id[len(prefix):])}"
    return None
