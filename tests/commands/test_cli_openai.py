"""`pagesync run --embedder openai:MODEL` in a subprocess against a fake OpenAI-compatible
server on 127.0.0.1: a wrong key or a server that does not answer is exit 2 before any
page is fetched, the key is never printed, the spending guard is exit 1 with one line."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import DEAD, cli, cli_build, one_error_line, sitemap
from tests.embedders.fake_openai import KEY, FakeOpenAI, serve


@pytest.fixture
def openai_server():
    fake = FakeOpenAI(dimension=8)
    server, url = serve(fake)
    try:
        yield fake, url
    finally:
        server.shutdown()
        server.server_close()


def run_openai(site, work, url, key, *extra):
    env = {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": key, "PAGESYNC_CACHE_DIR": str(work / "cache")}
    return cli(
        work,
        "run",
        "--sitemap",
        sitemap(site),
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        "--embedder",
        "openai:m",
        *extra,
        env=env,
    )


def test_a_wrong_key_is_exit_2_before_any_page_is_fetched_and_never_printed(site, tmp_path, openai_server):
    fake, url = openai_server
    cli_build(site)
    wrong = "sk-wrong-abcdefXYZ123"
    r = run_openai(site, tmp_path, url, wrong)
    assert r.returncode == 2, r.stderr
    line = one_error_line(r)
    assert "refused the API key" in line and "OPENAI_API_KEY" in line
    for secret in (wrong, "XYZ123", KEY):
        assert secret not in r.stderr and secret not in r.stdout
    assert site.requests == []
    assert fake.embedding_requests == []
    assert not (tmp_path / "q").exists() and not (tmp_path / "s.db").exists()


def test_a_server_that_does_not_answer_is_exit_2_before_any_page_is_fetched(site, tmp_path):
    cli_build(site)
    r = run_openai(site, tmp_path, DEAD + "/v1", KEY)
    assert r.returncode == 2, r.stderr
    assert "does not answer" in one_error_line(r)
    assert site.requests == []


def test_a_pass_through_the_server_reports_its_tokens_and_search_uses_the_same_model(site, tmp_path, openai_server):
    fake, url = openai_server
    cli_build(site)
    r = run_openai(site, tmp_path, url, KEY, "--report", "r.json", "--embed-concurrency", "2")
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["embedder"] == "openai:m" and rep["pages_added"] == 3
    assert rep["tokens_embedded"] > 0 and rep["tokens_embedded"] == sum(
        len(t.split()) for b in fake.batches[1:] for t in b
    )  # the first request was the size probe
    assert "tokens" in r.stderr.splitlines()[-1]  # the summary says what was billed
    assert KEY not in r.stderr + r.stdout
    env = {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": KEY, "PAGESYNC_CACHE_DIR": str(tmp_path / "cache")}
    s = cli(tmp_path, "search", "Page 1", "--qdrant-path", "q", "--json", env=env)  # the points name openai:m
    assert s.returncode == 0, s.stderr
    assert json.loads(s.stdout)[0]["payload"]["embedder"] == "openai:m"


def test_the_spending_guard_is_exit_1_with_one_line_and_nothing_sent(site, tmp_path, openai_server):
    fake, url = openai_server
    cli_build(site)
    r = run_openai(site, tmp_path, url, KEY, "--max-embed-tokens", "0", "--embed-dimensions", "8")
    assert r.returncode == 1, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "token budget reached" in ln]
    assert len(lines) == 1 and "--max-embed-tokens 0" in lines[0]
    assert fake.embedding_requests == []


def test_remote_options_with_a_local_embedder_are_exit_2(site, tmp_path):
    cli_build(site)
    r = cli(
        tmp_path,
        "run",
        "--sitemap",
        sitemap(site),
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        "--embedder",
        "fake",
        "--embed-dimensions",
        "8",
    )
    assert r.returncode == 2
    assert "--embed-dimensions is for a remote embedder" in one_error_line(r)
    assert site.requests == []
