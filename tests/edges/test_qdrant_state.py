"""QdrantState specifics: the companion collection's layout and indexes, the indexed due
query, the API key never shown, the engine refusing a held lease, and the product's
property (incremental == fresh) with the state in Qdrant."""

from __future__ import annotations

import tempfile
import traceback
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from qdrant_client import QdrantClient
from qdrant_client import models as m

from sync.errors import ConfigError, StateError, StateLockedError
from sync.edges.qdrant_state import NEEDS_SERVER, QdrantState, state_collection_name
from sync.edges.state import GONE, LIVE, PageState
from sync.edges.client_store import ClientStore, RetryingClient
from sync.edges.edge_store import EdgeStore
from tests.helpers import Harness, page_html, para
from tests.property_helpers import SiteEdits

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
KEY = "sekret-key-123"
DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port
INDEXED = {
    "kind": m.PayloadSchemaType.KEYWORD,
    "status": m.PayloadSchemaType.KEYWORD,
    "due_key": m.PayloadSchemaType.FLOAT,
    "in_sitemap": m.PayloadSchemaType.BOOL,
    "has_pending": m.PayloadSchemaType.BOOL,
    "seq": m.PayloadSchemaType.INTEGER,
}


class Recording:
    """Passes calls through to a client and records them."""

    def __init__(self, client):
        self._client, self.calls = client, []

    def __getattr__(self, name):
        attr = getattr(self._client, name)

        def call(*a, **k):
            self.calls.append((name, a, k))
            return attr(*a, **k)

        return call


def _keys(flt) -> set[str]:
    """Every payload key a filter's conditions touch (recursively)."""
    out: set[str] = set()
    for clause in (flt.must, flt.should, flt.must_not):
        for c in clause or []:
            if isinstance(c, m.Filter):
                out |= _keys(c)
            elif isinstance(c, m.FieldCondition):
                out.add(c.key)
            else:
                raise AssertionError(f"unexpected condition {c!r}")
    return out


def test_companion_collection_name_and_embedded_store_refused(tmp_path):
    assert state_collection_name("pages") == "pages__pagesync_state"
    with pytest.raises(ConfigError):
        state_collection_name("x" * 250)
    store = ClientStore(QdrantClient(location=":memory:"), "docs")
    assert QdrantState.for_store(store).collection == "docs__pagesync_state"
    with pytest.raises(ConfigError) as ei:
        QdrantState.for_store(EdgeStore(tmp_path, "docs"))
    assert str(ei.value) == NEEDS_SERVER and "--qdrant-url" in NEEDS_SERVER
    assert not (tmp_path / "docs").exists()


def test_layout_payload_only_points_and_the_indexes_the_due_query_uses():
    rec = Recording(QdrantClient(location=":memory:"))
    s = QdrantState(rec, "c__pagesync_state", settle_seconds=0, heartbeat_seconds=0)
    created = [(a, k) for name, a, k in rec.calls if name == "create_collection"]
    assert created and created[0][1]["vectors_config"] == {}  # payload only: no vectors at all
    indexes = {a[1]: a[2] for name, a, k in rec.calls if name == "create_payload_index"}
    assert indexes == INDEXED

    page = PageState(url="https://e.com/a", status=LIVE, content_hash="h", due_at=T0, pending_hash="p")
    s.put(page)
    s.add_host_trust({"e.com": (1, 0)})
    s.record_run({"started_at": "a", "finished_at": "b"})
    s.lock()
    (got,) = rec.retrieve("c__pagesync_state", ids=[str(uuid.uuid5(uuid.NAMESPACE_URL, page.url))])
    assert got.payload["kind"] == "page" and got.payload["url"] == page.url
    assert got.payload["due_key"] == T0.timestamp() and got.payload["has_pending"] is True
    recs, _ = rec.scroll("c__pagesync_state", limit=100, with_vectors=True)
    assert sorted(r.payload["kind"] for r in recs) == ["host", "lease", "page", "run"]
    assert all(not r.vector for r in recs)

    # "What is due" is filtered queries on indexed fields only, never an unfiltered scan.
    rec.calls.clear()
    assert s.due_urls(T0) == [page.url]
    scrolls = [k["scroll_filter"] for name, a, k in rec.calls if name == "scroll"]
    assert len(scrolls) == 2
    for flt in scrolls:
        assert _keys(flt) <= set(INDEXED), _keys(flt)
    assert any("due_key" in _keys(f) for f in scrolls) and any("has_pending" in _keys(f) for f in scrolls)
    s.unlock()


