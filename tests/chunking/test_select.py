"""--select: only the elements a CSS selector matches are a page's content."""

from __future__ import annotations

import pytest

from chunking.extract import NoMatchError, SelectorError, compile_selector, extract_page

# A theme whose sidebar no landmark marks: without a selector it reads as content.
PAGE = (
    b"<html><head><title>Guide</title></head><body>"
    b"<div class='col-a'><p>Quick search and the table of contents of the whole site.</p></div>"
    b"<div class='col-b'><div class='body'><p>Install the package with pip and configure the server.</p>"
    b"<p>Then run the first pass against the sitemap.</p></div></div>"
    b"<div class='col-c'><p>Previous topic and next topic links.</p></div></body></html>"
)


def test_without_a_selector_the_unmarked_sidebar_is_content():
    assert "Quick search" in extract_page(PAGE).markdown


def test_a_selector_keeps_only_what_it_matches():
    md = extract_page(PAGE, select="div.col-b div.body").markdown
    assert "Install the package" in md and "first pass" in md
    assert "Quick search" not in md and "next topic" not in md


def test_several_matches_are_kept_in_document_order():
    md = extract_page(PAGE, select=".col-c, .col-a").markdown
    assert md.index("Quick search") < md.index("next topic") and "Install" not in md


def test_a_selector_that_matches_nothing_raises():
    with pytest.raises(NoMatchError, match=r"--select 'main\.content' matched no element"):
        extract_page(PAGE, select="main.content")


def test_markdown_bodies_have_no_elements_to_select():
    assert extract_page(b"# Title\n\ntext", "text/markdown", select="div.body").markdown == "# Title\n\ntext"


@pytest.mark.parametrize("css", ["div[", "..x", "a >> b", ""])
def test_a_selector_that_is_no_css_is_refused(css):
    with pytest.raises(SelectorError, match="is not a CSS selector"):
        compile_selector(css)
