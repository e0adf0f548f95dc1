"""Chunks that fit the model and know where they are: token sizing, heading paths, no
heading-only chunks, <details>/<summary> as text (on real Sphinx, MkDocs Material and
Docusaurus output)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunking import extract_page
from chunking.split import Chunk, Splitter, embedded_text, heading_path
from embedders.sentence import bundled_model_path
from embedders.tokens import UNKNOWN_REMOTE_INPUT, FunctionCounter, folder_counter
from sync.errors import ConfigError
from sync.stages.chunks import chunk_sizes

FIXTURES = Path(__file__).parent / "fixtures"
_HEADING = re.compile(r"#{1,6}( |$)")


@pytest.fixture(scope="module")
def counter():
    """The bundled model's own tokenizer (tokenizer.json only: no model is loaded)."""
    return folder_counter(bundled_model_path())


def _heading_only(text: str) -> bool:
    return all(_HEADING.match(ln) for ln in text.split("\n") if ln.strip())


def test_the_bundled_counter_is_the_models_tokenizer(counter):
    assert counter.limit == 256
    assert counter.count("") == 2  # [CLS] and [SEP]
    assert counter.count("hello world") == 4


@pytest.mark.parametrize(
    "name, path",
    [
        ("sphinx-options.html", ("Options", "Choice Options")),
        ("mkdocs-material-options.html", ("Options", "Choice options")),
        ("docusaurus-options.html", ("Options | My Site", "Choice options")),
    ],
)
def test_real_generator_output_summary_is_text_and_chunks_have_paths(name, path, counter):
    ex = extract_page((FIXTURES / name).read_bytes())
    assert not re.search(r"(?m)^#+ .*(Changelog|Changed in)", ex.markdown)  # a <summary> is no heading
    chunks = Splitter(256, 25, counter=counter).chunks(ex.markdown, ex.title)
    assert chunks
    assert not [c for c in chunks if _heading_only(c.text)]
    assert all(c.tokens is not None and c.tokens <= 256 for c in chunks)
    (choice,) = [c for c in chunks if "fixed set" in c.text]
    assert choice.headings[: len(path)] == path
    assert "Choice" in choice.text and "hash_type" in choice.text  # the code stays with its section
    assert choice.embedded.startswith(" \u203a ".join(choice.headings) + "\n\n")
    multi = [c for c in chunks if "Multi" in c.text]
    assert multi and all("tuple" in c.text for c in multi)  # an empty section goes with the next


def test_docusaurus_page_is_its_article_only(counter):
    """The navbar, sidebar, table of contents, pagination and footer are no text; the
    anchor links' zero-width spaces are in no heading; an admonition and every tab keep
    their text; no chunk is a heading alone, at any chunk size the headings fit in."""
    ex = extract_page((FIXTURES / "docusaurus-options.html").read_bytes())
    for chrome in ("Tutorial Intro", "On this page", "Edit this page", "Previous", "Copyright", "Skip to main"):
        assert chrome not in ex.markdown, chrome
    assert "\u200b" not in ex.markdown
    assert "## Choice options\n\n### Restricting to a fixed set\n" in ex.markdown
    assert "Changelog\n" in ex.markdown and "Changed in version 8.0" in ex.markdown
    assert "Use `nargs=2` for a pair." in ex.markdown
    assert "pip install widget" in ex.markdown and "uv add widget" in ex.markdown
    for size in (32, 64, 128, 256):
        chunks = Splitter(size, 0, counter=counter, max_tokens=max(size, 64)).chunks(ex.markdown, ex.title)
        assert not [c.text for c in chunks if _heading_only(c.text)], size
        assert all(c.tokens is not None and c.tokens <= max(size, 64) for c in chunks)


def test_embedded_text_is_the_path_then_the_chunk():
    assert embedded_text("Body.", ("Options", "Boolean Flags")) == "Options \u203a Boolean Flags\n\nBody."
    assert embedded_text("Body.", ()) == "Body."
    assert Chunk("Body.", ("T",)).embedded == "T\n\nBody."


@pytest.mark.parametrize(
    "title, meta, want",
    [
        ("Options", {"h1": "Options", "h2": "Boolean Flags"}, ("Options", "Boolean Flags")),
        ("Options — Click Documentation", {"h1": "Options"}, ("Options — Click Documentation",)),
        ("Guide", {"h1": "Install", "h2": "Linux", "h3": "Debian"}, ("Guide", "Install", "Linux", "Debian")),
        ("", {"h1": "Install", "h2": "Linux"}, ("Install", "Linux")),
        ("T", {}, ("T",)),
    ],
)
def test_heading_path(title, meta, want):
    assert heading_path(title, meta) == want


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=14)
_para = st.lists(_word, min_size=1, max_size=120).map(" ".join)
_code = st.lists(_para.map(lambda p: "    " + p[:60]), min_size=1, max_size=30).map(
    lambda xs: "```python\n" + "\n".join(xs) + "\n```"
)


