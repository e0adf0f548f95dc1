"""The ONNX Runtime backend: same vectors as torch, lazy, chosen by default when it can run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import embedders
from embedders import DEFAULT_MODEL_ID, HashEmbedder, MiniLMEmbedder, OnnxMiniLMEmbedder, make_embedder
from embedders import onnx_backend
from sync.errors import ConfigError, EmbedderError
from sync.core.hashing import pipeline_fingerprint

ROOT = Path(__file__).resolve().parents[2]

# ~30 varied texts: short, empty-ish, long (> 256 tokens, truncated), code, unicode, markdown.
TEXTS = [
    "hello",
    "",
    " ",
    "\n\t\n",
    ".",
    "pagesync",
    "How do I configure retries and timeouts?",
    "pip install 'pagesync[model]' && pagesync run --sitemap https://docs.example.com/sitemap.xml",
    "def embed(texts):\n    return [model(t) for t in texts]  # one call per text\n",
    "```python\nimport asyncio\nasyncio.run(main())\n```",
    "SELECT url, count(*) FROM points GROUP BY url HAVING count(*) > 1;",
    '{"url": "https://x.y/a", "chunk_index": 3, "content_hash": "ab12"}',
    "Ünïcödé façade naïve coöperate",
    "日本語のテキストです。検索エンジンの同期。",
    "Привет, мир! Синхронизация документации.",
    "مرحبا بالعالم",
    "emoji 🚀✨🔥 and ✓ marks ¯\\_(ツ)_/¯",
    "# Install\n\nUse `pipx install pagesync`.\n\n## Upgrade\n\nRun `pipx upgrade pagesync`.",
    "| option | meaning |\n|---|---|\n| `--full` | visit every page |\n| `--dry-run` | write nothing |",
    "- one\n- two\n  - nested *three*\n- [a link](https://example.com)",
    "A long page that goes on about the same thing for a while. " * 40,
    "word " * 600,
    " ".join(f"token{i}" for i in range(400)),
    ("Qdrant keeps payload indexes on url and content_hash. " * 12).strip(),
    "The sitemap lists every page with a lastmod stamp; changed stamps make a page due at once.",
    "A 304 Not Modified answer costs nothing: no chunking, no embedding, no writes.",
    "404 and 410 purge the page's points; timeouts and 5xx never do.",
    "x" * 3000,
    "MiXeD CaSe TeXt WiTh NuMbErS 12345 and symbols #$%^&*()",
    "The quick brown fox jumps over the lazy dog.",
]


@pytest.fixture(scope="session")
def onnx_file(tmp_path_factory) -> Path:
    """The ONNX export: the one `make install` built (validated when built), else one built
    once for this session in a temp dir."""
    pytest.importorskip("onnxruntime")
    cached = onnx_backend.export_path()
    if cached.exists():
        return cached
    out = tmp_path_factory.mktemp("onnx") / "minilm.onnx"
    info = onnx_backend.export_onnx(out=out)
    assert info["built"] and info["min_cosine"] >= onnx_backend.MIN_COSINE
    return out


@pytest.mark.model
def test_onnx_vectors_equal_torch_vectors(onnx_file, minilm):
    np = pytest.importorskip("numpy")
    onnx = OnnxMiniLMEmbedder(onnx_path=onnx_file, build=False)
    torch_ = minilm
    a, b = np.asarray(onnx.embed(TEXTS)), np.asarray(torch_.embed(TEXTS))
    assert a.shape == b.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(axis=1)
    assert cos.min() >= 0.999, {TEXTS[i][:40]: float(cos[i]) for i in range(len(TEXTS)) if cos[i] < 0.999}
    # grouping and order do not matter: one text per call, and the batch reversed
    single = np.asarray([onnx.embed([t])[0] for t in TEXTS])
    assert (single * a).sum(axis=1).min() >= 0.9999
    rev = np.asarray(onnx.embed(TEXTS[::-1]))[::-1]
    assert (rev * a).sum(axis=1).min() >= 0.9999
    assert onnx.texts_embedded == 3 * len(TEXTS) and onnx.backend == "onnx"
    # sub-batches by token length: each padded only to its own longest text
    small = OnnxMiniLMEmbedder(onnx_path=onnx_file, build=False, batch_size=4)
    assert (np.asarray(small.embed(TEXTS)) * a).sum(axis=1).min() >= 0.9999
    lengths = sorted((len(e.ids) for e in small._tokenizer.encode_batch(TEXTS)), reverse=True)
    assert lengths[0] == 256  # truncated at the model's max_seq_length, not the tokenizer file's 128
    assert small.tokens_real == sum(lengths)
    assert small.tokens_run == sum(len(lengths[i : i + 4]) * lengths[i] for i in range(0, len(lengths), 4))
    assert small.tokens_run < 0.6 * len(TEXTS) * 256


def test_same_model_id_so_switching_backends_re_embeds_nothing():
    assert OnnxMiniLMEmbedder.model_id == MiniLMEmbedder.model_id == DEFAULT_MODEL_ID
    assert OnnxMiniLMEmbedder.dimension == MiniLMEmbedder.dimension == 384
    fp = "md-headers-h3/recursive/1000/100"
    assert pipeline_fingerprint(OnnxMiniLMEmbedder().model_id, fp) == pipeline_fingerprint(
        MiniLMEmbedder().model_id, fp
    )


def test_nothing_heavy_is_imported_until_the_first_embed():
    code = textwrap.dedent("""
        import sys
        from embedders import make_embedder
        for name in (None, "default", "minilm-onnx", "minilm-torch", "all-MiniLM-L6-v2"):
            e = make_embedder(name)
            assert (e.dimension, e.model_id) == (384, "sentence-transformers/all-MiniLM-L6-v2")
            assert e.embed([]) == []
        heavy = ("torch", "onnxruntime", "onnx", "numpy", "tokenizers", "transformers", "sentence_transformers")
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
        print(loaded)
        assert not loaded, loaded
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr + out.stdout


