"""Main content of a page as markdown, boilerplate (nav, header, footer, sidebars) gone.

trafilatura does the extraction: it is maintained, benchmarks at the top of open-source
main-content extractors, and emits markdown with headings, lists, code and tables. Its
precision matters here twice: boilerplate left in would both pollute chunks and make a
nav-only change look like a content change. When a page marks its main content
(`<main>`, `<article>`, `role="main"`) nothing outside it is read; heading permalinks and
the converter's markdown escapes are taken out (`_HEADERLINKS`, `unescape_converted`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .normalise import unescape_converted

__all__ = [
    "Extracted",
    "extract_page",
    "EXTRACTOR_ID",
    "SelectorError",
    "NoMatchError",
    "compile_selector",
    "GUIDE",
    "REFERENCE",
    "PAGE_KINDS",
]

# v5: bodies decoded from their declared charset (header, then <meta>). Pages v4 read from a
# non-UTF-8 body were indexed as mojibake, and a 304 would keep them so: a new id makes each
# page's next visit an unconditional GET. Unchanged texts keep their vectors (reuse).
# v6: the hash covers the normal form (code indentation included, `chunking.normalise`); only
# the main content when a page marks it; no headerlinks (Sphinx's, MkDocs') or converter
# escapes. Every page's next visit re-reads and re-hashes it.
# v7: a <details> block's <summary> is a paragraph, not a heading (trafilatura made every
# Pallets "Changelog" summary a `## Changelog`, cutting the real section short).
# v8: each page is told a guide or an API reference (`page_kind`), which every point carries:
# every page's next visit re-reads it, and rewrites its points with their vectors reused; and a
# code block's line numbers (Pygments') are no longer read into its code.
# v9: an empty <code> no longer swallows the text after it (mkdocstrings' symbol badge cost
# every entry's heading its name), a generated entry's heading is its name, labels left out, and
# mkautodoc's entries count towards an API reference.
EXTRACTOR_ID = "trafilatura-md-v9"
# Page landmarks pruned before extraction. Generic (ARIA roles and HTML5 elements, no
# site-specific classes): on 200 real Sphinx pages this took boilerplate left in the
# markdown from 1 % of pages to 0 and made the hash stable under nav edits on 100 %
# (was 97 %), with recall and code retention unchanged (bench/results/extraction_quality.md).
_PRUNE = ["//*[@role='navigation']", "//*[@role='search']", "//*[@role='contentinfo']", "//nav", "//footer"]
# Heading permalinks: Sphinx's and MkDocs' `<a class="headerlink">¶</a>`, and any link whose
# whole text is a pilcrow. Left in, every heading and title ends in "¶".
_HEADERLINKS = (
    "//a[contains(concat(' ', normalize-space(@class), ' '), ' headerlink ')] | //a[normalize-space(.)='\u00b6']"
)
# An empty <code>: trafilatura loses or misformats the text after it (a heading's or list item's
# text is dropped, a paragraph's tail read as code). mkdocstrings draws each entry's symbol type
# ("meth", "attr") with CSS in one, before the entry's name in its heading.
_EMPTY_CODE = "//code[not(*) and normalize-space(.)='']"
# mkdocstrings' labels in an entry's heading (`class-attribute`, `property`, ...): the heading
# is the entry's name, the path a chunk is found by; left in, they run together after it.
_HEADING_LABELS = (
    "//*[self::h1 or self::h2 or self::h3 or self::h4 or self::h5 or self::h6]"
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' doc-labels ')]"
)
# The main content, when a page marks it: nothing outside it is content (a page-level
# <header> with a build stamp is boilerplate, like <nav> and <footer>). <main> and
# role="main" first: <article>s count only on a page without either (next to a main
# element they are teasers and cards).
_MAIN = "//main | //*[@role='main']"
_ARTICLES = "//article"
_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_CHARSET_PARAM = re.compile(r";\s*charset\s*=\s*[\"']?([A-Za-z0-9._:-]+)")
# <meta charset="x"> and <meta http-equiv="Content-Type" content="text/html; charset=x">
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
# <aside> inside the main content is content (Starlight's admonitions, docutils' footnotes,
# sidebars and topics), though trafilatura drops every <aside> as boilerplate; one outside
# it is a page sidebar. Kept when its links are at most half of its text (a table of
# contents is mostly links).
_MAIN_ASIDES = "//main//aside | //article//aside | //*[@role='main']//aside"
_MAX_ASIDE_LINK_SHARE = 0.5


# What a page is (payload `page_kind`): an API reference, most of its text generated entries
# of a documentation tool's API objects, or a guide (everything else). Questions rank guides
# first (`sync.core.ranking`): a reference names every parameter a question may use.
GUIDE, REFERENCE = "guide", "reference"
PAGE_KINDS = (GUIDE, REFERENCE)
# One generated API entry: Sphinx's object description (autodoc and every domain:
# `<dl class="py class"><dt class="sig sig-object py">`), mkdocstrings' `doc-object` div and
# mkautodoc's `autodoc` div (its `autodoc-signature` inside).
_ENTRY = (
    "self::dl[dt[contains(concat(' ', normalize-space(@class), ' '), ' sig-object ')]]"
    " or self::div[contains(concat(' ', normalize-space(@class), ' '), ' doc-object ')]"
    " or self::div[contains(concat(' ', normalize-space(@class), ' '), ' autodoc ')]"
    "[div[contains(concat(' ', normalize-space(@class), ' '), ' autodoc-signature ')]]"
)
_OUTER_ENTRIES = f"//*[{_ENTRY}][not(ancestor::*[{_ENTRY}])]"
# What the text extraction does not read (`_PRUNE`, scripts and styles): MkDocs Material's <main>
# holds its navigation sidebars.
_UNREAD = "self::nav or self::footer or self::script or self::style or @role='navigation' or @role='search' or @role='contentinfo'"
_OUTER_UNREAD = f"//*[{_UNREAD}][not(ancestor::*[{_UNREAD}])]"
# A page is a reference when at least this share of its content's text is in API entries:
# Click's `api` page is 100 % entries, FastAPI's 22 mkdocstrings pages 80 to 100 % and this
# project's 98 %, while a guide that ends with its types' entries (Click's parameter types,
# 53 %) stays a guide.
_REFERENCE_SHARE = 2 / 3


@dataclass(frozen=True)
class Extracted:
    title: str
    markdown: str
    page_kind: str = GUIDE


_CONFIG = None


def _config():
    """trafilatura's settings with MIN_EXTRACTED_SIZE lowered from 250 to 1.

    Below that size trafilatura gives up on the main content and returns the whole page,
    nav and header included: a short page (an "About" blurb) would then change with every
    nav edit and its chunks would be mostly menu. Found replaying FastAPI's docs history.
    """
    global _CONFIG
    if _CONFIG is None:
        from trafilatura.settings import use_config

        cfg = use_config()
        cfg["DEFAULT"]["MIN_EXTRACTED_SIZE"] = "1"
        _CONFIG = cfg
    return _CONFIG


def _title(body: bytes, url: str | None) -> str:
    """The page title exactly as `trafilatura.extract_metadata(...).title` finds it (meta
    tags, then JSON-LD, then <title>/<h1>), without the rest of that call.

    extract_metadata also looks for dates (htmldate), authors, site name, categories and
    licence, none of which pagesync keeps: on FastAPI's and Python's docs it was 69 % of a
    page's extraction CPU, and this title-only path is ~20x cheaper with the same titles
    on 315 of 315 pages. It uses trafilatura.metadata's step functions, so if a release
    renames them it falls back to the whole call; tests/chunking/test_chunking.py checks the two
    agree.
    """
    try:
        from trafilatura.core import load_html
        from trafilatura.metadata import examine_meta, extract_meta_json, extract_title
    except ImportError:  # pragma: no cover - a trafilatura release that moved them
        return _title_full(body, url)
    tree = load_html(body)
    if tree is None:
        return ""
    _drop(tree, _HEADERLINKS)
    meta = examine_meta(tree)
    try:
        meta = extract_meta_json(tree, meta)
    except Exception:  # noqa: BLE001 - extract_metadata swallows JSON-LD bugs the same way
        pass
    if not meta.title:
        meta.title = extract_title(tree)
    meta.clean_and_trim()
    return (meta.title or "").strip()


def _title_full(body: bytes, url: str | None) -> str:
    import trafilatura

    meta = trafilatura.extract_metadata(body, default_url=url)
    return (meta.title or "").strip() if meta is not None else ""


def _decode(body: bytes, charset: str | None = None) -> str:
    """UTF-8 first (what a valid UTF-8 body decodes to never depends on a label), then the
    declared charset, then cp1252."""
    for enc in ("utf-8", charset, "cp1252"):
        if not enc:
            continue
        try:
            return body.decode(enc)
        except (LookupError, UnicodeDecodeError):
            continue
    return body.decode("utf-8", errors="replace")


def _as_utf8(body: bytes, charset: str | None) -> bytes:
    """An HTML body that is not UTF-8, re-encoded as UTF-8 from the charset its Content-Type
    header declares, else from a <meta> charset near its start; else as it came.

    trafilatura reads neither label: it takes valid UTF-8 as is and guesses anything else,
    and on short pages the guess goes wrong (latin-1 prose came out as cp1257). A UTF-8
    body is passed on untouched, so its hash never depends on a label."""
    try:
        body.decode("utf-8")
        return body
    except UnicodeDecodeError:
        pass
    m = _META_CHARSET.search(body[:2048])
    for enc in (charset, m.group(1).decode("ascii") if m else None):
        if not enc:
            continue
        try:
            return body.decode(enc).encode("utf-8")
        except (LookupError, UnicodeDecodeError):
            continue
    return body


def _drop(tree, xpath: str) -> None:
    """Remove the elements `xpath` selects, keeping the text that follows each (its tail)."""
    for el in tree.xpath(xpath):
        if el.getparent() is not None:
            el.drop_tree()


def _main_only(tree) -> None:
    """Keep only the page's main content (`_MAIN`, outermost elements, in order) in <body>,
    when it marks one; else leave the page alone."""
    found = tree.xpath(_MAIN) or tree.xpath(_ARTICLES)
    if found:
        _keep_only(tree, found)


def _keep_only(tree, found: list) -> None:
    """Make the outermost of `found` (in document order) the whole of <body>."""
    keep = [el for el in found if not any(a in found for a in el.iterancestors())]
    body = tree.find("body")
    if body is None or any(el.tag in ("html", "body") for el in keep):
        return  # <body role="main">: the whole page is the main content
    for el in keep:
        el.tail = None
        el.getparent().remove(el)
    for child in list(body):
        body.remove(child)
    body.text = None
    if len(keep) > 1:
        # trafilatura reads one main element (the first <article>): several, say a blog's
        # posts, are one content element here, each a <section> of it.
        from lxml import etree

        wrapper = etree.SubElement(body, "main")
        for el in keep:
            el.tag = "section"
        wrapper.extend(keep)
    else:
        body.extend(keep)


def _keep_content_asides(tree) -> None:
    """In-content <aside>s turned into <div>s (see `_MAIN_ASIDES`)."""
    for aside in tree.xpath(_MAIN_ASIDES):
        text = len("".join(aside.itertext()).strip())
        links = sum(len("".join(a.itertext()).strip()) for a in aside.iter("a"))
        if text and links <= _MAX_ASIDE_LINK_SHARE * text:
            aside.tag = "div"


# What makes a page worth the second parse: a landmark, an aside, a headerlink or a pilcrow,
# an API entry, line numbers or an empty <code> (looked for in the first MiB, without copying it).
_WORTH_A_PARSE = re.compile(
    rb"<main|<article|role=|<aside|<summary|headerlink|\xc2\xb6|sig-object|doc-object|autodoc-signature|linenos|<code[^>]*>\s*</code>",
    re.I,
)


def _text_length(el) -> float:
    """Characters of `el`'s text, whitespace folded (an XPath in lxml's C code: one pass)."""
    return float(el.xpath("string-length(normalize-space(.))"))


def page_kind_of(tree) -> str:
    """`REFERENCE` when generated API entries (`_OUTER_ENTRIES`) hold at least `_REFERENCE_SHARE`
    of the text extraction reads in the page's <body> (its main content once prepared), else `GUIDE`."""
    body = tree.find("body")
    if body is None:
        return GUIDE
    total = _text_length(body) - sum(_text_length(el) for el in body.xpath("." + _OUTER_UNREAD))
    if total <= 0:
        return GUIDE
    in_entries = sum(_text_length(el) for el in body.xpath("." + _OUTER_ENTRIES))
    return REFERENCE if in_entries >= _REFERENCE_SHARE * total else GUIDE


