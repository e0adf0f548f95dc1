"""Page state in Qdrant (`--state qdrant`): for CI runners that keep nothing between runs.

The state lives in a payload-only companion collection on the same Qdrant as the pages,
`<collection>__pagesync_state` (no vectors), as four kinds of records told apart by the
keyword field `kind`:

- `page`: every `PageState` field, stored as SQLite stores it (datetimes as float epoch
  seconds, the interval as `interval_s`), plus two fields that exist only to be indexed:
  `due_key` (= `due_at`, or a floor far in the past when `due_at` is null: "due now") and
  `has_pending` (`pending_hash` is set). Point id: `uuid5(NAMESPACE_URL, url)`.
- `host`: a host's sitemap-lastmod trust counts. Id: `uuid5(NAMESPACE_URL, "pagesync:host:" + host)`.
- `run`: one run report (as JSON text, exactly as recorded) and its sequence number `seq`.
- `lease`: the pass lock (one point, id `uuid5(NAMESPACE_URL, "pagesync:lease")`).

Payload indexes: `kind`, `status` (keyword), `due_key` (float), `in_sitemap`,
`has_pending` (bool), `seq` (integer, for `order_by`). "What is due" is two indexed
queries, never a scan of every page: `kind = page AND due_key <= now AND (status != gone
OR in_sitemap)`, and `kind = page AND has_pending`. (qdrant-client's local mode, used
by the tests, accepts the indexes and ignores them; a server uses them.)

Every call goes through qdrant-client (server, or local mode in tests); every error is
raised as `StateError` with the API key redacted and the original exception (which may
carry request headers) dropped.

The lease (`lock()`, the pass lock) is `sync.edges.qdrant_lease.QdrantLease`'s: a point of kind
`lease`, taken write-then-verify and renewed by a heartbeat thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
import warnings
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator

from ..errors import ConfigError, StateError, StateLeaseLostError
from .lease import Holder
from .qdrant_lease import QdrantLease
from .state import _COLUMNS, GONE, LIVE, NEW, PageState, to_epoch
from .store_errors import Secrets, qdrant_boundary

__all__ = ["QdrantState", "state_collection_name", "STATE_SUFFIX", "NEEDS_SERVER"]

log = logging.getLogger("pagesync")

STATE_SUFFIX = "__pagesync_state"
NULL_DUE = -1.0e18  # `due_key` of a page with no due time: before any `now`, so always due
NEEDS_SERVER = (
    "--state qdrant keeps the page state in Qdrant next to the collection and needs a server: "
    "give --qdrant-url (a state file literally named 'qdrant' is --state ./qdrant)"
)
_BATCH = 256
_DEFAULTS = {
    "status": NEW,
    "source": "sitemap",
    "in_sitemap": False,
    "chunk_count": 0,
    "failures": 0,
    "lastmod_pending": False,
    "unlinked_misses": 0,
}


def state_collection_name(collection: str) -> str:
    """The companion collection that holds `collection`'s page state."""
    name = collection + STATE_SUFFIX
    if len(name) > 255:
        raise ConfigError(
            f"collection name {collection!r} is too long to keep its state in Qdrant "
            f"(the state collection {name[:40]}... would exceed 255 characters)"
        )
    return name


def _page_id(url: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, url))


def _host_id(host: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "pagesync:host:" + host))


def _page_payload(p: PageState) -> dict[str, Any]:
    row = p.to_row()
    row["in_sitemap"] = bool(p.in_sitemap)
    row["lastmod_pending"] = bool(p.lastmod_pending)
    row["kind"] = "page"
    row["due_key"] = row["due_at"] if row["due_at"] is not None else NULL_DUE
    row["has_pending"] = p.pending_hash is not None
    return row


def _page_from_payload(d: dict[str, Any]) -> PageState:
    return PageState.from_row({k: d.get(k, _DEFAULTS.get(k)) for k in _COLUMNS})  # type: ignore[arg-type]


