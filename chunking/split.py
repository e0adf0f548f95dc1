"""Markdown to chunks: split at headings first, then bound each section's size.

Heading-first splitting keeps chunk boundaries put under local edits: an edit inside
one section changes only that section's chunks, and a section inserted or removed
leaves every other section's chunks as they were (so their stored vectors are reused,
see `sync.engine`). langchain-text-splitters does both steps (it knows code fences); we fix
the settings, group its lines into sections ourselves and size sections by line group
(`_SIZER_SEPARATORS`).

One change to langchain's own grouping (`MarkdownHeaderTextSplitter` with
`strip_headers=False`): it glues a heading that is directly followed by a deeper heading
onto that next section, so `## 0.112.1` stays with its first `### Features` (good: the
subsection keeps its parent's name), but also `# Page title` onto whichever `##` section
comes first. Inserting a section at the top of a page then changed the old first
section's chunk as well. Here a level-1 heading (the page title) never glues; everything
else is grouped exactly as langchain groups it, so chunk texts changed only where a
title was glued.

Code is kept verbatim. langchain strips every line it returns, code included, which turned
every stored Python example into unindented, broken code. We track fences with langchain's
own rule and put back the original text of each line inside a fence (fence lines included),
minus trailing whitespace; the grouping is untouched. Outside code, lines stay as langchain
strips them. A size split inside a code block keeps the indentation of the piece's first line.

Chunks are cut from the markdown's normal form (`chunking.normalise`), the very string the
content hash covers: two markdowns with the same hash give the same chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .normalise import clean_line as _clean
from .normalise import fence_after as _fence_after
from .normalise import normalise_markdown

__all__ = ["Splitter"]

_HEADERS = [("#", "h1"), ("##", "h2"), ("###", "h3")]
# Bumped whenever the same markdown can produce different chunk texts: it is part of the
# pipeline fingerprint, so every page is re-chunked once (unchanged texts keep their vectors).
# v3: code lines keep their indentation; a fence opened mid-line gets a line of its own;
# oversized sections cut between line groups.
# v4: cut from the normalised markdown (`chunking.normalise`); line groups joined by a blank
# line, not by langchain's two-space hard break.
_GROUPING = "v4"
_JOIN = "\n\n"  # between a section's line groups, as in the markdown
# What the sizer sees between line groups instead of `_JOIN` (a blank line inside a code
# block is no line-group boundary). A NUL never reaches here: the normaliser replaces it.
_MARK = "\x00"
# An oversized section is cut between its line groups first (paragraphs, lists, a code block
# with the lines glued to it), then between lines, words, characters. langchain's markdown
# separators cut at every "```" line and at "# " lines first, i.e. at both fences of every
# code block and at shell/Python comments in code: code ended up in small chunks of its own,
# cut from its heading and intro, with an unclosed fence (and the closing one opening the
# next chunk).
_SIZER_SEPARATORS = [r"\x00", r"\n", " ", ""]


def _kept_lines(markdown: str) -> list[tuple[str, bool]]:
    """The markdown's lines that langchain keeps, in its order, each with whether it belongs to
    a code block (fences included, `_fence_after`). Inside a block every line is kept, blank
    ones too; outside, blank lines only separate line groups."""
    out: list[tuple[str, bool]] = []
    fence = ""
    for line in markdown.split("\n"):
        s = _clean(line)
        after = _fence_after(fence, s)
        code, fence = bool(fence or after), after
        if code or s:
            out.append((line, code))
    return out


def _length(text: str) -> int:
    """A piece's length once each `_MARK` in it is `_JOIN` again."""
    return len(text) + (len(_JOIN) - len(_MARK)) * text.count(_MARK)


def _trim(piece: str) -> str:
    """`piece.strip()`, except that the first line keeps its indentation (a code block split by
    size: its continuation starts with an indented line). Outside code langchain has stripped
    every line already, so there this is exactly `strip()`."""
    body = piece.lstrip()
    head = piece[: len(piece) - len(body)]
    indent = head.rpartition("\n")[2] if "\n" in head else ""
    return (indent + body).rstrip() if body else ""


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
        from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

        self._sections = MarkdownHeaderTextSplitter(_HEADERS, strip_headers=False, return_each_line=True)
        self._sizer = RecursiveCharacterTextSplitter(
            separators=_SIZER_SEPARATORS,
            is_separator_regex=True,
            chunk_size=self.chunk_size,
            chunk_overlap=self.chunk_overlap,
            strip_whitespace=False,  # `_trim` strips, keeping a code line's indentation
            length_function=_length,
        )

    @property
    def settings(self) -> str:
        return f"md-headers-h3-{_GROUPING}/recursive/{self.chunk_size}/{self.chunk_overlap}"

    def sections(self, markdown: str) -> list[str]:
        """The markdown's sections, in order: consecutive line groups under one heading path,
        cut from its normal form (`normalise_markdown`), line groups apart by a blank line."""
        return [text.replace(_MARK, _JOIN) for text in self._sections_marked(markdown)]

    def _sections_marked(self, markdown: str) -> list[str]:
        """`sections`, line groups apart by `_MARK` (where the sizer cuts first)."""
        markdown = normalise_markdown(markdown)
        if not markdown:
            return []
        if self._sections is None:
            self._load()
        out: list[tuple[dict, str]] = []
        kept = iter(_kept_lines(markdown))
        for group in self._sections.split_text(markdown):  # one entry per line group / heading line
            meta, text = group.metadata, self._verbatim(group.page_content, kept)
            if out and out[-1][0] == meta:  # same heading path: one section
                out[-1] = (meta, out[-1][1] + _MARK + text)
            elif out and len(out[-1][0]) < len(meta) and _glues(out[-1][1].replace(_MARK, "\n").split("\n")[-1]):
                out[-1] = (meta, out[-1][1] + _MARK + text)  # a heading carried into its first subsection
            else:
                out.append((meta, text))
        return [text for _, text in out]

    @staticmethod
    def _verbatim(text: str, kept) -> str:
        """A line group with its code lines as they are in the markdown (`kept` walks
        `_kept_lines` in step with langchain's output). A line that does not match what
        langchain returned is left as langchain's: a future langchain with another fence rule
        degrades to stripped code, never to wrong text."""
        lines = text.split("\n")
        for i, line in enumerate(lines):
            original, code = next(kept, ("", False))
            if code and _clean(original) == line:
                lines[i] = original.rstrip()
        return "\n".join(lines)

    def split(self, markdown: str) -> list[str]:
        """Chunks in document order; empty or whitespace-only markdown gives none."""
        chunks: list[str] = []
        for section in self._sections_marked(markdown):
            for piece in self._sizer.split_text(section):
                piece = _trim(piece.replace(_MARK, _JOIN))
                if piece:
                    chunks.append(piece)
        return chunks