@pytest.fixture
def importable(monkeypatch):
    """Pretend exactly these modules can be imported (nothing is imported either way)."""

    def set_(*present: str) -> None:
        monkeypatch.setattr(onnx_backend, "_importable", lambda m: m in present)

    return set_


def test_default_is_onnx_when_it_can_run(importable, tmp_path, monkeypatch):
    monkeypatch.setenv(onnx_backend.CACHE_ENV, str(tmp_path))
    importable("onnxruntime", "tokenizers", "numpy", "torch", "transformers", "onnx")
    for name in (None, "", "default", "all-MiniLM-L6-v2", DEFAULT_MODEL_ID):
        e = make_embedder(name)
        assert isinstance(e, OnnxMiniLMEmbedder) and e._fallback_factory is MiniLMEmbedder
    # without the export tools, only an already built export makes ONNX runnable
    importable("onnxruntime", "tokenizers", "numpy")
    assert isinstance(make_embedder(None), MiniLMEmbedder)
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "all-MiniLM-L6-v2-0123456789abcdef.onnx").write_bytes(b"")
    assert isinstance(make_embedder(None), OnnxMiniLMEmbedder)


def test_default_is_torch_without_onnxruntime(importable):
    importable("tokenizers", "numpy", "torch", "transformers", "onnx")
    assert isinstance(make_embedder(None), MiniLMEmbedder)
    assert isinstance(make_embedder(DEFAULT_MODEL_ID), MiniLMEmbedder)


def test_explicit_names(importable):
    importable()  # nothing can run: explicit names are honoured anyway, failing at first embed
    assert type(make_embedder("minilm-onnx")) is OnnxMiniLMEmbedder
    assert make_embedder("minilm-onnx")._fallback_factory is None
    assert type(make_embedder("minilm-torch")) is MiniLMEmbedder
    assert isinstance(make_embedder("fake"), HashEmbedder) and make_embedder("fake-8").dimension == 8
    with pytest.raises(ConfigError, match="minilm-onnx"):
        make_embedder("minilm-tensorflow")
    assert {"minilm-onnx", "minilm-torch", "fake"} <= set(embedders.EMBEDDER_NAMES)


def test_unloadable_onnx_falls_back_only_when_asked(tmp_path, caplog):
    missing = tmp_path / "none.onnx"
    strict = OnnxMiniLMEmbedder(onnx_path=missing, build=False)
    with pytest.raises(EmbedderError, match="no ONNX export"):
        strict.embed(["x"])
    auto = OnnxMiniLMEmbedder(onnx_path=missing, build=False, fallback=lambda: HashEmbedder(384, DEFAULT_MODEL_ID))
    with caplog.at_level("WARNING", logger="pagesync.embedders"):
        vecs = auto.embed(["x", "y"])
    assert len(vecs) == 2 and len(vecs[0]) == 384 and auto.backend == "torch"
    assert "embedding with torch" in caplog.text
    assert auto.texts_embedded == 2


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv(onnx_backend.CACHE_ENV, str(tmp_path / "c"))
    assert onnx_backend.cache_dir() == tmp_path / "c"
    monkeypatch.delenv(onnx_backend.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert onnx_backend.cache_dir() == tmp_path / "x" / "pagesync"


def test_a_failed_export_is_not_retried_on_every_run(tmp_path, monkeypatch):
    target = tmp_path / "minilm.onnx"
    calls = []

    def boom(*a, **k):
        calls.append(1)
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr(onnx_backend, "_export_fused", boom)
    with pytest.raises(EmbedderError, match="could not load the ONNX model: exporter exploded"):
        OnnxMiniLMEmbedder(onnx_path=target).embed(["x"])
    assert onnx_backend.failure_marker(target).read_text() == "RuntimeError: exporter exploded"
    with pytest.raises(EmbedderError, match="an earlier ONNX export failed .*export --force"):
        OnnxMiniLMEmbedder(onnx_path=target).embed(["x"])
    assert len(calls) == 1 and not target.exists()
    # the default falls back to torch (here a stand-in with the same model id) at once
    auto = OnnxMiniLMEmbedder(onnx_path=target, fallback=lambda: HashEmbedder(384, DEFAULT_MODEL_ID))
    assert len(auto.embed(["x"])[0]) == 384 and auto.backend == "torch" and len(calls) == 1
    # --force clears the marker and tries again
    with pytest.raises(RuntimeError):
        onnx_backend.export_onnx(out=target, force=True)
    assert len(calls) == 2
