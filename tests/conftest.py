"""Shared fixtures: a docs site on 127.0.0.1, a harness running passes against it, a working
directory for the command-line tests, and a real Qdrant server for the server-mode tests (or a
skip saying how to get one)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from demo.site_server import Site, SiteServer
from tests.helpers import Harness

# Hypothesis, loaded before any test module builds its @settings (which inherit from the
# profile in force then). "ci", the default: the same examples on every run and machine
# (derandomize, no example database), no deadline and no too-slow health check, so a
# loaded machine changes how long the suite takes, never whether it passes.
# HYPOTHESIS_PROFILE=dev draws new examples each run (and keeps failing ones in .hypothesis/).
settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _share_the_default_ssl_context() -> None:
    """Every pass makes its own httpx client (`sync.edges.fetcher.make_client`), and each loads
    the CA bundle again (~40 ms, a tenth of a harness pass). In this process they share
    the first one; clients with their own `verify` or `cert` are left as they are."""
    import httpx._transports.default as transports

    make, made = transports.create_ssl_context, {}

    def create_ssl_context(verify=True, cert=None, trust_env=True):
        if verify is not True or cert is not None:
            return make(verify=verify, cert=cert, trust_env=trust_env)
        if trust_env not in made:
            made[trust_env] = make(verify=True, cert=None, trust_env=trust_env)
        return made[trust_env]

    transports.create_ssl_context = create_ssl_context


_share_the_default_ssl_context()

NO_SERVER = (
    "no Qdrant server: set QDRANT_URL=http://host:6333 (and QDRANT_API_KEY) or start Docker "
    "to run the server-mode tests (store contract, Qdrant state)"
)


@pytest.fixture
def site():
    s = Site()
    with SiteServer(s) as server:
        s.server = server  # type: ignore[attr-defined]
        yield s


@pytest.fixture
def work(tmp_path):
    """An empty working directory for the command-line tests (tests/cli_helpers.py runs `pagesync` in it)."""
    d = tmp_path / "work"
    d.mkdir()
    return d


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
def minilm():
    """The bundled model on torch (`MiniLMEmbedder`), loaded once for the whole session:
    the model tests share it (it keeps no state but its counters)."""
    from embedders import MiniLMEmbedder

    return MiniLMEmbedder()


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


# Fixtures that serve a docs site on 127.0.0.1: a test taking one runs passes end to end
# (HTTP, extraction, the store and the state), about a tenth of a second each.
SITE_FIXTURES = {"site", "harness", "two_sites"}


def pytest_collection_modifyitems(config, items):
    """Markers from the fixtures a test takes, for `make test-fast` to leave out: `work`
    (the command-line tests' directory) runs `pagesync` as subprocesses, half a second to start each, so
    `slow`; a site fixture makes it `integration`."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "work" in names:
            item.add_marker(pytest.mark.slow)
        if names & SITE_FIXTURES:
            item.add_marker(pytest.mark.integration)