@st.composite
def _docs(draw):
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        parts.append("#" * draw(st.integers(1, 4)) + " " + draw(_para.map(lambda p: p[:24])))
        parts.extend(draw(st.lists(st.one_of(_para, _code), min_size=0, max_size=3)))
    return "\n\n".join(parts)


@settings(max_examples=30, deadline=None)
@given(md=_docs(), limit=st.sampled_from([32, 64, 128, 256]), title=st.text(max_size=40), data=st.data())
def test_no_embedded_text_is_longer_than_the_model_reads(counter, md, limit, title, data):
    size = data.draw(st.integers(8, limit))
    overlap = data.draw(st.integers(0, size // 3))
    chunks = Splitter(size, overlap, counter=counter, max_tokens=limit).chunks(md, title)
    assert chunks
    for c in chunks:
        assert counter.count(c.embedded) == c.tokens <= limit, (c.tokens, limit, c.embedded[:80])
    # A heading goes with its text whenever the two can fit (a heading line of 24 characters
    # is at most ~20 word pieces; headings longer than the chunk size are cut like any line).
    if size >= 160 and not all(_heading_only(s) for s in Splitter().sections(md)):
        assert not [c for c in chunks if _heading_only(c.text)]


def test_settings_name_the_tokenizer_and_the_bound(counter):
    s = Splitter(256, 25, counter=counter).settings
    assert f"tokens-{counter.id}-max256" in s and "path-v1" in s
    assert Splitter(200, 20, counter=counter).settings != s


@pytest.mark.parametrize(
    "limit, given, want",
    [
        (256, {}, (256, 25, 256)),
        (512, {"chunk_tokens": 200}, (200, 20, 512)),
        (8191, {}, (1024, 102, 8191)),
        (None, {}, (1024, 102, None)),
        (None, {"max_chunk_tokens": 500}, (500, 50, 500)),
        (8191, {"max_chunk_tokens": 2000, "chunk_overlap": 0}, (1024, 0, 2000)),
        (None, {"assumed_limit": 512}, (512, 51, 512)),  # a remote model of unknown input
        (None, {"assumed_limit": 512, "max_chunk_tokens": 8000}, (1024, 102, 8000)),  # the flag raises it
        (8191, {"assumed_limit": 512}, (1024, 102, 8191)),  # a known limit wins
    ],
)
def test_chunk_sizes(limit, given, want):
    s = chunk_sizes(limit, **given)
    assert (s.chunk_tokens, s.chunk_overlap, s.max_tokens) == want


def test_an_assumed_input_names_the_flag():
    with pytest.raises(
        ConfigError,
        match="more than the model reads \\(512 tokens, assumed of a model whose input "
        "is not known: give --max-chunk-tokens N\\)",
    ):
        chunk_sizes(None, chunk_tokens=600, assumed_limit=512)


@pytest.mark.parametrize("model, bound", [("text-embedding-3-small", 8191), ("my-bge-small", UNKNOWN_REMOTE_INPUT)])
def test_openai_chunks_are_bounded_in_bytes(model, bound):
    """No tokenizer of a remote model is at hand: chunks are counted in UTF-8 bytes + 4,
    never fewer than any common tokenizer makes, up to the known model's input or, for
    another model, `UNKNOWN_REMOTE_INPUT`; no embedded text is longer."""
    from embedders.openai_api import OpenAIEmbedder
    from sync.stages.chunks import splitter_for

    emb = OpenAIEmbedder(model, base_url="http://127.0.0.1:9/v1", api_key="k", dimensions=8)
    sp = splitter_for(emb)
    assert sp.max_tokens == bound and sp.counter is not None and sp.counter.id == "utf8-bytes+4"
    md = "# Guide\n\n" + "\n\n".join(f"## Part {i}\n\n" + "caf\u00e9 r\u00e9sum\u00e9 tokens " * 90 for i in range(4))
    chunks = sp.chunks(md, "Guide")
    assert len(chunks) > 4
    assert all(len(c.embedded.encode()) + 4 == c.tokens <= bound for c in chunks)
    assert sp.settings != splitter_for(emb, max_chunk_tokens=256).settings


@pytest.mark.parametrize(
    "limit, given",
    [
        (256, {"chunk_tokens": 300}),
        (256, {"max_chunk_tokens": 512}),
        (256, {"chunk_tokens": 100, "chunk_overlap": 100}),
        (None, {"chunk_tokens": 4}),
    ],
)
def test_chunk_sizes_that_cannot_hold_are_config_errors(limit, given):
    with pytest.raises(ConfigError):
        chunk_sizes(limit, **given)


def test_a_counter_without_a_tokenizer_bounds_by_bytes():
    c = FunctionCounter("utf8-bytes+4", 64)
    chunks = Splitter(60, 0, counter=c).chunks("## A\n\n" + "word " * 200, "T")
    assert chunks and all(c.count(ch.embedded) <= 64 for ch in chunks)