class QdrantState:
    """The page state in a payload-only Qdrant collection, with a lease for the pass lock.

    `client` is a qdrant-client `QdrantClient` (or `sync.edges.client_store.RetryingClient` around one);
    `collection` is the state collection's own name (see `for_store`). `clock` and `sleep`
    are injectable for tests; the lease uses the wall clock (epoch seconds), never a pass's
    `--now`.
    """

    def __init__(
        self,
        client: Any,
        collection: str,
        *,
        api_key: Secrets = None,
        create: bool = True,
        lease_seconds: float = 600.0,
        heartbeat_seconds: float = 60.0,
        settle_seconds: float = 1.0,
        poll_seconds: float = 2.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        holder: tuple[str, int] | None = None,
    ):
        self.client = client
        self.collection = collection
        self._secret = api_key
        self._io = threading.RLock()  # the heartbeat thread and the pass never interleave calls
        self._lease = QdrantLease(
            client,
            collection,
            guard=self._guard,
            retrieve=self._retrieve,
            ensure=self.ensure,
            lease_seconds=lease_seconds,
            heartbeat_seconds=heartbeat_seconds,
            settle_seconds=settle_seconds,
            poll_seconds=poll_seconds,
            clock=clock,
            sleep=sleep,
            holder=holder,
        )
        self._ready = False
        if create:
            self.ensure()

    @classmethod
    def for_store(cls, store: Any, *, create: bool = True, **kw: Any) -> "QdrantState":
        """The state of a `ClientStore`'s collection, on the same client (and API key)."""
        from .client_store import ClientStore

        if not isinstance(store, ClientStore):
            raise ConfigError(NEEDS_SERVER)
        return cls(store.client, state_collection_name(store.collection), api_key=store._secret, create=create, **kw)

    # -- plumbing -----------------------------------------------------------------------
    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        with qdrant_boundary(f"Qdrant state {what} on {self.collection!r}", self._secret, StateError), self._io:
            yield

    def exists(self) -> bool:
        with self._guard("collection check"):
            return bool(self.client.collection_exists(self.collection))

    def ensure(self) -> None:
        if self._ready:
            return
        from qdrant_client import models as m

        with self._guard("create collection"):
            if not self.client.collection_exists(self.collection):
                try:
                    self.client.create_collection(self.collection, vectors_config={})
                except Exception:
                    if not self.client.collection_exists(self.collection):  # not a lost creation race
                        raise
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # local mode: "payload indexes have no effect"
                    for name, schema in (
                        ("kind", m.PayloadSchemaType.KEYWORD),
                        ("status", m.PayloadSchemaType.KEYWORD),
                        ("due_key", m.PayloadSchemaType.FLOAT),
                        ("in_sitemap", m.PayloadSchemaType.BOOL),
                        ("has_pending", m.PayloadSchemaType.BOOL),
                        ("seq", m.PayloadSchemaType.INTEGER),
                    ):
                        self.client.create_payload_index(self.collection, name, schema, wait=True)
        self._ready = True

    @staticmethod
    def _kind(kind: str, *more: Any, should: list[Any] | None = None):
        from qdrant_client import models as m

        return m.Filter(must=[m.FieldCondition(key="kind", match=m.MatchValue(value=kind)), *more], should=should)

    def _scroll(self, what: str, flt: Any, payload: Any = True) -> Iterator[dict[str, Any]]:
        offset = None
        while True:
            with self._guard(what):
                recs, offset = self.client.scroll(
                    self.collection,
                    scroll_filter=flt,
                    limit=512,
                    offset=offset,
                    with_payload=payload,
                    with_vectors=False,
                )
            for r in recs:
                yield dict(r.payload or {})
            if offset is None:
                return

    def _retrieve(self, what: str, ids: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in range(0, len(ids), _BATCH):
            with self._guard(what):
                recs = self.client.retrieve(
                    self.collection, ids=ids[i : i + _BATCH], with_payload=True, with_vectors=False
                )
            out.extend(dict(r.payload or {}) for r in recs)
        return out

    def _upsert(self, what: str, points: list[tuple[str, dict[str, Any]]]) -> None:
        from qdrant_client import models as m

        self._check_lease()
        self.ensure()
        for i in range(0, len(points), _BATCH):
            with self._guard(what):
                self.client.upsert(
                    self.collection,
                    points=[m.PointStruct(id=pid, vector={}, payload=pl) for pid, pl in points[i : i + _BATCH]],
                    wait=True,
                )

    def _check_lease(self) -> None:
        if self._lease.lost is not None:
            raise StateLeaseLostError(self._lease.lost)

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Release the lease if held. The client belongs to the store and stays open."""
        self.unlock()

    def __enter__(self) -> "QdrantState":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pages -------------------------------------------------------------------------------
    def get(self, url: str) -> PageState | None:
        got = self._retrieve("read", [_page_id(url)])
        return _page_from_payload(got[0]) if got and got[0].get("kind") == "page" else None

    def get_many(self, urls: Iterable[str]) -> dict[str, PageState]:
        ids = list(dict.fromkeys(_page_id(u) for u in urls))
        pages = (_page_from_payload(d) for d in self._retrieve("read", ids) if d.get("kind") == "page")
        return {p.url: p for p in pages}

    def all_pages(self) -> list[PageState]:
        return sorted((_page_from_payload(d) for d in self._scroll("read", self._kind("page"))), key=lambda p: p.url)

    def sitemap_urls(self) -> dict[str, str | None]:
        from qdrant_client import models as m

        flt = self._kind("page", m.FieldCondition(key="in_sitemap", match=m.MatchValue(value=True)))
        return {d["url"]: d.get("sitemap_lastmod") for d in self._scroll("read", flt, ["url", "sitemap_lastmod"])}

    def due_urls(self, now: datetime) -> list[str]:
        """Pages whose due time has come, or whose write was left pending (as `StateDB`)."""
        from qdrant_client import models as m

        due = self._kind(
            "page",
            m.FieldCondition(key="due_key", range=m.Range(lte=to_epoch(now))),
            should=[
                m.FieldCondition(key="status", match=m.MatchExcept(**{"except": [GONE]})),
                m.FieldCondition(key="in_sitemap", match=m.MatchValue(value=True)),
            ],
        )
        pending = self._kind("page", m.FieldCondition(key="has_pending", match=m.MatchValue(value=True)))
        urls = {d["url"] for d in self._scroll("read", due, ["url"])}
        urls.update(d["url"] for d in self._scroll("read", pending, ["url"]))
        return sorted(urls)

    def _not_gone(self):
        from qdrant_client import models as m

        return self._kind("page", m.FieldCondition(key="status", match=m.MatchExcept(**{"except": [GONE]})))

    def tracked_urls(self) -> list[str]:
        return sorted(d["url"] for d in self._scroll("read", self._not_gone(), ["url"]))

    def tracked_count(self) -> int:
        """Pages tracked and not gone (counted by the server, not listed)."""
        with self._guard("count"):
            return self.client.count(self.collection, count_filter=self._not_gone(), exact=True).count

    def counts(self) -> dict[str, int]:
        from qdrant_client import models as m

        out = {}
        for status in (LIVE, GONE, NEW):
            with self._guard("count"):
                flt = self._kind("page", m.FieldCondition(key="status", match=m.MatchValue(value=status)))
                n = self.client.count(self.collection, count_filter=flt, exact=True).count
            if n:
                out[status] = n
        return out

    def put(self, page: PageState) -> None:
        self.put_many([page])

    def put_many(self, pages: Iterable[PageState]) -> None:
        points = [(_page_id(p.url), _page_payload(p)) for p in pages]
        if points:
            self._upsert("write", points)

    # -- hosts ---------------------------------------------------------------------------------
    def host_trust_counts(self) -> dict[str, tuple[int, int]]:
        return {
            d["host"]: (int(d.get("lastmod_advances", 0)), int(d.get("lastmod_confirmed", 0)))
            for d in self._scroll("read", self._kind("host"))
        }

    def add_host_trust(self, counts: dict[str, tuple[int, int]]) -> None:
        if not counts:
            return
        have = {d["host"]: d for d in self._retrieve("read", [_host_id(h) for h in counts]) if d.get("kind") == "host"}
        points = []
        for host, (adv, conf) in counts.items():
            old = have.get(host, {})
            points.append(
                (
                    _host_id(host),
                    {
                        "kind": "host",
                        "host": host,
                        "lastmod_advances": int(old.get("lastmod_advances", 0)) + adv,
                        "lastmod_confirmed": int(old.get("lastmod_confirmed", 0)) + conf,
                    },
                )
            )
        self._upsert("write host trust", points)

    # -- runs ----------------------------------------------------------------------------------
    def _last_run_payload(self) -> dict[str, Any] | None:
        from qdrant_client import models as m

        with self._guard("read runs"):
            recs, _ = self.client.scroll(
                self.collection,
                scroll_filter=self._kind("run"),
                limit=1,
                order_by=m.OrderBy(key="seq", direction=m.Direction.DESC),
                with_payload=True,
                with_vectors=False,
            )
        return dict(recs[0].payload or {}) if recs else None

    def record_run(self, report: dict) -> None:
        self._check_lease()
        self.ensure()
        last = self._last_run_payload()
        seq = int(last["seq"]) + 1 if last else 1
        pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"pagesync:run:{seq}:{report['started_at']}"))
        self._upsert(
            "record run",
            [
                (
                    pid,
                    {
                        "kind": "run",
                        "seq": seq,
                        "started_at": report["started_at"],
                        "finished_at": report["finished_at"],
                        "report": json.dumps(report),
                    },
                )
            ],
        )

    def last_run(self) -> dict | None:
        last = self._last_run_payload()
        return json.loads(last["report"]) if last else None

    def runs(self) -> list[dict]:
        rows = sorted(self._scroll("read runs", self._kind("run")), key=lambda d: int(d["seq"]))
        return [json.loads(d["report"]) for d in rows]

    # -- whole state ---------------------------------------------------------------------------
    def clear(self) -> None:
        """Forget every page, host and run (the lease stays)."""
        from qdrant_client import models as m

        self._check_lease()
        self.ensure()
        flt = m.Filter(must=[m.FieldCondition(key="kind", match=m.MatchAny(any=["page", "host", "run"]))])
        with self._guard("clear"):
            self.client.delete(self.collection, points_selector=m.FilterSelector(filter=flt), wait=True)

    # -- the lease (`QdrantLease`) -----------------------------------------------------------------
    def read_lease(self) -> Holder | None:
        """The lease as stored now (None: no lease)."""
        return self._lease.read()

    def lock(self, wait: float = 0.0) -> None:
        """Take the lease, waiting up to `wait` seconds for a live one to be released or to
        expire; else `StateLockedError` naming the holder."""
        self._lease.take(wait)

    def renew(self) -> bool:
        """Extend our lease; False, and the lease marked lost, when another pass holds it now."""
        return self._lease.renew()

    def unlock(self) -> None:
        """Stop renewing and delete the lease, only if it still carries our token."""
        self._lease.release()
