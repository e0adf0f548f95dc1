"""Main-content extraction and section-aware splitting."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunking import Splitter, extract_page
from demo.site_server import render_page
from sync.core.hashing import content_hash

DOC_BODY = (
    "<p>Install the widget with pip. It needs Python three or newer and a working compiler toolchain.</p>"
    "<h2>Configuration options</h2>"
    "<p>Set the frobnicate flag in the config file to enable the fast path for large sites.</p>"
    "<pre><code>pagesync run --sitemap https://example.com/sitemap.xml\n--collection docs</code></pre>"
    "<ul><li>first bullet about caching</li><li>second bullet about retries</li></ul>"
    "<h3>Advanced tuning</h3>"
    "<p>Use a larger chunk size when pages are long and dense with reference tables.</p>"
)
NAV = ["Zorblax", "Quuxnav", "Blorptab"]
FOOTER = "Footerwomble Industries 2026"


def docs_page(body=DOC_BODY, nav=NAV, footer=FOOTER, title="Install Guide") -> bytes:
    return render_page(title, body, nav=nav, footer=footer).encode()


@pytest.fixture(scope="module")
def extracted():
    return extract_page(docs_page(), "text/html; charset=utf-8", url="https://docs.example.com/install.html")


# -- extract_page -------------------------------------------------------------------------------


def test_boilerplate_removed(extracted):
    md = extracted.markdown
    for word in NAV + ["Footerwomble", "Acme Docs"]:
        assert word not in md
    assert "Guide\nAPI" not in md


def test_headings_kept(extracted):
    md = extracted.markdown
    assert re.search(r"^#+ Install Guide$", md, re.M)
    assert re.search(r"^#+ Configuration options$", md, re.M)
    assert re.search(r"^#+ Advanced tuning$", md, re.M)
    # heading levels keep their order of depth
    lv = {
        t: len(re.search(rf"^(#+) {t}$", md, re.M).group(1))
        for t in ("Install Guide", "Configuration options", "Advanced tuning")
    }
    assert lv["Install Guide"] < lv["Configuration options"] < lv["Advanced tuning"]


def test_code_block_and_list_kept(extracted):
    md = extracted.markdown
    assert "pagesync run --sitemap https://example.com/sitemap.xml" in md
    assert "--collection docs" in md
    assert "```" in md
    assert re.search(r"^[-*] first bullet about caching$", md, re.M)
    assert re.search(r"^[-*] second bullet about retries$", md, re.M)


def test_prose_kept_in_order(extracted):
    md = extracted.markdown
    a = md.index("Install the widget")
    b = md.index("frobnicate flag")
    c = md.index("larger chunk size")
    assert a < b < c
    assert md == md.strip()


def test_title_extracted(extracted):
    assert extracted.title == "Install Guide"


_TITLE_CASES = [
    b"<html><head><title>Install Guide | Widget Docs</title></head><body><h1>Install</h1><p>x</p></body></html>",
    b'<html><head><meta property="og:title" content="From OG"><title>T</title></head><body><p>x</p></body></html>',
    b'<html><head><script type="application/ld+json">{"@context": "https://schema.org", "@type": "Article", '
    b'"headline": "From JSON-LD", "name": "From JSON-LD"}</script><title>T</title></head><body><p>x</p></body></html>',
    b'<html><head><script type="application/ld+json">{broken json</script><title>Still here</title></head></html>',
    b"<html><body><h1>Only a heading</h1><p>text</p></body></html>",
    b"<html><head><title>  spaced \n  out  </title></head><body></body></html>",
    b"<html><head><title>" + b"Long " * 200 + b"</title></head><body></body></html>",
    b"<html><body><p>no title at all</p></body></html>",
    b"",
]


@pytest.mark.parametrize("html", _TITLE_CASES)
def test_title_only_path_agrees_with_trafilaturas_extract_metadata(html):
    # chunking.extract._title skips extract_metadata's dates, authors, licence...; it must
    # still give the title that call gives (this fails if a trafilatura release drifts).
    import trafilatura

    from chunking.extract import _title

    meta = trafilatura.extract_metadata(html, default_url="https://docs.example.com/p") if html else None
    expected = (meta.title or "").strip() if meta is not None else ""
    assert _title(html, "https://docs.example.com/p") == expected


def test_nav_and_footer_changes_keep_the_content_hash():
    base = extract_page(docs_page(), "text/html")
    other = extract_page(
        docs_page(nav=["Home", "Pricing", "Brand new menu"], footer="(c) 2027 Someone Else"), "text/html"
    )
    assert content_hash(other.markdown) == content_hash(base.markdown)


def test_body_change_changes_the_content_hash():
    base = extract_page(docs_page(), "text/html")
    edited = extract_page(docs_page(body=DOC_BODY.replace("frobnicate", "defenestrate")), "text/html")
    assert content_hash(edited.markdown) != content_hash(base.markdown)
    assert "defenestrate" in edited.markdown


@pytest.mark.parametrize("ctype", ["text/markdown", "text/markdown; charset=utf-8", "text/x-markdown", "TEXT/MARKDOWN"])
def test_markdown_passes_through(ctype):
    md = "\n\n# My Doc\n\nSome *emphasis* and `code`.\n\n- a\n- b\n\n<nav>not html here</nav>\n\n"
    e = extract_page(md.encode(), ctype)
    assert e.markdown == md.strip()
    assert e.title == "My Doc"


def test_plain_text_passes_through():
    text = "  \nFirst line is the title\n\nsecond   paragraph\twith  spacing\n"
    e = extract_page(text.encode(), "text/plain; charset=utf-8")
    assert e.markdown == text.strip()
    assert e.title == "First line is the title"


def test_plain_text_non_utf8_is_decoded():
    e = extract_page("caf\u00e9 na\u00efve".encode("cp1252"), "text/plain")
    assert e.markdown == "caf\u00e9 na\u00efve"


@pytest.mark.parametrize(
    "content_type, charset",
    [("text/plain", "koi8-r"), ("text/plain; charset=koi8-r", None), ("text/markdown", "iso-8859-5")],
)
def test_plain_text_in_its_declared_charset_is_decoded_with_it(content_type, charset):
    """The Content-Type header's charset was dropped and every non-UTF-8 body read as cp1252:
    a koi8-r page was indexed as mojibake."""
    text = "Заголовок\n\nПривет, мир: настройка сервера."
    e = extract_page(text.encode(charset or "koi8-r"), content_type, charset=charset)
    assert e.markdown == text and e.title == "Заголовок"


@pytest.mark.parametrize("declared", ["header", "meta", "http-equiv"])
def test_html_in_a_declared_charset_is_decoded_with_it(declared):
    """trafilatura ignores both labels and guesses; on a short latin-1 page it guessed wrong
    ("élève" came out as "élčve")."""
    head = {
        "header": "",
        "meta": "<meta charset='iso-8859-1'>",
        "http-equiv": "<meta http-equiv='Content-Type' content='text/html; charset=iso-8859-1'>",
    }[declared]
    html = render_page("Café", "<p>Un élève à Noël, déjà. Un élève à Noël, déjà.</p>")
    html = html.replace("<meta charset='utf-8'>", head)
    e = extract_page(html.encode("latin-1"), "text/html", charset="iso-8859-1" if declared == "header" else None)
    assert "Un élève à Noël, déjà." in e.markdown and e.title.startswith("Café")
    assert e.markdown == extract_page(html.encode("utf-8"), "text/html").markdown


@pytest.mark.parametrize(
    "html",
    [
        b"<html><head><title>Empty</title></head><body></body></html>",
        b"<html><head><title>Empty</title></head><body><main>  \n </main></body></html>",
    ],
)
def test_html_without_main_content_yields_empty_markdown(html):
    e = extract_page(html, "text/html")
    assert e.markdown == ""
    assert e.title == "Empty"


# -- Splitter -----------------------------------------------------------------------------------


@pytest.mark.parametrize("md", ["", " ", "\n\n\t  \n"])
def test_empty_gives_no_chunks(md):
    assert Splitter().split(md) == []


@pytest.mark.parametrize("size, overlap", [(100, 100), (100, 150), (100, -1), (0, 0)])
def test_invalid_settings_rejected(size, overlap):
    with pytest.raises(ValueError):
        Splitter(chunk_size=size, chunk_overlap=overlap)


def test_settings_string_changes_with_size_and_overlap():
    base = Splitter(chunk_size=1000, chunk_overlap=100).settings
    assert Splitter(chunk_size=1000, chunk_overlap=100).settings == base
    assert Splitter(chunk_size=500, chunk_overlap=100).settings != base
    assert Splitter(chunk_size=1000, chunk_overlap=50).settings != base
    assert Splitter(chunk_size=100, chunk_overlap=10).settings != Splitter(chunk_size=1001, chunk_overlap=0).settings


def test_small_document_is_one_chunk_per_section():
    md = "# Title\n\nIntro.\n\n## A\n\nText a.\n\n## B\n\nText b."
    chunks = Splitter(chunk_size=1000, chunk_overlap=0).split(md)
    assert len(chunks) == 3
    assert "Text a." in chunks[1] and "Text b." not in chunks[1]
    assert "Text b." in chunks[2]


def test_code_fence_kept_together_when_it_fits():
    md = "## Usage\n\nRun this:\n\n```\n# not a heading, a shell comment\npagesync run\n```\n\nDone."
    chunks = Splitter(chunk_size=1000, chunk_overlap=0).split(md)
    assert len(chunks) == 1
    assert "# not a heading, a shell comment\npagesync run" in chunks[0]


def _section(k: int, words: int = 90) -> str:
    paras = []
    for p in range(3):
        paras.append(" ".join(f"s{k}w{p * words + i}" for i in range(words)) + ".")
    return f"## Section {k}\n\n" + "\n\n".join(paras)


def _section_of(chunk: str) -> int:
    ks = {int(m) for m in re.findall(r"\bs(\d+)w\d+", chunk)} | {int(m) for m in re.findall(r"Section (\d+)", chunk)}
    assert len(ks) == 1, f"chunk spans sections {ks}: {chunk[:80]!r}"
    return ks.pop()


@pytest.mark.parametrize("overlap", [0, 40])
def test_edit_inside_one_section_changes_only_that_sections_chunks(overlap):
    splitter = Splitter(chunk_size=200, chunk_overlap=overlap)
    sections = [_section(k) for k in range(5)]
    before = splitter.split("# Doc\n\n" + "\n\n".join(sections))
    sections[2] = sections[2].replace("s2w100 ", "s2w100 s2wINSERTED and more words here ")
    after = splitter.split("# Doc\n\n" + "\n\n".join(sections))
    assert before != after

    def by_section(chunks):
        out: dict[int, list[str]] = {}
        for c in chunks:  # the document title alone is no chunk (it heads every chunk's path)
            out.setdefault(_section_of(c), []).append(c)
        return out

    b, a = by_section(before), by_section(after)
    assert set(b) == set(a) == set(range(5))
    assert before[0] == after[0] and before[0].startswith("## Section 0\n\ns0w0")
    for k in (0, 1, 3, 4):
        assert a[k] == b[k], f"section {k} changed"
    assert a[2] != b[2]
    assert len(b[2]) > 2  # the section really was split into several chunks


def test_every_chunk_within_size_on_long_unbroken_text():
    md = "## Blob\n\n" + "x" * 2500 + "\n\n" + "y" * 999
    chunks = Splitter(chunk_size=300, chunk_overlap=30).split(md)
    assert chunks and all(len(c) <= 300 for c in chunks)
    assert sum(c.count("x") for c in chunks) >= 2500


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEF0123456789", min_size=1, max_size=12)
_paragraph = st.lists(_word, min_size=1, max_size=60).map(" ".join)
_long_token = st.text(alphabet="qwertyuiop", min_size=50, max_size=700)
_list_block = st.lists(_paragraph, min_size=1, max_size=5).map(lambda xs: "\n".join("- " + x for x in xs))
_code_block = st.lists(_paragraph, min_size=1, max_size=6).map(lambda xs: "```\n" + "\n".join(xs) + "\n```")
_block = st.one_of(_paragraph, _paragraph, _list_block, _code_block, _long_token)


@st.composite
def markdown_docs(draw):
    parts = []
    if draw(st.booleans()):
        parts.append(draw(_paragraph))
    for _ in range(draw(st.integers(1, 6))):
        level = draw(st.integers(1, 4))
        parts.append("#" * level + " " + draw(_paragraph.map(lambda p: p[:80])))
        parts.extend(draw(st.lists(_block, min_size=0, max_size=4)))
    return "\n\n".join(parts)


@settings(max_examples=120, deadline=None)
@given(markdown_docs(), st.integers(40, 500), st.data())
def test_every_chunk_within_chunk_size(md, size, data):
    overlap = data.draw(st.integers(0, size // 3))
    chunks = Splitter(chunk_size=size, chunk_overlap=overlap).split(md)
    assert chunks  # non-empty markdown gives at least one chunk
    for c in chunks:
        assert c and c == c.strip()
        assert len(c) <= size, (len(c), size, c[:60])


@settings(max_examples=80, deadline=None)
@given(markdown_docs(), st.integers(100, 500))
def test_split_is_deterministic_and_loses_no_words(md, size):
    s = Splitter(chunk_size=size, chunk_overlap=0)
    chunks = s.split(md)
    assert chunks == s.split(md)
    # A page title left out as a chunk of its own is in the heading path of the chunks below it.
    joined = "\n".join(c.embedded for c in s.chunks(md))
    for w in set(re.findall(r"[A-Za-z0-9]+", md)):
        if len(w) <= 12:  # longer tokens may be cut by the character fallback
            assert w in joined, w


def test_short_page_extracts_its_text_not_the_nav():
    # Below trafilatura's default MIN_EXTRACTED_SIZE (250) it used to return the whole page.
    from demo.site_server import render_page
    from sync.core.hashing import content_hash

    body = "<p>About FastAPI, its design, inspiration and more.</p>"
    a = extract_page(render_page("About", body, nav=["Guide", "API"]).encode())
    b = extract_page(render_page("About", body, nav=["Guide", "API", "Plugins"], footer="other").encode())
    assert "Guide" not in a.markdown and "About FastAPI" in a.markdown
    assert content_hash(a.markdown) == content_hash(b.markdown)


# -- chunk texts stay put when sections come and go (what vector reuse relies on) ---------------


def _chunks_by_section(chunks: list[str]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for c in chunks:
        if c.startswith("# "):  # the page title, a section of its own
            continue
        out.setdefault(_section_of(c), []).append(c)
    return out


@pytest.mark.parametrize("size, overlap", [(1000, 100), (200, 40), (400, 0)])
@pytest.mark.parametrize("intro", ["", "An intro paragraph under the title.\n\n"])
def test_inserting_a_section_at_the_top_keeps_every_other_sections_chunks(size, overlap, intro):
    splitter = Splitter(chunk_size=size, chunk_overlap=overlap)
    sections = [_section(k, words=20 + 15 * k) for k in range(1, 10)]  # short and long sections
    before = splitter.split("# Doc\n\n" + intro + "\n\n".join(sections))
    after = splitter.split("# Doc\n\n" + intro + "\n\n".join([_section(0, words=30), *sections]))
    b, a = _chunks_by_section(before), _chunks_by_section(after)
    assert set(a) == set(b) | {0}
    for k in b:
        assert a[k] == b[k], f"section {k} changed"
    assert set(before) <= set(after)
    assert len(set(after) - set(before)) == len(a[0])


def test_removing_a_section_keeps_every_other_sections_chunks():
    splitter = Splitter()
    sections = [_section(k, words=20 + 15 * k) for k in range(6)]
    before = splitter.split("# Doc\n\n" + "\n\n".join(sections))
    after = splitter.split("# Doc\n\n" + "\n\n".join(sections[:3] + sections[4:]))
    assert set(after) <= set(before)
    assert set(before) - set(after) == set(_chunks_by_section(before)[3])


def test_page_title_is_not_glued_to_the_first_section():
    # langchain's grouping carries a heading that is directly followed by a deeper one into
    # the next section; for the page title that made the first section's chunk depend on
    # which section happens to come first. A title with nothing under it is no chunk at all:
    # it is in the heading path of every chunk below it.
    md = "# Release Notes\n\n## Latest Changes\n\n### Docs\n\n* one\n* two\n\n## 0.1.0\n\n### Fixes\n\n* three"
    assert Splitter().split(md) == [
        "## Latest Changes\n\n### Docs\n\n* one\n* two",  # an h2 still carries into its first h3
        "## 0.1.0\n\n### Fixes\n\n* three",
    ]
    assert Splitter().split("# Guide\n\n## Topic\n\nText.") == ["## Topic\n\nText."]
    assert [c.headings for c in Splitter().chunks("# Guide\n\n## Topic\n\nText.")] == [("Guide", "Topic")]
    assert Splitter().split("# Guide\n\nIntro.\n\n## Topic\n\nText.") == ["# Guide\n\nIntro.", "## Topic\n\nText."]


def test_inserted_section_through_extraction_changes_only_its_own_chunks():
    # The real path: HTML -> trafilatura markdown -> chunks, page title (h1) directly above
    # the first section.
    from demo.site_server import render_page
    from tests.helpers import para

    def page(names):
        body = "".join(f"<h2>Topic {n}</h2><p>{para('t-' + n, 40)}</p>" for n in names)
        return extract_page(render_page("Guide", body).encode(), "text/html").markdown

    splitter = Splitter()
    before = splitter.split(page(["alpha", "beta", "gamma"]))
    after = splitter.split(page(["new", "alpha", "beta", "gamma"]))
    assert set(before) <= set(after)
    (new,) = set(after) - set(before)
    assert "Topic new" in new


@settings(max_examples=120, deadline=None)
@given(markdown_docs())
def test_sections_are_langchains_wherever_no_title_is_glued(md):
    # Grouping is langchain's own except for level-1 headings and sections of headings only
    # (they go with the next section): without level-1 headings, the same text in the same
    # order, and no section is headings only unless the page is.
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    md = re.sub(r"(?m)^# ", "## ", md)
    ours = Splitter().sections(md)
    # (their line groups are apart by a two-space hard break, ours by a blank line)
    theirs = [
        d.page_content.replace("  \n", "\n\n")
        for d in MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2"), ("###", "h3")], strip_headers=False).split_text(
            md
        )
    ]
    assert "\n\n".join(ours) == "\n\n".join(theirs)
    heading_only = [s for s in ours if all(re.match(r"#{1,6}( |$)", ln) for ln in s.split("\n") if ln)]
    assert not heading_only or len(ours) == 1
    if all(not all(re.match(r"#{1,6}( |$)", ln) for ln in t.split("\n") if ln) for t in theirs):
        assert ours == theirs


def test_chunker_settings_name_the_grouping():
    # Part of the pipeline fingerprint: changing how sections are grouped re-chunks every page once.
    assert "v5" in Splitter().settings


# -- code keeps its whitespace ------------------------------------------------------------------

_PY = (
    'class MyClass:\n    """A simple example class"""\n    i = 12345\n\n    def f(self):\n        return "hello world"'
)
_NESTED = "def walk(tree):\n    for node in tree:\n        if node.children:\n            for child in node.children:\n                yield child\n        else:\n            yield node"
_BLANKS = "import os\n\n\ndef main():\n    x = 1\n\n    return x"
_TABS = "all:\n\tcc -o app main.c\n\t@echo done"
_COMMENTS = (
    "def update(self, keys):\n    # provides new signature\n    # but does not break __init__()\n    return keys"
)


@pytest.mark.parametrize(
    "md, code",
    [
        ("## Classes\n\nA class:\n\n```\n" + _PY + "\n```\n\nThen more.", _PY),
        ("## Walk\n\n```python\n" + _NESTED + "\n```", "```python\n" + _NESTED + "\n```"),
        ("# T\n\n## Blank lines\n\nText.\n\n```py\n" + _BLANKS + "\n```\nAfter, no blank line.", _BLANKS),
        ("## Make\n\n~~~makefile\n" + _TABS + "\n~~~", "~~~makefile\n" + _TABS + "\n~~~"),
        ("## Comments\n\n```\n" + _COMMENTS + "\n```", _COMMENTS),
        (
            "## In a list\n\n- step one:\n\n    ```bash\n    if true; then\n        echo hi\n    fi\n    ```\n\n- step two",
            "    ```bash\n    if true; then\n        echo hi\n    fi\n    ```",
        ),
    ],
    ids=["python", "nested-lang", "blank-lines", "tabs-tilde", "comments", "list-item"],
)
def test_code_block_kept_verbatim_in_its_sections_chunk(md, code):
    chunks = Splitter(chunk_size=1000, chunk_overlap=100).split(md)
    (chunk,) = [c for c in chunks if code.strip().split("\n")[0].strip() in c]
    assert code in chunk
    assert chunk.startswith("#")  # with its heading, not a chunk of its own


def test_code_split_by_size_keeps_each_lines_indentation():
    body = "\n".join(f"def f{i}(x):\n    if x:\n        return {i}" for i in range(40))
    md = "## Big\n\nIntro.\n\n```\n" + body + "\n```"
    chunks = Splitter(chunk_size=200, chunk_overlap=0).split(md)
    assert len(chunks) > 3
    lines = {ln for c in chunks for ln in c.split("\n")}
    for ln in body.split("\n"):
        assert ln in lines, ln
    assert all(len(c) <= 200 for c in chunks)


def test_prose_outside_code_is_still_stripped():
    # Only code is verbatim: indented prose and trailing spaces are stripped, a soft wrap joined.
    md = "## A\n\n  Indented prose.  \n   more of it\n\n```\n  code\n```"
    assert Splitter().split(md) == ["## A\n\nIndented prose. more of it\n\n```\n  code\n```"]


_indent = st.sampled_from(["", "  ", "    ", "        ", "\t", "\t    "])
_code_text = st.text(alphabet="abcdefxyz_=()[]:.,0123456789'\" ", min_size=1, max_size=30).map(str.strip).filter(bool)
_code_line = st.one_of(st.tuples(_indent, _code_text).map("".join), st.just(""))
_code_body = st.lists(_code_line, min_size=1, max_size=25).map("\n".join).filter(lambda b: b.strip())


@settings(max_examples=120, deadline=None)
@given(
    markdown_docs(), _code_body, st.sampled_from(["```", "```python", "~~~", "```js"]), st.integers(60, 600), st.data()
)
def test_code_lines_keep_their_leading_whitespace(md, body, fence, size, data):
    # Wherever a code block lands and however it is split, every non-blank line of it shows up
    # in some chunk with its indentation intact; a small block stays whole.
    close = "~~~" if fence.startswith("~") else "```"
    block = f"{fence}\n{body}\n{close}"
    parts = md.split("\n\n")
    at = data.draw(st.integers(0, len(parts)))
    doc = "\n\n".join(parts[:at] + [block] + parts[at:])
    overlap = data.draw(st.integers(0, size // 3))
    chunks = Splitter(chunk_size=size, chunk_overlap=overlap).split(doc)
    lines = {ln for c in chunks for ln in c.split("\n")}
    for ln in body.split("\n"):
        if ln.strip() and len(ln) < size // 2:  # longer lines may be cut by the size fallback
            assert ln.rstrip() in lines, (ln, chunks)
    # A block that fits stays whole, fences and all, with the heading above it (at most 85
    # characters here: a heading goes with the text under it).
    if len(block) + 87 < size // 2:
        assert any(block in c for c in chunks), (block, chunks)


def test_a_fence_opened_mid_line_does_not_swap_code_and_prose():
    """trafilatura writes inline code spanning a line break as `text ```` then code then a
    closing fence line: the code after it must still keep its indentation."""
    from chunking.split import Splitter

    md = (
        "## S\n\nTo call it, just call ```\nBase.method(self,\narguments)\n```\n.\n\nThen:\n\n"
        "```\nclass A:\n    def f(self):\n        # a comment\n        return 1\n```\n\nEnd text."
    )
    (chunk,) = Splitter().split(md)
    assert "just call\n```\nBase.method(self,\narguments)\n```" in chunk
    assert "```\nclass A:\n    def f(self):\n        # a comment\n        return 1\n```" in chunk
    assert chunk.endswith("End text.")
