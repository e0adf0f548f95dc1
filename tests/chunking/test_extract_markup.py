"""Generator markup kept out of titles and chunks (Sphinx's and MkDocs' headerlinks, the
converter's markdown escapes, hard breaks), and only the marked main content read."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunking import Splitter, extract_page
from sync.core.hashing import content_hash

# As Sphinx 7 (basic/alabaster theme) writes a page: headerlinks on headings and API
# entries, inline literals as <code><span class="pre">, the rst source's line breaks kept
# inside paragraphs, a highlighted <pre>, the sidebar and footer as role/class divs.
SPHINX = """<!DOCTYPE html>
<html lang="en" data-content_root="./">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1.0" />
    <title>Options &#8212; Alpha 1.0 documentation</title>
    <link rel="stylesheet" type="text/css" href="_static/pygments.css?v=d1102ebc" />
    <script src="_static/documentation_options.js?v=f2a433a1"></script>
  </head><body>
    <div class="document">
      <div class="documentwrapper">
        <div class="bodywrapper">
          <div class="body" role="main">
  <section id="options">
<h1>Options<a class="headerlink" href="#options" title="Link to this heading">\u00b6</a></h1>
<p>Set <code class="docutils literal notranslate"><span class="pre">ALPHA_HOME</span></code> to the directory alpha
was installed in; ALPHA_HOME_DIR is read when it is unset, and *globs* are
expanded in both.</p>
<section id="running">
<h2>Running<a class="headerlink" href="#running" title="Link to this heading">\u00b6</a></h2>
<div class="highlight-python notranslate"><div class="highlight"><pre><span></span><span class="k">def</span> <span class="nf">main</span><span class="p">():</span>
    <span class="k">if</span> <span class="n">ready</span><span class="p">:</span>
        <span class="n">cleanup</span><span class="p">(</span><span class="n">x</span><span class="p">)</span>
</pre></div>
</div>
<dl class="py function">
<dt class="sig sig-object py" id="alpha.run">
<span class="sig-prename descclassname"><span class="pre">alpha.</span></span><span class="sig-name descname"><span class="pre">run</span></span><span class="sig-paren">(</span><em class="sig-param"><span class="n"><span class="pre">path</span></span></em><span class="sig-paren">)</span><a class="headerlink" href="#alpha.run" title="Link to this definition">\u00b6</a></dt>
<dd><p>Run alpha over <em>path</em>, writing run_log files next to it.</p>
</dd></dl>
</section>
</section>
          </div>
        </div>
      </div>
      <div class="sphinxsidebar" role="navigation" aria-label="Main">
        <div class="sphinxsidebarwrapper">
<h1 class="logo"><a href="index.html">Alpha</a></h1>
<h3>Navigation</h3>
<ul class="current"><li class="toctree-l1 current"><a class="current reference internal" href="#">Options</a></li></ul>
        </div>
      </div>
      <div class="clearer"></div>
    </div>
    <div class="footer">
      &#169;2026, Alpha team.
      |
      Powered by <a href="https://www.sphinx-doc.org/">Sphinx 7.2.6</a>
      | <a href="_sources/options.rst.txt" rel="nofollow">Page source</a>
    </div>
  </body>
</html>"""

# As MkDocs Material writes a page: a page-level <header>, the content in <article> inside
# <main>, headerlinks as &para;, highlighted code as <pre><code> with spans.
MKDOCS = """<!doctype html>
<html lang="en" class="no-js">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width,initial-scale=1">
    <meta name="generator" content="mkdocs-1.6.0, mkdocs-material-9.5.27">
    <title>Configuration - Beta Docs</title>
  </head>
  <body dir="ltr">
    <header class="md-header md-header--shadow" data-md-component="header">
      <nav class="md-header__inner md-grid" aria-label="Header">
        <div class="md-header__title" data-md-component="header-title">
          <span class="md-ellipsis">Beta Docs</span>
        </div>
      </nav>
    </header>
    <div class="md-container" data-md-component="container">
      <main class="md-main" data-md-component="main">
        <div class="md-main__inner md-grid">
          <div class="md-sidebar md-sidebar--primary" data-md-component="sidebar" data-md-type="navigation">
            <nav class="md-nav md-nav--primary" aria-label="Navigation"><ul class="md-nav__list">
              <li class="md-nav__item"><a href="../" class="md-nav__link">Home</a></li></ul></nav>
          </div>
          <div class="md-content" data-md-component="content">
            <article class="md-content__inner md-typeset">
