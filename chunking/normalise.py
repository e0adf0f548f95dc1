"""The normal form of extracted markdown: what the content hash covers and the chunks are cut from.

One string serves both, so an equal hash always means equal chunk texts, and a change the
hash sees always reaches the stored chunks. Whitespace that markdown does not read is
folded; whitespace that it reads is kept:

- inside a code block (fenced with ``` or ~~~, or indented by four columns) every line is
  kept as it is, but for trailing whitespace: Python, YAML and Makefiles depend on it. An
  indented block is rewritten as a fenced one, so the splitter keeps it verbatim too;
- outside code, runs of whitespace are folded to one space and lines stripped (trailing
  two-space hard breaks go with them); a line that continues a paragraph, list item or
  quote (a soft wrap) is joined to it, so re-wrapping prose changes nothing; blank lines
  are folded to one;
- the line breaks that separate markdown blocks (before a heading, list item, quote, table
  row, rule or code fence, and blank lines) are kept: the splitter cuts at them, and a
  page whose text only moved across them (a paragraph split in two) did change;
- the ends are stripped.

`normalise_markdown` is idempotent. Code blocks are found with the splitter's own fence rule
(`fence_after`), so both always agree on which lines are code.
"""

from __future__ import annotations

import re

__all__ = ["normalise_markdown", "clean_line", "fence_after", "fences_on_own_lines", "unescape_converted"]

# Lines that start a block of their own: never joined to the line before, and a line after
# a heading, table row or rule is never joined to it either.
_HEADING = re.compile(r"#{1,6}(\s|$)")
_LIST_ITEM = re.compile(r"([-+*]|\d{1,9}[.)])(\s|$)")
_RULE = re.compile(r"(=+|-{2,}|(\*\s*){3,}|(_\s*){3,})$")  # also setext underlines
_INDENTED = re.compile(r"( {0,3}\t| {4})")  # four columns of indentation: an indented code line


def clean_line(line: str) -> str:
    """A line as langchain's MarkdownHeaderTextSplitter reads it: stripped, printable only."""
    s = line.strip()
    return s if s.isprintable() else "".join(filter(str.isprintable, s))


def fence_after(fence: str, s: str) -> str:
    """langchain's fence rule (its `split_text`): the open fence after the cleaned line `s`,
    given the one open before it ("" outside code). A line opens a block if it starts with a
    single ``` or with ~~~, and the next line starting with that fence closes it."""
    if fence:
        return "" if s.startswith(fence) else fence
    if s.startswith("```") and s.count("```") == 1:
        return "```"
    return "~~~" if s.startswith("~~~") else ""


def fences_on_own_lines(markdown: str) -> str:
    """The markdown with a code fence opened at the end of a text line moved to a line of its
    own. trafilatura writes inline code that spans a line break that way (`just call ```` ``` ````
    then the code, then a closing ```` ``` ```` line); a fence opens only at a line's start, so
    the closing fence would be taken for an opening one, swapping code and prose for the rest
    of the page. Lines inside code are left alone."""
    lines = markdown.split("\n")
    if not any(ln.rstrip().endswith("```") and not ln.lstrip().startswith("```") for ln in lines):
        return markdown  # the common case: nothing to move
    out: list[str] = []
    fence = ""
    for line in lines:
        s = clean_line(line)
        if not fence and not fence_after("", s) and s.endswith("```") and s.count("```") == 1:
            out.append(line.rstrip()[:-3].rstrip())
            line = s = "```"
        fence = fence_after(fence, s)
        out.append(line)
    return "\n".join(out)


def _kind(s: str) -> str:
    """What a stripped, folded line outside code is: blank, heading, item (list item or
    quote: text may continue it), rule, row (table) or text."""
    if not s:
        return "blank"
    if _HEADING.match(s):
        return "heading"
    if _RULE.match(s):
        return "rule"
    if s.startswith(">") or _LIST_ITEM.match(s):
        return "item"
    if s.startswith("|"):
        return "row"
    return "text"