# Pygments' line numbers (Sphinx `:linenos:`, MkDocs `linenums`): inline, a `linenos` span before each
# line of the <pre>; in a table, a `linenos` cell beside the `code` cell. Left in, the numbers run
# into the code ("1def add") or the table reads as one row with the code's lines run together.
_LINE_NUMBERS = "//pre//span[contains(concat(' ', normalize-space(@class), ' '), ' linenos ')]"
_NUMBERED_TABLES = "//table[contains(concat(' ', normalize-space(@class), ' '), ' highlighttable ')]"
_CODE_CELL = ".//td[contains(concat(' ', normalize-space(@class), ' '), ' code ')]"


def _code_without_line_numbers(tree) -> None:
    """Each numbered code block as the code alone: a table's code cell in its place, inline
    numbers dropped (the text after each, the line's indentation, kept)."""
    for table in tree.xpath(_NUMBERED_TABLES):
        cells, parent = table.xpath(_CODE_CELL), table.getparent()
        if not cells or parent is None:
            continue
        at = parent.index(table)
        for i, child in enumerate(list(cells[0])):
            parent.insert(at + i, child)
        table.text = None
        for child in list(table):
            table.remove(child)
        table.drop_tag()  # its tail stays in place
    _drop(tree, _LINE_NUMBERS)