def test_due_with_no_due_time_and_gone_pages(tmp_path):
    s = QdrantState(QdrantClient(location=":memory:"), "c__pagesync_state", heartbeat_seconds=0)
    s.put_many(
        [
            PageState(url="https://e.com/new", due_at=None),
            PageState(
                url="https://e.com/old", status=LIVE, content_hash="h", due_at=datetime(1960, 1, 1, tzinfo=timezone.utc)
            ),
            PageState(url="https://e.com/gone", status=GONE, due_at=None),
        ]
    )
    assert s.due_urls(T0) == ["https://e.com/new", "https://e.com/old"]


@pytest.mark.server
def test_payload_indexes_on_a_server(qdrant_server):  # noqa: F811
    url, key = qdrant_server
    client = QdrantClient(url=url, api_key=key, timeout=10, check_compatibility=False)
    name = f"pagesync_test_{uuid.uuid4().hex[:12]}__pagesync_state"
    try:
        QdrantState(client, name)
        schema = client.get_collection(name).payload_schema
        assert {k: schema[k].data_type for k in INDEXED} == INDEXED
    finally:
        client.delete_collection(name)
        client.close()


# -- the API key ---------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_state_errors_never_contain_the_api_key(caplog):
    client = RetryingClient(
        QdrantClient(url=DEAD, api_key=KEY, timeout=1, check_compatibility=False), tries=2, sleep=lambda s: None
    )
    s = QdrantState(client, "c__pagesync_state", api_key=KEY, create=False, heartbeat_seconds=0, settle_seconds=0)
    page = PageState(url="https://e.com/a")
    with pytest.raises(StateError) as ei:
        s.ensure()  # creating the collection
    assert KEY not in str(ei.value) and KEY not in "".join(traceback.format_exception(ei.value))
    ops = [
        s.exists,
        lambda: s.get(page.url),
        lambda: s.get_many([page.url]),
        s.all_pages,
        s.sitemap_urls,
        lambda: s.due_urls(T0),
        s.tracked_count,
        lambda: s.put_many([page]),
        s.host_trust_counts,
        lambda: s.add_host_trust({"e.com": (1, 1)}),
        s.last_run,
        s.runs,
        lambda: s.record_run({"started_at": "a", "finished_at": "b"}),
        s.clear,
        s.lock,
        s.read_lease,
    ]
    for op in ops:
        s._ready = True  # past the collection check, so every call reaches the server
        with pytest.raises(StateError) as ei:
            op()
        exc = ei.value
        assert KEY not in str(exc) and KEY not in repr(exc)
        assert KEY not in "".join(traceback.format_exception(exc))
        assert "Qdrant state" in str(exc)
    # a held lease whose release fails logs a warning, also without the key
    s._lease.held = object()  # type: ignore[assignment]
    s.unlock()
    assert "could not release" in caplog.text and KEY not in caplog.text


# -- the engine and the lease ---------------------------------------------------------------------------
class KeepOpen(ClientStore):
    """A store over a shared `:memory:` client that outlives each pass."""

    def close(self) -> None:
        pass


def test_a_pass_refuses_while_another_holds_the_lease_and_fetches_nothing(site, tmp_path):
    for i in range(2):
        site.set(f"/p{i}.html", page_html(f"Page {i}", [para(f"p{i}")]))
    h = Harness(site, tmp_path, state="qdrant")
    store = KeepOpen(QdrantClient(location=":memory:"), "pages")
    other = QdrantState.for_store(store, holder=("laptop", 4242), settle_seconds=0, heartbeat_seconds=0)
    other.lock()
    with pytest.raises(StateLockedError, match=r"host laptop, pid 4242, started at .*, expires at "):
        h.run(store=store)
    assert site.count() == 0, "refused before anything was fetched"
    assert not store.exists()
    other.unlock()
    rep = h.run(store=store)
    assert rep.pages_added == 2
    st = QdrantState.for_store(store, heartbeat_seconds=0)
    assert len(st.all_pages()) == 2 and st.last_run()["pages_added"] == 2
    assert st.read_lease() is None  # released at the end of the pass
    assert not h.state_path.exists()  # no SQLite file anywhere


# -- the product's property, with the state in Qdrant -----------------------------------------------------
class QdrantSiteEdits(SiteEdits):
    """The property's machine (tests/property_helpers.py), the incremental side on the Qdrant state (local
    mode); the fresh index it is compared with stays on the embedded store."""

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(self.site, Path(tempfile.mkdtemp(prefix="pagesync-qprop-")), state="qdrant")


QdrantSiteEdits.TestCase.settings = settings(
    max_examples=2,
    stateful_step_count=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestQdrantSiteEdits = pytest.mark.slow(QdrantSiteEdits.TestCase)
