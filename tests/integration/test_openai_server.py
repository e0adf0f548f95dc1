"""`--embedder openai:MODEL` against a real OpenAI-compatible server: infinity-emb on 127.0.0.1.

The server serves the bundled all-MiniLM-L6-v2 from disk, so a pass through it must give
what a pass with the bundled model gives. A recording proxy in front of it (`embed_proxy`)
shows what pagesync sent and injects faults. pagesync runs as the user runs it, `python -m
sync` in a subprocess, with OPENAI_BASE_URL and OPENAI_API_KEY in its environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chunking.split import embedded_text
from embedders.openai_api import PROBE_TEXT
from sync.edges.edge_store import EdgeStore
from tests.helpers import page_html, para

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODEL = "all-MiniLM-L6-v2"


def pagesync(work: Path, *args: str, env: dict[str, str]):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("QDRANT_", "OPENAI_"))}
    full_env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "sync", *args], cwd=work, env=full_env, capture_output=True, text=True, timeout=300
    )


def run(site, work: Path, *extra: str, env: dict[str, str]) -> dict:
    """One `pagesync run` of `site` into `work`; the report (and the exit code as `exit`)."""
    work.mkdir(exist_ok=True)
    r = pagesync(
        work,
        "run",
        "--sitemap",
        site.server.url("/sitemap.xml"),
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        "--report",
        "report.json",
        "--quiet",
        *extra,
        env=env,
    )
    assert r.returncode in (0, 1), r.stderr
    return {**json.loads((work / "report.json").read_text()), "exit": r.returncode, "stderr": r.stderr}


def through(server_or_proxy, key: str, cache: Path) -> dict[str, str]:
    """The environment of a pass embedding at this server with this key. Its own cache
    directory: the first pass asks the model's vector size (a one-text probe), the next
    ones read it from there."""
    return {
        "OPENAI_BASE_URL": server_or_proxy.url("/v1") if hasattr(server_or_proxy, "url") else server_or_proxy.base_url,
        "OPENAI_API_KEY": key,
        "PAGESYNC_CACHE_DIR": str(cache),
    }


def sent(proxy) -> list[str]:
    """The texts pagesync sent to be embedded (the vector-size probe left out)."""
    return [t for t in proxy.texts_sent() if t != PROBE_TEXT]


def tokens(proxy) -> int:
    return sum(e.tokens for e in proxy.served() if e.inputs != [PROBE_TEXT])


def not_the_probe(inputs: list[str]) -> bool:
    return PROBE_TEXT not in inputs


def points(work: Path) -> dict[str, tuple[dict, list[float]]]:
    store = EdgeStore(work / "q", "pages")
    try:
        return {p.payload["chunk_id"]: (p.payload, p.vector) for p in store.scroll(with_vectors=True)}
    finally:
        store.close()


def build(site, pages: int = 3, sections: int = 3) -> None:
    for i in range(pages):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}", 90) for j in range(sections)]))


def test_a_pass_through_the_server_equals_a_pass_with_the_bundled_model(site, tmp_path, infinity, embed_proxy):
    build(site)
    # The served model's input is not known to pagesync (it would assume 512 UTF-8 bytes and cut
    # finer): the bound is lifted so both passes embed the same texts.
    remote = run(
        site,
        tmp_path / "remote",
        "--embedder",
        f"openai:{MODEL}",
        "--max-chunk-tokens",
        "100000",
        env=through(embed_proxy, infinity.api_key, tmp_path / "cache"),
    )
    local = run(site, tmp_path / "local", env={})
    assert remote["exit"] == local["exit"] == 0
    assert remote["pages_failed"] == 0 and remote["chunks_embedded"] == local["chunks_embedded"] > 3
    # the tokens the report gives are the ones the server counted
    assert remote["tokens_embedded"] == tokens(embed_proxy) > 0
    got, want = points(tmp_path / "remote"), points(tmp_path / "local")
    assert got.keys() == want.keys()
    for cid, (payload, vector) in got.items():
        w_payload, w_vector = want[cid]
        assert payload["text"] == w_payload["text"] and payload["content_hash"] == w_payload["content_hash"]
        assert max(abs(a - b) for a, b in zip(vector, w_vector, strict=True)) < 1e-5, cid


def test_an_unchanged_site_sends_nothing_and_a_one_line_edit_sends_only_the_new_texts(
    site, tmp_path, infinity, embed_proxy
):
    build(site)
    env = through(embed_proxy, infinity.api_key, tmp_path / "cache")
    work = tmp_path / "w"
    first = run(site, work, "--embedder", f"openai:{MODEL}", env=env)
    assert first["exit"] == 0 and sent(embed_proxy)
    before = {embedded_text(p["text"], p.get("headings", ())) for p, _ in points(work).values()}

    embed_proxy.clear()
    again = run(site, work, "--embedder", f"openai:{MODEL}", "--full", env=env)
    assert again["exit"] == 0 and again["pages_fetched"] == 3
    assert embed_proxy.exchanges == [] and again["tokens_embedded"] == 0

    edited = [para(f"p1-s{j}", 90) for j in range(3)]
    edited[1] = edited[1].replace("alpha", "omega", 1) if "alpha" in edited[1] else edited[1] + " One more line."
    site.set("/p1.html", page_html("Page 1", edited))
    embed_proxy.clear()
    edit = run(site, work, "--embedder", f"openai:{MODEL}", "--full", env=env)
    assert edit["exit"] == 0 and edit["pages_changed"] == 1
    new_texts = {embedded_text(p["text"], p.get("headings", ())) for p, _ in points(work).values()} - before
    assert new_texts and sorted(embed_proxy.texts_sent()) == sorted(new_texts)
    assert edit["tokens_embedded"] == embed_proxy.tokens() > 0


def test_429s_with_retry_after_cost_no_page(site, tmp_path, infinity, embed_proxy):
    build(site)
    embed_proxy.fail_next(2, 429, {"Retry-After": "1"}, match=not_the_probe)
    rep = run(
        site,
        tmp_path / "w",
        "--embedder",
        f"openai:{MODEL}",
        env=through(embed_proxy, infinity.api_key, tmp_path / "cache"),
    )
    assert rep["exit"] == 0 and rep["pages_failed"] == 0 and rep["errors"] == []
    stored = points(tmp_path / "w")
    assert {p["url"] for p, _ in stored.values()} == {site.server.url(f"/p{i}.html") for i in range(3)}
    statuses = [e.status for e in embed_proxy.exchanges]
    assert statuses.count(429) == 2 and statuses[-1] == 200
    # every text that met a 429 was sent again, after the server's Retry-After
    refused = [e for e in embed_proxy.exchanges if e.status == 429]
    for e in refused:
        retry = next(x for x in embed_proxy.served() if x.started > e.ended and set(x.inputs) & set(e.inputs))
        assert retry.started - e.ended >= 1.0
    assert sorted(sent(embed_proxy)) == sorted(
        {embedded_text(p["text"], p.get("headings", ())) for p, _ in stored.values()}
    )


def test_a_wrong_key_is_exit_2_before_any_page_is_fetched(site, tmp_path, infinity):
    build(site)
    work = tmp_path / "w"
    work.mkdir()
    wrong = "sk-wrong-" + "x" * 12
    r = pagesync(
        work,
        "run",
        "--sitemap",
        site.server.url("/sitemap.xml"),
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        "--embedder",
        f"openai:{MODEL}",
        env=through(infinity, wrong, tmp_path / "cache"),
    )
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("pagesync: error:") and "Traceback" not in r.stderr
    assert wrong not in r.stderr and wrong not in r.stdout
    pages_asked = [path for _, path, _status, _headers in site.requests if path.startswith("/p")]
    assert pages_asked == []
    assert not (work / "q").exists() or not points(work)