def _summaries_as_paragraphs(tree) -> None:
    """<details> as a <div> and its <summary> as a <p>: a disclosure's label is text of
    the section it sits in, not a heading of its own."""
    for el in tree.iter("summary"):
        el.tag = "p"
    for el in tree.iter("details"):
        el.tag = "div"


class SelectorError(ValueError):
    """A --select value that is no CSS selector (a configuration error)."""


class NoMatchError(ValueError):
    """A page on which the --select selector matches no element."""


@lru_cache(maxsize=64)
def compile_selector(css: str) -> str:
    """The XPath a CSS selector stands for (lxml's cssselect translation, the one lxml's
    `.cssselect()` uses); `SelectorError` for a selector cssselect cannot read."""
    from cssselect import GenericTranslator, SelectorError as _CssError

    try:
        return GenericTranslator().css_to_xpath(css)
    except _CssError as exc:
        raise SelectorError(f"--select {css!r} is not a CSS selector cssselect reads ({exc})") from None


def _selected_only(tree, css: str) -> None:
    """Keep only what `css` selects (outermost elements, in order) in <body>, as
    `_main_only` does for a landmark; `NoMatchError` when it selects nothing."""
    found = tree.xpath(compile_selector(css))
    found = [el for el in found if isinstance(getattr(el, "tag", None), str)]
    if not found:
        raise NoMatchError(f"--select {css!r} matched no element of the page")
    _keep_only(tree, found)


