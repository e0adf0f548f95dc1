"""A page is a guide or an API reference, told by its generator's markup (`page_kind_of`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunking import GUIDE, REFERENCE, extract_page

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    "name, kind",
    [
        ("sphinx-api.html", REFERENCE),  # autodoc: <dl class="py class"><dt class="sig sig-object py">
        ("mkdocstrings-api.html", REFERENCE),  # <div class="doc doc-object doc-class">
        ("mkdocstrings-symbols.html", REFERENCE),
        ("mkautodoc-api.html", REFERENCE),  # <div class="autodoc"><div class="autodoc-signature">
        ("sphinx-options.html", GUIDE),
        ("mkdocs-material-options.html", GUIDE),
        ("docusaurus-options.html", GUIDE),
    ],
)
def test_real_generator_output(name, kind):
    assert extract_page((FIXTURES / name).read_bytes(), "text/html").page_kind == kind


def _entry(text: str, kind: str = "sphinx") -> str:
    if kind == "sphinx":
        return f'<dl class="py function"><dt class="sig sig-object py">f()</dt><dd><p>{text}</p></dd></dl>'
    if kind == "mkautodoc":
        return f'<div class="autodoc"><div class="autodoc-signature">f()</div><div class="autodoc-docstring"><p>{text}</p></div></div>'
    return f'<div class="doc doc-object doc-function"><h2>f</h2><div class="doc doc-contents"><p>{text}</p></div></div>'


def _page(main: str, outside: str = "") -> bytes:
    return f"<html><head><title>T</title></head><body>{outside}<main>{main}</main></body></html>".encode()


PROSE = "Words that explain how to use it in a task. "  # 37 characters, whitespace left out


@pytest.mark.parametrize(
    "body, kind",
    [
        (_page(_entry(PROSE * 9) + f"<p>{PROSE * 3}</p>"), REFERENCE),  # three quarters entries
        (_page(_entry(PROSE * 6) + f"<p>{PROSE * 4}</p>"), GUIDE),  # three fifths: a guide ending in entries
        (_page(_entry(PROSE * 9, "mkdocstrings") + f"<p>{PROSE * 3}</p>"), REFERENCE),
        (_page(_entry(PROSE * 9, "mkautodoc") + f"<p>{PROSE * 3}</p>"), REFERENCE),
        # a div that is only named "autodoc", with no signature in it, is no entry
        (_page(f'<div class="autodoc"><p>{PROSE * 9}</p></div><p>{PROSE * 3}</p>'), GUIDE),
        (_page(f"<p>{PROSE * 10}</p>"), GUIDE),
        # a class's methods are entries inside its entry: counted once
        (_page(_entry(PROSE * 2 + _entry(PROSE * 2)) + f"<p>{PROSE * 3}</p>"), GUIDE),
        # entries outside the main content (a sidebar of them) are not the page's
        (_page(f"<p>{PROSE * 3}</p>", outside=f"<aside>{_entry(PROSE * 20)}</aside>"), GUIDE),
        (_page(""), GUIDE),  # no text at all
        # MkDocs Material's <main> holds the site's navigation, which extraction drops: not counted
        (_page(f"<nav>{PROSE * 30}</nav>" + _entry(PROSE * 9) + f"<p>{PROSE * 3}</p>"), REFERENCE),
        (_page(f"<div role='navigation'>{PROSE * 30}</div>" + _entry(PROSE * 9)), REFERENCE),
    ],
)
def test_the_share_of_text_in_api_entries(body, kind):
    assert extract_page(body, "text/html").page_kind == kind


def test_markdown_and_plain_text_bodies_are_guides():
    assert extract_page(b"# API\n\n`f()`", "text/markdown").page_kind == GUIDE
    assert extract_page(b"API f()", "text/plain").page_kind == GUIDE


def test_a_selector_tells_the_kind_of_what_it_selects():
    body = _page(f"<div id='c'>{_entry(PROSE * 9)}</div><p>{PROSE * 9}</p>")
    assert extract_page(body, "text/html").page_kind == GUIDE  # half the main content
    assert extract_page(body, "text/html", select="#c").page_kind == REFERENCE