<h1 id="configuration">Configuration<a class="headerlink" href="#configuration" title="Permanent link">&para;</a></h1>
<p>Beta reads <code>mkdocs.yml</code>; keys are snake_case_names and a
<em>theme</em> block is required.</p>
<h2 id="theme">Theme<a class="headerlink" href="#theme" title="Permanent link">&para;</a></h2>
<div class="language-yaml highlight"><pre><span></span><code><span class="nt">site_name</span><span class="p">:</span><span class="w"> </span><span class="l l-Scalar l-Scalar-Plain">Beta</span>
<span class="nt">theme</span><span class="p">:</span>
<span class="w">  </span><span class="nt">name</span><span class="p">:</span><span class="w"> </span><span class="l l-Scalar l-Scalar-Plain">material</span>
</code></pre></div>
            </article>
          </div>
        </div>
      </main>
      <footer class="md-footer">
        <div class="md-copyright">Made with <a href="https://squidfunk.github.io/mkdocs-material/">Material for MkDocs</a></div>
      </footer>
    </div>
  </body>
</html>"""


def _chunks(md: str) -> list[str]:
    return Splitter(chunk_size=1000, chunk_overlap=0).split(md)


@pytest.mark.parametrize(
    "html, title, prose, code, boilerplate",
    [
        (
            SPHINX,
            "Options",
            ["ALPHA_HOME_DIR is read", "*globs*", "run_log files"],
            ["def main():", "    if ready:", "        cleanup(x)"],
            ["Powered by", "Navigation", "Page source"],
        ),
        (
            MKDOCS,
            "Configuration",
            ["snake_case_names", "mkdocs.yml"],
            ["site_name: Beta", "theme:", "  name: material"],
            ["Beta Docs", "Home", "Made with"],
        ),
    ],
    ids=["sphinx", "mkdocs"],
)
def test_generator_markup_stays_out_of_titles_and_chunks(html, title, prose, code, boilerplate):
    ex = extract_page(html.encode(), "text/html; charset=utf-8")
    chunks = _chunks(ex.markdown)
    text = "\n".join(chunks)
    assert ex.title.startswith(title) and "\u00b6" not in ex.title
    assert "\u00b6" not in ex.markdown and "\u00b6" not in text
    assert "\\_" not in text and "\\*" not in text  # the converter's escapes
    assert "  \n" not in text  # no two-space hard breaks
    assert f"# {title}" in text.split("\n")  # a heading reads as its title
    for p in prose:
        assert p in text, p
    lines = text.split("\n")
    for ln in code:
        assert ln in lines, ln  # code verbatim, indentation included
    for b in boilerplate:
        assert b not in text, b


# A page whose article is a heading and an embed: trafilatura found no content in it and
# took the page-level header (with the deploy's build stamp) instead.
def _embed_page(stamp: str) -> bytes:
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Launch video | Acme</title></head>
<body><header class="site-header"><a href="/">Acme</a><p>Built {stamp} from commit 4f2a9c1</p></header>
<main><article><h1>Launch video</h1>
<iframe src="https://player.example.com/embed/123" width="640" height="360"></iframe>
<script>window.player = {{id: 123}};</script></article></main>
<footer><p>&copy; Acme</p></footer></body></html>""".encode()


def test_a_heading_and_embed_page_takes_no_header_text():
    one = extract_page(_embed_page("2026-01-01 10:00"), "text/html")
    two = extract_page(_embed_page("2026-01-02 18:30"), "text/html")
    assert one.markdown == "# Launch video"
    assert "Built" not in "".join(_chunks(one.markdown))
    assert content_hash(one.markdown) == content_hash(two.markdown)


def test_nothing_outside_the_main_content_is_content():
    html = b"""<html><body><div class="banner"><p>A banner paragraph that is long enough to look like
content to an extractor, with several words in it.</p></div>
<div role="main"><h1>Real</h1><p>The real text of the page.</p></div>
<div class="promo"><p>Another long paragraph beside the content that an extractor could take.</p></div>
</body></html>"""
    md = extract_page(html, "text/html").markdown
    assert "The real text of the page." in md
    assert "banner" not in md and "beside the content" not in md


