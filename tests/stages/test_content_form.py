"""End to end: what the content hash sees is what the chunks hold, a stale page is read again
under the new pipeline, junk outside the main content never counts, and one huge page does
not flood the collection."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path

from demo.site_server import render_page
from tests.cli_helpers import cli_run
from tests.helpers import EMB16, Harness, page_html, para, reindex


def _texts(harness) -> dict[str, list[str]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for p in harness.points().values():
        out.setdefault(p["url"], []).append((p["chunk_index"], p["text"]))
    return {u: [t for _, t in sorted(v)] for u, v in out.items()}


def _fresh_texts(site, tmp_path: Path) -> dict[str, list[str]]:
    """The chunk texts a first pass into an empty collection and state writes now."""
    fresh = Harness(site, tmp_path / "fresh")
    fresh.run()
    return _texts(fresh)


def _code_page(indent: str, prose: str = "Call it once the work is done:") -> str:
    body = (
        f"<h2>Cleanup</h2><p>{prose}</p>"
        f"<pre><code>def finish(x):\n    if x.done:\n{indent}cleanup(x)\n    return x\n</code></pre>"
        f"<p>{para('after-code', 30)}</p>"
    )
    return render_page("Cleanup", body)


def test_indentation_inside_code_is_a_change_and_is_written(site, harness, tmp_path):
    site.set("/code.html", _code_page("    "), mtime=1.7e9)
    harness.run()
    site.set("/code.html", _code_page("        "), mtime=1.7e9 + 3600)  # into the `if`; lastmod advanced
    rep = harness.run(advance=timedelta(hours=1))
    assert rep.changes and rep.changes[0]["reason"] == "content changed"
    assert rep.pages_changed == 1 and rep.pages_unchanged == 0
    (texts,) = _texts(harness).values()
    assert "    if x.done:\n        cleanup(x)\n    return x" in "\n".join(texts)
    assert _texts(harness) == _fresh_texts(site, tmp_path)


def test_a_prose_rewrap_leaves_chunks_equal_to_a_fresh_index(site, harness, tmp_path):
    # Inline markup as docs have it (a literal, an emphasis): trafilatura keeps the line breaks
    # of the text after such an element, so the source's wrapping reached the markdown.
    words = para("wrapped", 80).split()
    words[1] = f"<code>{words[1]}</code>"
    wrap = lambda n: "\n".join(" ".join(words[i : i + n]) for i in range(0, len(words), n))  # noqa: E731
    site.set("/prose.html", render_page("Prose", f"<h2>Words</h2><p>{wrap(7)}</p><p>{para('second')}</p>"))
    harness.run()
    site.set("/prose.html", render_page("Prose", f"<h2>Words</h2><p>{wrap(12)}</p><p>{para('second')}</p>"))
    rep = harness.run(full=True, advance=timedelta(hours=1))
    assert rep.pages_unchanged == 1 and rep.chunks_written == 0  # same text: nothing to write
    assert _texts(harness) == _fresh_texts(site, tmp_path)
    plain = " ".join(words[2:20])
    assert plain in "\n".join(_texts(harness)[site.server.url("/prose.html")])  # one line


def _embed_page(stamp: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Launch video | Acme</title></head><body>"
        f"<header class='site'><a href='/'>Acme</a><p>Built {stamp} from commit 4f2a9c1</p></header>"
        "<article><h1>Launch video</h1><iframe src='https://player.example.com/embed/1'></iframe>"
        "<script>window.player = {id: 1};</script></article><footer>&copy; Acme</footer></body></html>"
    )


def test_a_deploy_changing_only_the_page_header_is_unchanged(site, harness):
    site.set("/video.html", _embed_page("2026-01-01 10:00"))
    harness.run()
    (texts,) = _texts(harness).values()
    assert texts == ["# Launch video"]
    site.set("/video.html", _embed_page("2026-01-02 18:30"))  # a new deploy: new ETag, new stamp
    rep = harness.run(full=True, advance=timedelta(hours=1))
    assert rep.pages_unchanged == 1 and rep.pages_changed == 0 and rep.chunks_written == 0


def test_a_page_indexed_under_the_old_pipeline_is_read_and_hashed_again(site, harness, tmp_path, monkeypatch):
    """Pages indexed before the normal form (whitespace folded everywhere, code included)
    hold a hash that cannot see indentation, and a 304 would keep them so: the pipeline
    fingerprint moved, so their next visit is an unconditional GET and the page is
    rewritten from the new hash, unchanged texts keeping their vectors; the visit is no
    evidence of a change for the revisit policy."""
    import re

    import sync.engine as engine
    import sync.stages.visit as visit
    from sync.core.history import history_from_json
    from sync.edges.state import StateDB

    site.set("/code.html", _code_page("    "))
    site.set("/other.html", page_html("Other", [para("o1"), para("o2")]))
    old_hash = lambda md: hashlib.sha256(re.sub(r"\s+", " ", md).strip().encode()).hexdigest()  # noqa: E731
    with monkeypatch.context() as old:
        old.setattr(engine, "EXTRACTOR_ID", "trafilatura-md-v5")
        old.setattr(visit, "content_hash", old_hash)
        harness.run()
    site.set("/code.html", _code_page("        "))  # an edit the old hash cannot see
    site.clear_log()
    rep = harness.run(full=True, advance=timedelta(days=1))
    asked = [h for _, p, s, h in site.requests if p in ("/code.html", "/other.html")]
    assert len(asked) == 2 and not any("if-none-match" in h for h in asked)  # unconditional
    assert {c["reason"] for c in rep.changes} == {"pipeline changed"} and rep.pages_changed == 2
    assert rep.chunks_reused > 0  # the texts that did not change kept their vectors
    assert _texts(harness) == _fresh_texts(site, tmp_path)
    with StateDB(harness.state_path) as st:
        for page in st.all_pages():
            assert not any(v.changed for v in history_from_json(page.history))
    rep = harness.run(full=True, advance=timedelta(days=1))  # conditional again, nothing to do
    assert rep.pages_not_modified == 2 and rep.chunks_written == 0


def test_reindex_reads_again_a_page_the_old_hash_kept_stale(site, harness, monkeypatch):
    """A code edit the old hash could not see left the stored chunk and the kept text stale;
    `reindex` takes a kept text only when it has the page's hash under the current rule, so
    it fetches that page again and indexes the new code."""
    import re

    import sync.engine as engine
    import sync.stages.visit as visit

    site.set("/code.html", _code_page("    "))
    old_hash = lambda md: hashlib.sha256(re.sub(r"\s+", " ", md).strip().encode()).hexdigest()  # noqa: E731
    with monkeypatch.context() as old:
        old.setattr(engine, "EXTRACTOR_ID", "trafilatura-md-v5")
        old.setattr(visit, "content_hash", old_hash)
        harness.run()
        site.set("/code.html", _code_page("        "))
        assert harness.run(full=True, advance=timedelta(hours=1)).pages_unchanged == 1  # the old rule: blind
    rep = reindex(harness, EMB16)
    assert rep.text_sources["fetch"] == 1 and rep.pages_changed == 1
    (texts,) = _texts(harness).values()
    assert "    if x.done:\n        cleanup(x)" in "\n".join(texts)


# -- the per-page chunk cap ---------------------------------------------------------------------


def _long_page(sections: int) -> str:
    return page_html("Long", [para(f"long-{i}") for i in range(sections)])


def test_a_page_over_the_chunk_cap_is_skipped_and_keeps_its_points(site, harness):
    site.set("/long.html", _long_page(1))
    site.set("/small.html", page_html("Small", [para("small")]))
    harness.run(max_chunks_per_page=5)
    before = _texts(harness)
    n = len(before[site.server.url("/long.html")])
    assert n <= 5
    site.set("/long.html", _long_page(40))  # now far over the cap
    site.set("/small.html", page_html("Small", [para("small, edited")]))
    rep = harness.run(full=True, advance=timedelta(hours=1), max_chunks_per_page=5)
    url = site.server.url("/long.html")
    (skip,) = [s for s in rep.skipped if s["url"] == url]
    assert "over the cap of 5 per page" in skip["reason"] and "--max-chunks-per-page" in skip["reason"]
    assert rep.pages_skipped == 1 and rep.pages_changed == 1 and rep.pages_failed == 0
    after = _texts(harness)
    assert after[url] == before[url]  # old points kept as they were
    # Under a cap it fits, the page is indexed on its next visit.
    rep = harness.run(full=True, advance=timedelta(hours=1), max_chunks_per_page=2000)
    assert rep.pages_changed == 1 and len(_texts(harness)[url]) > 5


def test_a_new_page_over_the_chunk_cap_gets_no_points(site, harness):
    site.set("/long.html", _long_page(40))
    site.set("/small.html", page_html("Small", [para("small")]))
    rep = harness.run(max_chunks_per_page=5)
    assert rep.pages_added == 1 and rep.pages_skipped == 1
    assert set(_texts(harness)) == {site.server.url("/small.html")}


def test_the_default_cap_is_2000_chunks():
    from sync.engine import PassConfig

    assert PassConfig(sitemaps=["https://example.com/sitemap.xml"]).max_chunks_per_page == 2000


def test_cli_max_chunks_per_page(site, tmp_path):
    site.set("/long.html", _long_page(40))
    site.set("/small.html", page_html("Small", [para("small")]))
    r = cli_run(site, tmp_path, "--max-chunks-per-page", "5", "--now", "2026-01-01T00:00:00Z", report="R.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "R.json").read_text())
    assert rep["pages_skipped"] == 1 and rep["pages_added"] == 1
    assert "over the cap of 5 per page" in rep["skipped"][0]["reason"]
    assert "over the cap of 5 per page" in r.stderr  # said without -v
    r = cli_run(site, tmp_path, "--max-chunks-per-page", "0")
    assert r.returncode == 2
