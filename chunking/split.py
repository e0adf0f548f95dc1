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

Sizes are in the embedder's own tokens when the splitter has a counter (`chunk_size` is
then tokens, `max_tokens` the model's input): what is embedded is the chunk behind its
heading path (`embedded_text`), and no such text is longer than `max_tokens`. A chunk is
never a heading alone: a heading line goes with the text under it (with the text before
it when nothing follows in its section), a section of headings only with the next section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from .normalise import clean_line as _clean
from .normalise import fence_after as _fence_after
from .normalise import normalise_markdown

__all__ = ["Splitter", "Chunk", "embedded_text", "heading_path", "PATH_SEPARATOR"]

_HEADERS = [("#", "h1"), ("##", "h2"), ("###", "h3")]
# Bumped whenever the same markdown can produce different chunk texts: it is part of the
# pipeline fingerprint, so every page is re-chunked once (unchanged texts keep their vectors).
# v3: code lines keep their indentation; a fence opened mid-line gets a line of its own;
# oversized sections cut between line groups.
# v4: cut from the normalised markdown (`chunking.normalise`); line groups joined by a blank
# line, not by langchain's two-space hard break.
# v5: a heading goes with the text under it (no heading-only chunks); a level-1 title with
# nothing under it goes with the first section.
_GROUPING = "v5"
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
# Joins a heading line to its neighbouring line group instead of `_MARK`: no separator of
# the sizer's, so a heading is cut from its text only inside a line (never in practice).
_GLUE = "\x01"
_HEADING_LINE = re.compile(r"#{1,6}(?: |$)")
# Between the parts of a heading path in the embedded text ("Options › Boolean Flags").
PATH_SEPARATOR = " \u203a "


def embedded_text(text: str, headings: Sequence[str]) -> str:
    """What the model embeds for a chunk: its heading path, a blank line, the chunk; the
    chunk alone when it has no path. The reuse key of a vector is taken over this text."""
    path = PATH_SEPARATOR.join(h for h in headings if h)
    return f"{path}\n\n{text}" if path else text


def heading_path(title: str, meta: dict[str, str]) -> tuple[str, ...]:
    """The page title, then the section's h1 (left out when the title names it already),
    h2 and h3: where a chunk is on its site."""
    out = [title] if title else []
    for key in ("h1", "h2", "h3"):
        value = (meta.get(key) or "").strip()
        if not value or (key == "h1" and title and value.casefold() in title.casefold()):
            continue
        out.append(value)
    return tuple(out)


@dataclass(frozen=True)
class Chunk:
    """A chunk's text (what the payload's `text` holds) and its heading path; `tokens`: the
    embedder's count of `embedded` (None when the splitter counts characters)."""

    text: str
    headings: tuple[str, ...] = ()
    tokens: int | None = None

    @property
    def embedded(self) -> str:
        return embedded_text(self.text, self.headings)


class Counter(Protocol):
    """An embedder's tokens (`embedders.tokens.TokenCounter`): special tokens included."""

    id: str
    limit: int | None

    def count(self, text: str) -> int: ...


def _is_heading(group: str) -> bool:
    return all(_HEADING_LINE.match(line) for line in group.split("\n"))


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
    """A piece's length once each `_MARK` (and `_GLUE`) in it is `_JOIN` again."""
    return len(text) + (len(_JOIN) - len(_MARK)) * (text.count(_MARK) + text.count(_GLUE))


