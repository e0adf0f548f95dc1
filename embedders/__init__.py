"""Embedders: the `Embedder` protocol, the bundled offline default (ONNX Runtime or torch),
sentence-transformers models on this machine (`st:`), a remote OpenAI-compatible endpoint
(`openai:MODEL`, with the vector sizes its probes found kept in `dimension_cache`), a test
fake, and each model's token counter (`tokens`: what chunks are sized in)."""

from __future__ import annotations

from sync.errors import ConfigError

from . import onnx_backend
from .base import Embedder
from .fake import HashEmbedder
from .onnx_backend import OnnxMiniLMEmbedder
from .openai_api import OpenAIEmbedder
from .sentence import DEFAULT_MODEL_ID, MiniLMEmbedder

__all__ = [
    "Embedder",
    "HashEmbedder",
    "MiniLMEmbedder",
    "OnnxMiniLMEmbedder",
    "OpenAIEmbedder",
    "DEFAULT_MODEL_ID",
    "make_embedder",
    "EMBEDDER_NAMES",
    "name_for_model_id",
    "REMOTE_PREFIXES",
]

# The default and its model names pick the fastest backend that can run here (ONNX Runtime,
# else torch); `minilm-onnx` and `minilm-torch` force one. Both give the same vectors under
# the same model id, so switching between them re-embeds nothing.
DEFAULT_NAMES = ("default", "all-MiniLM-L6-v2", DEFAULT_MODEL_ID)
EMBEDDER_NAMES = (*DEFAULT_NAMES[1:], "minilm-onnx", "minilm-torch", "st:NAME_OR_PATH", "openai:MODEL", "fake")
REMOTE_PREFIXES = ("openai:",)  # embedders that take --embed-dimensions and --embed-concurrency


def make_embedder(name: str | None, *, dimensions: int | None = None, concurrency: int | None = None) -> Embedder:
    """Embedder by CLI name: the bundled MiniLM (default), a forced backend, `st:NAME_OR_PATH`
    (a sentence-transformers model on this machine), `openai:MODEL`
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
    if name.startswith("st:"):
        from .st_model import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(name[3:])
    if name == "fake" or name.startswith("fake-"):
        size = name.split("-", 1)[1] if "-" in name else "16"
        if not (size.isascii() and size.isdigit() and int(size) > 0):
            raise ConfigError(f"--embedder {name!r}: fake-N takes a vector size N, a positive number")
        return HashEmbedder(int(size))
    raise ConfigError(f"unknown embedder {name!r}; choose one of: {', '.join(EMBEDDER_NAMES)}")


def name_for_model_id(model_id: object) -> str | None:
    """The `make_embedder` name that makes points with this `embedder` payload (model id),
    or None when pagesync has no such embedder."""
    if not isinstance(model_id, str):
        return None
    if model_id in DEFAULT_NAMES:
        return model_id
    if model_id.startswith("st:") and model_id.count("/") == 1:
        return model_id  # st:org/name, found again in the local cache (a folder's id names no folder)
    if model_id.startswith(REMOTE_PREFIXES):  # openai:MODEL[@N] is its own name
        return model_id
    prefix = "fake-hash-"  # HashEmbedder(dimension).model_id
    if model_id.startswith(prefix) and model_id[len(prefix) :].isdigit():
        return f"fake-{int(model_id[len(prefix) :])}"
    return None
