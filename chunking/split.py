"""Markdown to chunks: split at headings first, then bound each section's size.

Heading-first splitting keeps chunk boundaries put under local edits: an edit inside
one section changes only that section's chunks, and a section inserted or removed
leaves every other section's chunks as they were (so their stored vectors are reused,
see `sync.engine`). langchain-text-splitters does both steps (it knows code fences and
markdown separators); we fix the settings and group its lines into sections ourselves.

One change to langchain's own grouping (`MarkdownHeaderTextSplitter` with
`strip_headers=False`): it glues a heading that is directly followed by a deeper heading
onto that next section, so `## 0.112.1` stays with its first `### Features` (good: the
subsection keeps its parent's name), but also `# Page title` onto whichever `##` section
comes first. Inserting a section at the top of a page then changed the old first
section's chunk as well. Here a level-1 heading (the page title) never glues; everything
else is grouped exactly as langchain groups it, so chunk texts changed only where a
title was glued.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Splitter"]

_HEADERS = [("#", "h1"), ("##", "h2"), ("###", "h3")]
# Bumped whenever the same markdown can produce different chunk texts: it is part of the
# pipeline fingerprint, so every page is re-chunked once (unchanged texts keep their vectors).
_GROUPING = "v2"
_JOIN = "  \n"  # what langchain's own aggregation puts between a section's line groups


def _glues(last_line: str) -> bool:
    """langchain's rule for carrying a block into the next, deeper section (its last line
    starts with `#`), minus level-1 headings: a page title stays a section of its own."""
    if not last_line.startswith("#"):
        return False
    return not (last_line == "#" or last_line[1] == " ")


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

        self._sections = MarkdownHeaderTextSplitter(_HEADERS, strip_headers=False, return_each_line=True)
        self._sizer = RecursiveCharacterTextSplitter.from_language(
            Language.MARKDOWN, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap
        )

    @property
    def settings(self) -> str:
        return f"md-headers-h3-{_GROUPING}/recursive/{self.chunk_size}/{self.chunk_overlap}"

    def sections(self, markdown: str) -> list[str]:
        """The markdown's sections, in order: consecutive line groups under one heading path."""
        if not markdown.strip():
            return []
        if self._sections is None:
            self._load()
        out: list[tuple[dict, str]] = []
        for group in self._sections.split_text(markdown):  # one entry per line group / heading line
            meta, text = group.metadata, group.page_content
            if out and out[-1][0] == meta:  # same heading path: one section
                out[-1] = (meta, out[-1][1] + _JOIN + text)
            elif out and len(out[-1][0]) < len(meta) and _glues(out[-1][1].split("\n")[-1]):
                out[-1] = (meta, out[-1][1] + _JOIN + text)  # a heading carried into its first subsection
            else:
                out.append((meta, text))
        return [text for _, text in out]

    def split(self, markdown: str) -> list[str]:
        """Chunks in document order; empty or whitespace-only markdown gives none."""
        chunks: list[str] = []
        for section in self.sections(markdown):
            for piece in self._sizer.split_text(section):
                piece = piece.strip()
                if piece:
                    chunks.append(piece)
        return chunks
