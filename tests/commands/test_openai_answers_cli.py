"""`pagesync run --embedder openai:MODEL` against a server answering NaN vectors, through the
command line as a subprocess: exit 1, the pages failed, no NaN vector in the collection."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from tests.cli_helpers import cli, cli_build, sitemap
from tests.embedders.fake_openai import KEY, FakeOpenAI, serve

pytestmark = pytest.mark.slow


def nan_vectors(n: int, inputs: list[str]) -> httpx.Response | None:
    if n == 1:
        return None  # the size probe is answered well
    data = ",".join(f'{{"index": {i}, "embedding": [{", ".join(["NaN"] * 8)}]}}' for i in range(len(inputs)))
    return httpx.Response(200, content=f'{{"data": [{data}]}}'.encode())


def test_nan_vectors_from_the_server_are_exit_1_and_never_written(site, tmp_path):
    fake = FakeOpenAI(dimension=8, script=nan_vectors)
    server, url = serve(fake)
    env = {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": KEY, "PAGESYNC_CACHE_DIR": str(tmp_path / "cache")}
    try:
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
            "openai:m",
            "--report",
            "r.json",
            env=env,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 1, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["pages_failed"] == 3 and rep["chunks_written"] == 0
    assert all("not a finite number" in e["error"] for e in rep["errors"]), rep["errors"]
    out = cli(tmp_path, "export", "--qdrant-path", "q", "--state", "s.db", "--with-vectors")
    for line in out.stdout.splitlines():
        vector = json.loads(line).get("vector")
        values = (
            vector
            if isinstance(vector, list)
            else [x for v in (vector or {}).values() if isinstance(v, list) for x in v]
        )
        assert all(isinstance(x, (int, float)) and math.isfinite(x) for x in values), line[:300]
