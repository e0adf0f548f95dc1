"""Markdown to chunks: split at headings first, then bound each section's size.

Heading-first splitting keeps chunk boundaries put under local edits: an edit inside
one section changes only that section's chunks. langchain-text-splitters does both
steps (it knows code fences and markdown separators); we only fix the settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Splitter"]

_HEADERS = [("#", "h1"), ("##", "h2"), ("###", "h3")]


@dataclass
class Splitter:
    """Section-aware, size-bounded splitting. `settings` feeds the pipeline fingerprint."""

    chunk_size: int = 1000
    chunk_overlap: int = 100
    _sections: Any = field(init=False, repr=False, default=None)
    _sizer: Any = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ValueError("need 0 <= chunk_overlap < chunk_size")

    def _load(self) -> None:
        # Imported on first use: a pass with nothing to chunk never pays for langchain.
        from langchain_text_splitters import Language, MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

        self._sections = MarkdownHeaderTextSplitter(_HEADERS, strip_headers=False)
        self._sizer = RecursiveCharacterTextSplitter.from_language(
            Language.MARKDOWN, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap
        )

    @property
    def settings(self) -> str:
        return f"md-headers-h3/recursive/{self.chunk_size}/{self.chunk_overlap}"

    def split(self, markdown: str) -> list[str]:
        """Chunks in document order; empty or whitespace-only markdown gives none."""
        if not markdown.strip():
            return []
        if self._sections is None:
            self._load()
        chunks: list[str] = []
        for section in self._sections.split_text(markdown):
            for piece in self._sizer.split_text(section.page_content):
                piece = piece.strip()
                if piece:
                    chunks.append(piece)
        return chunks