def _unmark(text: str) -> str:
    return text.replace(_MARK, _JOIN).replace(_GLUE, _JOIN)


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
    """Section-aware, size-bounded splitting. `settings` feeds the pipeline fingerprint.

    Without `counter`, `chunk_size` and `chunk_overlap` count characters. With one they
    count its tokens, and `max_tokens` (default: the counter's limit) bounds every chunk's
    embedded text (`embedded_text`), heading path and special tokens included."""

    chunk_size: int = 1000
    chunk_overlap: int = 100
    counter: Counter | None = None
    max_tokens: int | None = None
    _sections: Any = field(init=False, repr=False, default=None)
    _sizers: dict[tuple[int, int], Any] = field(init=False, repr=False, default_factory=dict)
    _special: int = field(init=False, repr=False, default=0)

    def __post_init__(self) -> None:
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ValueError("need 0 <= chunk_overlap < chunk_size")
        if self.counter is not None and self.max_tokens is None:
            self.max_tokens = self.counter.limit
        if self.max_tokens is not None and self.max_tokens < 16:
            raise ValueError("need max_tokens >= 16")

    def _load(self) -> None:
        # Imported on first use: a pass with nothing to chunk never pays for langchain.
        from langchain_text_splitters import MarkdownHeaderTextSplitter

        self._sections = MarkdownHeaderTextSplitter(_HEADERS, strip_headers=False, return_each_line=True)
        if self.counter is not None:
            self._special = self.counter.count("")  # [CLS] and [SEP]: once per input, not per piece

    def _sizer(self, size: int, overlap: int) -> Any:
        """langchain's recursive splitter at `size` (in this splitter's units), cached."""
        key = (size, overlap)
        sizer = self._sizers.get(key)
        if sizer is None:
            from langchain_text_splitters import RecursiveCharacterTextSplitter

            sizer = self._sizers[key] = RecursiveCharacterTextSplitter(
                separators=_SIZER_SEPARATORS,
                is_separator_regex=True,
                chunk_size=size,
                chunk_overlap=overlap,
                strip_whitespace=False,  # `_trim` strips, keeping a code line's indentation
                length_function=self._piece_length,
            )
        return sizer

    def _piece_length(self, text: str) -> int:
        """A piece's size as the sizer adds them up: characters, or tokens without the
        special ones (they come once per embedded text, `_special`)."""
        if self.counter is None:
            return _length(text)
        return self.counter.count(_unmark(text)) - self._special

    def _size(self, text: str) -> int:
        """A whole embedded text's size: what `max_tokens` bounds."""
        return self.counter.count(text) if self.counter is not None else len(text)

    @property
    def settings(self) -> str:
        base = f"md-headers-h3-{_GROUPING}/recursive/{self.chunk_size}/{self.chunk_overlap}"
        if self.counter is None:
            return f"{base}/path-v1"
        return f"{base}/tokens-{self.counter.id}-max{self.max_tokens}/path-v1"

    def sections(self, markdown: str) -> list[str]:
        """The markdown's sections, in order: consecutive line groups under one heading path,
        cut from its normal form (`normalise_markdown`), line groups apart by a blank line."""
        return [_unmark(text) for _, text in self._sections_marked(markdown)]

    def _sections_marked(self, markdown: str) -> list[tuple[dict, str]]:
        """`sections` with their heading metadata, line groups apart by `_MARK` (where the
        sizer cuts first) or, next to a heading line, `_GLUE` (where it does not)."""
        markdown = normalise_markdown(markdown)
        if not markdown:
            return []
        if self._sections is None:
            self._load()
        out: list[tuple[dict, list[str]]] = []
        kept = iter(_kept_lines(markdown))
        for group in self._sections.split_text(markdown):  # one entry per line group / heading line
            meta, text = group.metadata, self._verbatim(group.page_content, kept)
            if out and out[-1][0] == meta:  # same heading path: one section
                out[-1][1].append(text)
            elif out and len(out[-1][0]) < len(meta) and _glues(out[-1][1][-1].split("\n")[-1]):
                out[-1] = (meta, out[-1][1] + [text])  # a heading carried into its first subsection
            else:
                out.append((meta, [text]))
        # A section of headings only: a page title straight above its first section (one
        # with text) is left out (its words are in the heading path of every chunk under
        # it); any other goes with the next section, the last one with the section before.
        merged: list[tuple[dict, list[str]]] = []
        carry: list[str] = []
        for i, (meta, groups) in enumerate(out):
            if all(_is_heading(g) for g in groups):
                nxt = out[i + 1][0] if i + 1 < len(out) else None
                if (
                    not carry
                    and len(groups) == 1
                    and nxt is not None
                    and len(nxt) > len(meta)
                    and all(nxt.get(k) == v for k, v in meta.items())
                    and not all(_is_heading(g) for g in out[i + 1][1])
                ):  # that section has text
                    continue
                carry += groups
                continue
            merged.append((meta, carry + groups))
            carry = []
        if carry:
            if merged:
                merged[-1] = (merged[-1][0], merged[-1][1] + carry)
            else:
                merged.append((out[-1][0], carry))  # a page of headings only: all there is
        return [(meta, self._joined(groups)) for meta, groups in merged]

    @staticmethod
    def _joined(groups: list[str]) -> str:
        """A section's line groups joined: a heading line to the next group with `_GLUE`,
        every other pair with `_MARK` (a heading last in its section is put back with the
        text before it by `_fit`)."""
        text = groups[0]
        for prev, group in zip(groups, groups[1:]):
            text += (_GLUE if _is_heading(prev) else _MARK) + group
        return text

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

    def split(self, markdown: str, title: str = "") -> list[str]:
        """Chunk texts in document order; empty or whitespace-only markdown gives none."""
        return [c.text for c in self.chunks(markdown, title)]

    def chunks(self, markdown: str, title: str = "") -> list[Chunk]:
        """`split`'s chunks with their heading paths (the page `title` first) and sizes."""
        out: list[Chunk] = []
        for meta, section in self._sections_marked(markdown):
            headings = self._fitting_path(heading_path(title, meta))
            budget = self.chunk_size
            if self.max_tokens is not None:
                # The path and the special tokens take their share of the model's input.
                head = self._size(embedded_text("x", headings)) - self._size("x") + self._special
                budget = max(8, min(budget, self.max_tokens - head))
            out += self._fit(section, headings, budget)
        return out

    def _fitting_path(self, headings: tuple[str, ...]) -> tuple[str, ...]:
        """The heading path, shortened from its deepest end while it takes more than a
        quarter of the model's input (a heading path is context, not content)."""
        if self.max_tokens is None:
            return headings
        while headings and self._size(embedded_text("", headings)) > self.max_tokens // 4:
            headings = headings[:-1]
        return headings

    def _fit(self, section: str, headings: tuple[str, ...], budget: int) -> list[Chunk]:
        """The section's pieces at `budget`; a piece whose embedded text the counter still
        finds over `max_tokens` (token counts do not quite add up) is cut again, smaller."""
        out: list[Chunk] = []
        overlap = min(self.chunk_overlap, budget // 2)
        for piece in self._sizer(budget, overlap).split_text(section):
            text = _trim(_unmark(piece))
            if not text:
                continue
            size = self._size(embedded_text(text, headings)) if self.counter is not None else None
            if self.max_tokens is not None and (size or 0) > self.max_tokens and budget > 8:
                out += self._fit(piece, headings, max(8, budget - (size or 0) + self.max_tokens - 4))
                continue
            if out and _is_heading(text):  # a heading last in its section: with the text before it
                joined = out[-1].text + _JOIN + text
                size_joined = self._size(embedded_text(joined, headings))
                if size_joined <= (self.max_tokens if self.max_tokens is not None else budget):
                    out[-1] = Chunk(joined, headings, size_joined if self.counter is not None else None)
                    continue
            out.append(Chunk(text, headings, size))
        return out
