"""Shared fixtures: a docs site on 127.0.0.1, a harness running passes against it, and a
real Qdrant server for the server-mode tests (or a skip saying how to get one)."""

from __future__ import annotations

import os

import pytest

from demo.site_server import Site, SiteServer
from tests.helpers import Harness

NO_SERVER = ("no Qdrant server: set QDRANT_URL=http://host:6333 (and QDRANT_API_KEY) or start Docker "
             "to run the server-mode tests (store contract, Qdrant state)")


@pytest.fixture
def site():
    s = Site()
    with SiteServer(s) as server:
        s.server = server  # type: ignore[attr-defined]
        yield s


@pytest.fixture
def harness(request, site, tmp_path):
    """A Harness; parametrize indirectly with "qdrant" to run on the Qdrant state."""
    return Harness(site, tmp_path, state=getattr(request, "param", "sqlite"))


def _docker_answers() -> bool:
    try:
        import docker

        return bool(docker.from_env().ping())
    except Exception:
        return False


@pytest.fixture(scope="session")
def qdrant_server():
    """(url, api_key) of a real Qdrant server, or skip."""
    url = os.environ.get("QDRANT_URL")
    if url:
        yield url, os.environ.get("QDRANT_API_KEY") or None
        return
    if not _docker_answers():
        pytest.skip(NO_SERVER)
    try:
        try:
            from testcontainers.community.qdrant import QdrantContainer
        except ImportError:
            from testcontainers.qdrant import QdrantContainer
        container = QdrantContainer()
    except ImportError:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.waiting_utils import wait_for_logs

        container = DockerContainer("qdrant/qdrant").with_exposed_ports(6333)
        container.start()
        try:
            wait_for_logs(container, "starting in Actix runtime", timeout=60)
            yield f"http://{container.get_container_host_ip()}:{container.get_exposed_port(6333)}", None
        finally:
            container.stop()
        return
    with container:
        yield f"http://{container.rest_host_address}", None
