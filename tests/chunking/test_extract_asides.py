"""<aside> in the main content is content (admonitions, footnotes); outside it, a sidebar."""

from __future__ import annotations

import pytest

from chunking.extract import extract_page

NOTE = "Timeouts apply per attempt, not in total."
SIDEBAR = "Site sidebar text that should go away from the page."
TOC = "Section A heading"


def page(inner: str, outside: str = "") -> bytes:
    return (
        f"<html><head><title>Retries</title></head><body><nav><a href='/'>Home</a></nav>{outside}"
        "<CONTAINER><h1>Retries</h1><p>Requests are retried three times with backoff between attempts, "
        f"which is the default.</p>{inner}<p>More text about retries goes here and explains it.</p>"
        "</CONTAINER><footer>footer</footer></body></html>"
    )


@pytest.mark.parametrize("container", ["main", "article", "div role='main'"])
@pytest.mark.parametrize(
    "aside, kept",
    [
        # Starlight's admonition
        (
            f"<aside aria-label='Note' class='starlight-aside starlight-aside--note'><p>Note</p><p>{NOTE}</p></aside>",
            True,
        ),
        # docutils >= 0.18 footnote
        (f"<aside class='footnote brackets' id='f1'><span class='label'>1</span><p>{NOTE}</p></aside>", True),
        # a table of contents: all links
        (
            f"<aside class='toc'><ul><li><a href='#a'>{TOC}</a></li><li><a href='#b'>Section B heading</a></li></ul></aside>",
            False,
        ),
    ],
)
def test_asides_in_the_main_content(container, aside, kept):
    tag = container.split()[0]
    html = page(aside).replace("<CONTAINER>", f"<{container}>").replace("</CONTAINER>", f"</{tag}>")
    md = extract_page(html.encode()).markdown
    text = NOTE if kept else TOC
    assert (text in md) is kept, md
    assert "Requests are retried" in md and "More text about retries" in md


def test_an_aside_outside_the_main_content_is_a_sidebar():
    html = page(f"<aside><p>{NOTE}</p></aside>", outside=f"<aside class='sidebar'><p>{SIDEBAR}</p></aside>")
    md = extract_page(html.replace("CONTAINER", "main").encode()).markdown
    assert NOTE in md and SIDEBAR not in md, md


def test_the_content_hash_ignores_a_sidebar_aside_edit():
    from sync.core.hashing import content_hash

    a = page("", outside=f"<aside><p>{SIDEBAR}</p></aside>").replace("CONTAINER", "main")
    b = page("", outside="<aside><p>Another sidebar, edited by a deploy.</p></aside>").replace("CONTAINER", "main")
    assert content_hash(extract_page(a.encode()).markdown) == content_hash(extract_page(b.encode()).markdown)
