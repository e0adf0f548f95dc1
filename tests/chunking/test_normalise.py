"""The markdown normal form that the content hash covers and the chunks are cut from."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunking import Splitter
from chunking.normalise import normalise_markdown, unescape_converted
from sync.core.hashing import content_hash


@pytest.mark.parametrize(
    "raw, normal",
    [
        ("", ""),
        ("  \n\t\n ", ""),
        ("a   b\t c", "a b c"),
        ("one\ntwo  \nthree", "one two three"),  # soft wraps and a two-space hard break fold
        ("a\n\n\n\nb", "a\n\nb"),  # a paragraph break stays one blank line
        ("# T\ntext\n## U", "# T\ntext\n## U"),  # block starts are never joined
        ("- one\n  continued\n- two", "- one continued\n- two"),
        ("> quoted\nlazily", "> quoted lazily"),
        ("| a | b |  \n|---|---|\n| 1 | 2 |", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("Title\n=====\ntext", "Title\n=====\ntext"),
        ("```py\ndef f():   \n    return  1\n```", "```py\ndef f():\n    return  1\n```"),
        ("~~~\n\tcc  -o app\n\n\n~~~", "~~~\n\tcc  -o app\n\n\n~~~"),  # blank code lines are kept
        (
            "text\n\n    code\n        deeper\n\n    more\n\nafter",
            "text\n\n```\ncode\n    deeper\n\nmore\n```\n\nafter",
        ),
        ("text\n    not code: a continuation", "text not code: a continuation"),
        ("- item\n\n    - nested, not code", "- item\n\n- nested, not code"),
        ("just call ```\nf(x,\n  y)\n```\n.", "just call\n```\nf(x,\n  y)\n```\n."),
        ("a\r\nb\rc", "a b c"),
    ],
)
def test_normal_form_table(raw, normal):
    assert normalise_markdown(raw) == normal


def test_code_indentation_is_seen_by_the_hash_prose_whitespace_is_not():
    before = "## Cleanup\n\nCall it\nlike this:\n\n```python\nif done:\n    cleanup(x)\n```"
    indented = before.replace("    cleanup(x)", "        cleanup(x)")
    rewrapped = before.replace("Call it\nlike this:", "Call   it like\nthis:  ")
    assert content_hash(indented) != content_hash(before)
    assert content_hash(rewrapped) == content_hash(before)
    assert Splitter().split(rewrapped) == Splitter().split(before)
    assert "        cleanup(x)" in Splitter().split(indented)[0]


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("Set ALPHA\\_HOME and ALPHA\\_HOME\\_DIR", "Set ALPHA_HOME and ALPHA_HOME_DIR"),
        ("a \\*star\\* and \\[link\\] \\<tag> \\~x", "a *star* and [link] <tag> ~x"),
        ("a literal \\\\\\_ backslash", "a literal \\_ backslash"),  # k backslashes were 2k+1
        ("`code\\_span` and x\\_y", "`code\\_span` and x_y"),
        ("```\nprint('a\\_b')\n```", "```\nprint('a\\_b')\n```"),
        ("\\* not a list item", "\\* not a list item"),
        # a fence opened mid-line (trafilatura's inline code over a line break) is code, as for the splitter
        ("just call ```\nf(a\\_b)\n```\nthen x\\_y", "just call\n```\nf(a\\_b)\n```\nthen x_y"),
        ("no escapes", "no escapes"),
    ],
)
def test_converter_escapes_are_taken_out_of_prose(raw, clean):
    assert unescape_converted(raw) == clean


# -- properties ------------------------------------------------------------------------------------

_any_md = st.text(alphabet=" \t\n\r-*+#>|`~=_.)0123456789abAB\\\u00a0\x00", max_size=120)


@settings(max_examples=400, deadline=None)
@given(_any_md)
def test_normalising_is_idempotent(text):
    once = normalise_markdown(text)
    assert normalise_markdown(once) == once
    assert content_hash(once) == content_hash(text)


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8).filter(
    lambda w: not re.fullmatch(r"\d+", w)
)
_words = st.lists(_word, min_size=1, max_size=12)
_indent = st.sampled_from(["", "  ", "    ", "        ", "\t", "\t  "])
_code_line = st.one_of(
    st.tuples(_indent, st.lists(_word, min_size=1, max_size=4).map(" ".join)).map("".join), st.just("")
)
_code = st.lists(_code_line, min_size=1, max_size=8).filter(lambda ls: any(ln.strip() for ln in ls))

# A document as blocks: ("p", words) a paragraph, ("h", level, words), ("l", [words...]) a
# list, ("c", fence, [lines]) a fenced code block.
_block = st.one_of(
    st.tuples(st.just("p"), _words),
    st.tuples(st.just("h"), st.integers(1, 3), _words),
    st.tuples(st.just("l"), st.lists(_words, min_size=1, max_size=4)),
    st.tuples(st.just("c"), st.sampled_from(["```", "```python", "~~~"]), _code),
)
_doc = st.lists(_block, min_size=1, max_size=6)


def _render(doc, draw) -> str:
    """The document as markdown, with whitespace chosen by `draw` wherever markdown does not
    read it (None: the tidy form): runs between words, soft wraps, trailing spaces, up to
    three columns before a line outside code, extra blank lines between blocks."""

    def sep() -> str:
        return " " if draw is None else draw(st.sampled_from([" ", "  ", "\t", " \u00a0", "\n", "  \n", " \n  "]))

    def words(ws) -> str:
        return ws[0] + "".join(sep() + w for w in ws[1:])

    def pad() -> str:
        return "" if draw is None else draw(st.sampled_from(["", " ", "   "]))

    def trail() -> str:
        return "" if draw is None else draw(st.sampled_from(["", " ", "  ", "\t"]))

    out = []
    for b in doc:
        if b[0] == "p":
            out.append(pad() + words(b[1]) + trail())
        elif b[0] == "h":
            out.append(pad() + "#" * b[1] + " " + " ".join(b[2]) + trail())
        elif b[0] == "l":
            out.append("\n".join(pad() + "- " + words(ws) + trail() for ws in b[1]))
        else:
            close = "~~~" if b[1] == "~~~" else "```"
            out.append("\n".join([b[1] + trail(), *(ln + trail() for ln in b[2]), close + trail()]))
    gaps = ["\n\n" if draw is None else draw(st.sampled_from(["\n\n", "\n\n\n", "\n \n", "\n\t\n\n"])) for _ in out]
    return "".join(block + gap for block, gap in zip(out, gaps))


@settings(max_examples=200, deadline=None)
@given(_doc, st.data())
def test_whitespace_only_differences_outside_code_collapse(doc, data):
    tidy, messy = _render(doc, None), _render(doc, data.draw)
    assert normalise_markdown(messy) == normalise_markdown(tidy)
    assert content_hash(messy) == content_hash(tidy)
    assert Splitter(chunk_size=200, chunk_overlap=20).split(messy) == Splitter(chunk_size=200, chunk_overlap=20).split(
        tidy
    )


@settings(max_examples=200, deadline=None)
@given(_doc, st.data())
def test_code_lines_keep_their_indentation_in_the_normal_form_and_the_chunks(doc, data):
    md = _render(doc, data.draw)
    normal = normalise_markdown(md).split("\n")
    lines = {ln for c in Splitter(chunk_size=1000, chunk_overlap=0).split(md) for ln in c.split("\n")}
    for b in doc:
        if b[0] == "c":
            body = [ln.rstrip() for ln in b[2]]
            at = [i for i in range(len(normal)) if normal[i : i + len(body)] == body]
            assert at, (body, normal)
            for ln in body:
                if ln.strip():
                    assert ln in lines


@settings(max_examples=200, deadline=None)
@given(_doc, st.data())
def test_a_code_lines_indentation_change_changes_the_hash(doc, data):
    codes = [b for b in doc if b[0] == "c"]
    if not codes:
        return
    block = codes[0]
    i = next(i for i, ln in enumerate(block[2]) if ln.strip())
    moved = list(block[2])
    moved[i] = "  " + moved[i]
    other = [(b[0], b[1], moved) if b is block else b for b in doc]
    assert content_hash(_render(doc, None)) != content_hash(_render(other, None))
