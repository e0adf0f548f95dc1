"""Fixtures of the end-to-end tests against real servers on 127.0.0.1.

`infinity`: infinity-emb, an OpenAI-compatible embeddings server nobody here wrote,
serving the bundled model from disk (started once for the whole test run, stopped at the end; the
tests that take it skip with the reason when its venv is missing: `make infinity`).
`embed_proxy`: a recording, fault-injecting proxy in front of it, new for each test.
"""

from __future__ import annotations

import secrets

import pytest

from demo.embed_proxy import EmbedProxy
from demo.infinity_server import InfinityServer, unavailable


@pytest.fixture(scope="session")
def infinity():
    """A running `InfinityServer` (`.base_url`, `.api_key`, `.model`), or skip saying why not."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    try:
        server = InfinityServer(api_key="sk-test-" + secrets.token_hex(8))
        server.__enter__()
    except RuntimeError as e:
        pytest.skip(f"infinity-emb did not start: {e}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def embed_proxy(infinity):
    """An `EmbedProxy` in front of `infinity`: OPENAI_BASE_URL = `embed_proxy.url("/v1")`."""
    with EmbedProxy(infinity.root_url) as proxy:
        yield proxy