def _prepared(body: bytes, select: str | None = None):
    """The page as an lxml tree ready for trafilatura: main content only (the `select`ed
    elements when given), in-content asides kept, headerlinks gone; or the bytes unchanged
    when there is nothing to do (no second parse)."""
    if select is None and not _WORTH_A_PARSE.search(body, 0, 1 << 20):
        return body
    from trafilatura.utils import load_html  # trafilatura's own decoding and parsing

    tree = load_html(body)
    if tree is None:
        if select is not None:
            raise NoMatchError(f"--select {select!r}: the page could not be parsed as HTML")
        return body
    if select is not None:
        _selected_only(tree, select)
    else:
        _main_only(tree)
    _keep_content_asides(tree)
    _summaries_as_paragraphs(tree)
    _code_without_line_numbers(tree)
    _drop(tree, _HEADERLINKS)
    _drop(tree, _HEADING_LABELS)
    _drop(tree, _EMPTY_CODE)
    return tree


def extract_page(
    body: bytes,
    content_type: str = "text/html",
    url: str | None = None,
    *,
    charset: str | None = None,
    select: str | None = None,
) -> Extracted:
    """Extract (title, markdown). Markdown and plain-text bodies pass through untouched.

    `charset` is the one the Content-Type header declares (else read from `content_type`
    when that is the whole header): it decodes a body that is not UTF-8. An HTML page with
    no extractable main content yields empty markdown: a new page is then tracked with no
    chunks, and a page that had text is purged (`sync.core.decision.decide`, `text_empty`).
    `select`: a CSS selector; only the elements it matches are content (instead of the
    page's landmarks), and a page where it matches nothing raises `NoMatchError` (the page
    fails and keeps its points: a theme change must not read as every page emptied).
    Markdown and plain-text bodies have no elements: `select` does not apply to them.
    `page_kind`: `REFERENCE` for a page mostly of generated API entries (`page_kind_of`), else `GUIDE`.
    """
    ctype = (content_type or "text/html").lower()
    if charset is None:
        m = _CHARSET_PARAM.search(ctype)
        charset = m.group(1) if m else None
    if ctype.startswith(("text/markdown", "text/x-markdown", "text/plain")):
        text = _decode(body, charset)
        first = next((ln.lstrip("# ").strip() for ln in text.splitlines() if ln.strip()), "")
        return Extracted(title=first[:200], markdown=text.strip())

    import trafilatura  # imported here: heavy, and only needed when a page really arrived

    body = _as_utf8(body, charset)
    prepared = _prepared(body, select)
    kind = GUIDE if isinstance(prepared, bytes) else page_kind_of(prepared)  # before trafilatura prunes the tree

    # Metadata stays out of the markdown: trafilatura's metadata header carries dates it
    # finds in footers ("built at ..."), which would turn every deploy into a change.
    markdown = (
        trafilatura.extract(
            prepared,
            url=url,
            output_format="markdown",
            with_metadata=False,
            include_comments=False,
            include_tables=True,
            include_formatting=True,
            include_links=False,
            include_images=False,
            favor_recall=True,
            deduplicate=False,
            prune_xpath=_PRUNE,
            config=_config(),
        )
        or ""
    )
    title = _title(body, url)
    if not title:
        m = _TITLE_RE.search(_decode(body[:65536]))
        title = re.sub(r"\s+", " ", m.group(1)).strip() if m else ""
    return Extracted(title=title, markdown=unescape_converted(markdown).strip(), page_kind=kind)
