"""Content hashing: the one test of whether a page really changed."""

from __future__ import annotations

import hashlib
import re

from chunking.normalise import normalise_markdown

__all__ = ["fold_whitespace", "normalise_markdown", "content_hash", "pipeline_fingerprint", "reuse_key"]

_WS = re.compile(r"\s+")


def fold_whitespace(text: str) -> str:
    """Runs of whitespace folded to one space, ends stripped."""
    return _WS.sub(" ", text).strip()


def content_hash(markdown: str) -> str:
    """Lowercase hex SHA-256 of the extracted markdown's normal form (`normalise_markdown`:
    whitespace folded outside code, code lines kept but for trailing whitespace), the same
    string the chunks are cut from: an equal hash means equal chunk texts."""
    return hashlib.sha256(normalise_markdown(markdown).encode("utf-8")).hexdigest()


def pipeline_fingerprint(embedder_id: str, chunker_settings: str) -> str:
    """Short id of everything besides the text that shapes a page's points.

    Stored per page: when it changes (new model, new chunk size) the page is
    re-embedded even though its text did not change.
    """
    raw = f"{embedder_id}\n{chunker_settings}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def reuse_key(embedder_id: str, text: str) -> str:
    """Identity of a vector: the embedder that made it and the exact text it embeds (the
    chunk behind its heading path, `chunking.embedded_text`).

    A stored point's vector is reused for a new chunk only when both are equal (no
    whitespace folding: the model sees every character). The extractor and chunker
    settings are deliberately not part of it: they decide which texts exist, not what a
    given text's vector is.
    """
    h = hashlib.sha256()
    for part in (embedder_id, text):
        raw = part.encode("utf-8")
        h.update(len(raw).to_bytes(8, "big"))  # length-prefixed: no two pairs share a key
        h.update(raw)
    return h.hexdigest()
