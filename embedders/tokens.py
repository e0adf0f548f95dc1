"""Token counters: how many of an embedder's own tokens a text is, and how many it reads.

The splitter sizes chunks with these (`chunking.fit`), so no chunk is longer than the model
reads. A local model is counted with its own tokenizer (the `tokenizers` library over the
model folder's `tokenizer.json`, special tokens included, no truncation); a remote one
with the offline upper bound `limits.token_bound` (UTF-8 bytes + 4: never fewer than the
provider counts; nothing is downloaded to count).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from .limits import token_bound

__all__ = [
    "TokenCounter",
    "FunctionCounter",
    "TokenizerJsonCounter",
    "folder_counter",
    "max_seq_length",
    "UNKNOWN_REMOTE_INPUT",
]

# The input assumed of a remote model pagesync knows no limit of: 512 tokens, what the
# BERT-family models OpenAI-compatible servers commonly serve read (bge, e5, gte). Counted
# with `token_bound`, chunks then fit any model that reads 512 tokens or more.
UNKNOWN_REMOTE_INPUT = 512


@runtime_checkable
class TokenCounter(Protocol):
    """`count(text)`: the model's tokens of `text` (special tokens included); `limit`: the
    tokens the model reads of one input (None: unknown); `id`: names the counting rule in
    the pipeline fingerprint."""

    id: str
    limit: int | None

    def count(self, text: str) -> int: ...


@dataclass
class FunctionCounter:
    """A counter from a plain function (`token_bound`, a test's). `assumed`: the bound
    chunks keep to when the model's `limit` is unknown and no `--max-chunk-tokens` is given."""

    id: str
    limit: int | None
    fn: Callable[[str], int] = token_bound
    assumed: int | None = None

    def count(self, text: str) -> int:
        return self.fn(text)


@dataclass
class TokenizerJsonCounter:
    """A Hugging Face `tokenizer.json`, counted with the `tokenizers` library, loaded on the
    first count (a pass with nothing to chunk never reads it)."""

    path: Path
    limit: int | None
    id: str = ""
    _tok: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.id:
            # The file's digest: another vocabulary is another chunking.
            digest = hashlib.sha256(Path(self.path).read_bytes()).hexdigest()[:12]
            self.id = f"tokenizer-{digest}"

    def _load(self) -> Any:
        with self._lock:
            if self._tok is None:
                from tokenizers import Tokenizer

                tok = Tokenizer.from_file(str(self.path))
                tok.no_truncation()
                tok.no_padding()
                self._tok = tok
        return self._tok

    def count(self, text: str) -> int:
        tok = self._tok or self._load()
        return len(tok.encode(text).ids)


def max_seq_length(folder: Path) -> int | None:
    """The sentence-transformers model's `max_seq_length` (sentence_bert_config.json), the
    tokens it reads of one input; None when the folder does not say."""
    try:
        value = json.loads((Path(folder) / "sentence_bert_config.json").read_text())["max_seq_length"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def folder_counter(folder: Path) -> TokenizerJsonCounter | None:
    """The counter of a model folder: its tokenizer.json and `max_seq_length`; None when the
    folder has no tokenizer.json (the splitter then counts characters)."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    return TokenizerJsonCounter(path, max_seq_length(folder))


def counter_for(embedder: object) -> TokenCounter | None:
    """The token counter of `embedder`: its own `token_counter` when it has one; the model
    folder's tokenizer for the bundled model and `st:` models; the offline bound for
    `openai:` (the known model's input limit, or the embedder's `max_input_tokens`; for
    another model `UNKNOWN_REMOTE_INPUT` is assumed); None for an embedder without tokens
    (the test fake: the splitter counts characters)."""
    own = getattr(embedder, "token_counter", None)
    if own is not None:
        return own() if callable(own) else own
    from .onnx_backend import OnnxMiniLMEmbedder
    from .openai_api import OpenAIEmbedder
    from .sentence import MiniLMEmbedder, bundled_model_path

    if isinstance(embedder, (OnnxMiniLMEmbedder, MiniLMEmbedder)):
        folder = getattr(embedder, "_path", None) or bundled_model_path()
        return folder_counter(Path(folder))
    if isinstance(embedder, OpenAIEmbedder):
        return FunctionCounter("utf8-bytes+4", embedder.max_input_tokens, token_bound, assumed=UNKNOWN_REMOTE_INPUT)
    return None