def test_several_articles_are_all_content():
    html = b"""<html><body><header><p>Site header text</p></header>
<article><h2>First post</h2><p>Text of the first post.</p></article>
<article><h2>Second post</h2><p>Text of the second post.</p></article></body></html>"""
    md = extract_page(html, "text/html").markdown
    assert "Text of the first post." in md and "Text of the second post." in md
    assert "Site header text" not in md


def test_articles_beside_a_main_element_are_not_content():
    html = b"""<html><body><main><h1>Guide</h1><p>The guide's own text.</p></main>
<aside><article><h3>Related post</h3><p>A teaser of another page.</p></article></aside></body></html>"""
    md = extract_page(html, "text/html").markdown
    assert "The guide's own text." in md and "teaser" not in md


def test_a_body_marked_as_main_is_read_whole():
    html = b"""<html><body role="main"><h1>Whole</h1><p>All of the page is its content.</p></body></html>"""
    assert "All of the page is its content." in extract_page(html, "text/html").markdown


_FIXTURES = Path(__file__).parent / "fixtures"
_NUMBERED = 'def add(a, b):\n    """Add two numbers."""\n    return a + b'


@pytest.mark.parametrize("name", ["sphinx-lines.html", "mkdocs-material-lines.html"])
def test_line_numbers_are_not_read_into_the_code(name):
    """Real Sphinx (`:linenos:`, inline numbers) and MkDocs Material (`linenums`, a table) output."""
    md = extract_page((_FIXTURES / name).read_bytes(), "text/html").markdown
    assert f"```\n{_NUMBERED}\n```" in md  # each line as written, its indentation kept
    assert "```\nprint(add(1, 2))\n```" in md
    assert "|" not in md and "1def" not in md


@pytest.mark.parametrize(
    "code",
    [
        # Pygments' table layout, a tail after the table kept in place
        '<table class="highlighttable"><tr><td class="linenos"><div class="linenodiv"><pre>1\n2</pre></div></td>'
        '<td class="code"><div><pre><span></span>x = 1\n    y = 2\n</pre></div></td></tr></table>',
        # inline numbers, the indentation after a number kept
        '<div class="highlight"><pre><span class="linenos">1</span>x = 1\n<span class="linenos">2</span>    y = 2\n</pre></div>',
        # pymdownx-inline: the number is CSS, the span empty
        '<div class="highlight"><pre><span class="linenos" data-linenos="1 "></span>x = 1\n'
        '<span class="linenos" data-linenos="2 "></span>    y = 2\n</pre></div>',
    ],
)
def test_numbered_code_layouts(code):
    body = f"<html><body><main><p>Before.</p>{code}<p>After.</p></main></body></html>".encode()
    md = extract_page(body, "text/html").markdown
    assert "```\nx = 1\n    y = 2\n```" in md
    assert md.index("Before.") < md.index("x = 1") < md.index("After.")


def test_an_entry_heading_is_its_name():
    """Real mkdocstrings output with its symbol types shown (`show_symbol_type_heading`): an
    empty `<code>` badge before each name, labels after it; each heading reads as the name."""
    md = extract_page((_FIXTURES / "mkdocstrings-symbols.html").read_bytes(), "text/html").markdown
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings == ["# API", "## gauge.Gauge", "### full", "### width", "### show"]
    assert "property" not in md and "class-attribute" not in md
    assert "```\nshow(level: float) -> str\n```" in md


@pytest.mark.parametrize(
    "markup, text",
    [
        ('<h2><code class="doc-symbol"></code> <span>put_many</span></h2>', "## put_many"),
        ("<h2><code> </code> put_many</h2>", "## put_many"),
        ('<p>Start <code class="icon"></code> and the rest.</p>', "Start and the rest."),
        ("<ul><li><code></code> the item</li><li>second</li></ul>", "- the item\n- second"),
        # a code element with text, or with an element in it, stays
        ("<p>Call <code>run()</code> first.</p>", "Call `run()` first."),
        ('<h2><code><span class="n">name</span></code> entry</h2>', "## `name` entry"),
    ],
)
def test_an_empty_code_element_keeps_the_text_after_it(markup, text):
    body = f"<html><body><main><p>Before the part.</p>{markup}<p>After the part.</p></main></body></html>"
    md = extract_page(body.encode(), "text/html").markdown
    assert md == f"Before the part.\n\n{text}\n\nAfter the part."
