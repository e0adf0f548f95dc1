"""Shared fixtures: a docs site on 127.0.0.1 and a harness running passes against it."""

from __future__ import annotations

import pytest

from demo.site_server import Site, SiteServer
from tests.helpers import Harness


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