def _indented_block(lines: list[str], i: int) -> int:
    """The end (exclusive) of the indented code block starting at line `i`: consecutive lines
    indented by four columns, blank lines between them included, trailing blank ones not."""
    end = j = i
    while j < len(lines) and (not lines[j].strip() or _INDENTED.match(lines[j])):
        j += 1
        if lines[j - 1].strip():
            end = j
    return end


def _fenced(block: list[str]) -> list[str] | None:
    """An indented code block as a fenced one (each line less its four columns), or None
    when a line of it would read as a fence (then it stays indented, kept as is)."""
    body = [_INDENTED.sub("", ln, count=1).rstrip() for ln in block]
    if any(fence_after("", clean_line(ln)) or clean_line(ln).startswith("```") for ln in body):
        return None
    return ["```", *body, "```"]


def normalise_markdown(markdown: str) -> str:
    """The normal form described in the module docstring."""
    text = markdown.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")
    lines = fences_on_own_lines(text).split("\n")
    out: list[str] = []
    last = "blank"  # the kind of the last line written outside code ("code" after a block)
    in_list = False  # inside a list item's indented continuation: indentation is not code there
    fence = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        s = clean_line(line)
        after = fence_after(fence, s)
        if fence or after:  # a fenced block's line, fences included
            fence = after
            out.append(line.rstrip())
            last, i = "code", i + 1
            continue
        if (
            last in ("blank", "heading", "rule", "code") and not in_list and s and _INDENTED.match(line)
        ):  # an indented code block (it cannot interrupt a paragraph)
            end = _indented_block(lines, i)
            block = lines[i:end]
            out.extend(_fenced(block) or [ln.rstrip() for ln in block])
            last, i = "code", end
            continue
        folded = " ".join(line.split())  # runs of whitespace (str.isspace, as `\s`) to one space
        kind = _kind(folded)
        if kind == "text" and last in ("text", "item"):
            out[-1] += " " + folded  # a soft wrap: the paragraph (or item) goes on
        else:
            if kind != "blank" or last != "blank":
                out.append(folded)
            last = kind
        if kind == "item":
            in_list = True
        elif kind != "blank" and not (in_list and line[:1].isspace()):
            in_list = False
        i += 1
    return "\n".join(out).strip()


# A backslash run before a character trafilatura escapes in prose: it writes k literal
# backslashes before such a character as 2k+1 (its `_escape_inline_specials`).
_ESCAPED = re.compile(r"(\\+)([_*\[\]<~])")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")


def _unescape_prose(text: str, line_start: bool) -> str:
    """`text` (prose, no code span) unescaped; `line_start`: it begins its line."""

    def one(m: re.Match[str]) -> str:
        run, ch = m.group(1), m.group(2)
        if len(run) % 2 == 0:  # not an escape: literal backslashes
            return m.group(0)
        if ch in "*~" and line_start and not text[: m.start()].strip():
            return m.group(0)  # at a line's start it would become a list item or a fence
        return "\\" * (len(run) // 2) + ch

    return _ESCAPED.sub(one, text)


def unescape_converted(markdown: str) -> str:
    """The markdown with the escapes an HTML-to-markdown conversion adds to prose taken out
    (`ALPHA\\_HOME` -> `ALPHA_HOME`, `\\*` -> `*`): the chunks are read by a model and by
    people, not rendered. Code blocks and code spans are left alone (a backslash is literal
    there), and so is an escape that would turn a line into a list item or a fence."""
    if "\\" not in markdown:
        return markdown
    out: list[str] = []
    fence = ""
    # Code is found as the normaliser and the splitter find it (a fence opened mid-line moved).
    for line in fences_on_own_lines(markdown).split("\n"):
        after = fence_after(fence, clean_line(line))
        if fence or after:
            fence = after
            out.append(line)
            continue
        parts, pos = [], 0
        for m in _CODE_SPAN.finditer(line):
            parts.append(_unescape_prose(line[pos : m.start()], pos == 0))
            parts.append(m.group(0))
            pos = m.end()
        parts.append(_unescape_prose(line[pos:], pos == 0))
        out.append("".join(parts))
    return "\n".join(out)
