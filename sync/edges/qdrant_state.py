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

The lease
---------
`lock()` takes a lease (default 10 minutes) and a daemon thread renews it (default every
60 s); `unlock()` releases it; a crashed pass's lease simply expires. Qdrant offers no
compare-and-swap that every server version has, so taking the lease is write-then-verify:

1. read the lease; if another pass's lease is live, wait (`wait` seconds) or refuse
   with `StateLockedError` naming the holder (host, pid, started at, expires at);
2. otherwise write our lease with a random token;
3. wait `settle_seconds` (default 1 s), read it back, and proceed only if our token is
   still there. Two passes racing for a free lease both write; the later write wins and
   both read back the winner's token, so exactly one proceeds.

The remaining race window, honestly: if pass B *read* the lease as free before pass A
wrote it, but B's *write* lands after A's read-back (B stalled between its read and its
write for longer than A's settle time, e.g. a GC pause or a slow network), both proceed.
A's next heartbeat then finds B's token, marks A's lease lost, and A stops at its next
state write with `StateLeaseLostError` (the engine writes the state before every store
write, so A writes no more points after that). So the overlap, when it happens at all,
is bounded by one heartbeat interval, and both passes write pages as units (a page's
points are replaced whole), so an overlap costs duplicate work and possibly a stale
hash on a page that the next pass repairs, not a broken collection. Renewal and release
are conditional on our token (a filtered `set_payload` / delete), so they never extend
or remove a successor's lease. Expiry compares the lease's `expires_at` with the local
clock: machines whose clocks disagree by more than the lease length can take over a
live lease early. Servers that support conditional upserts (`update_mode=insert_only`,
`update_filter`) could make step 2 a true compare-and-swap; they are not used because
not every server has them.
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

from ..errors import ConfigError, PagesyncError, StateError, StateLeaseLostError, StateLockedError
from .lease import Holder, LeaseStatus, claim, lease_status, locked_message, may_take, this_process
from .state import _COLUMNS, GONE, LIVE, NEW, PageState, to_epoch
from .store_errors import Secrets, qdrant_boundary

__all__ = ["QdrantState", "state_collection_name", "STATE_SUFFIX", "NEEDS_SERVER"]

log = logging.getLogger("pagesync")

STATE_SUFFIX = "__pagesync_state"
NULL_DUE = -1.0e18  # `due_key` of a page with no due time: before any `now`, so always due
NEEDS_SERVER = ("--state qdrant keeps the page state in Qdrant next to the collection and needs a server: "
                "give --qdrant-url (a state file literally named 'qdrant' is --state ./qdrant)")
_LEASE_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "pagesync:lease"))
_BATCH = 256
_DEFAULTS = {"status": NEW, "source": "sitemap", "in_sitemap": False, "chunk_count": 0, "failures": 0,
             "lastmod_pending": False, "unlinked_misses": 0}


def state_collection_name(collection: str) -> str:
    """The companion collection that holds `collection`'s page state."""
    name = collection + STATE_SUFFIX
    if len(name) > 255:
        raise ConfigError(f"collection name {collection!r} is too long to keep its state in Qdrant "
                          f"(the state collection {name[:40]}... would exceed 255 characters)")
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

    def __init__(self, client: Any, collection: str, *, api_key: Secrets = None, create: bool = True,
                 lease_seconds: float = 600.0, heartbeat_seconds: float = 60.0, settle_seconds: float = 1.0,
                 poll_seconds: float = 2.0, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, holder: tuple[str, int] | None = None):
        self.client = client
        self.collection = collection
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.settle_seconds = settle_seconds
        self.poll_seconds = poll_seconds
        self._secret = api_key
        self._clock, self._sleep = clock, sleep
        self._holder = holder  # (hostname, pid) shown to others; default: this process
        self._token = uuid.uuid4().hex
        self._io = threading.RLock()  # the heartbeat thread and the pass never interleave calls
        self._held: Holder | None = None
        self._lost: str | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._ready = False
        if create:
            self.ensure()

    @classmethod
    def for_store(cls, store: Any, *, create: bool = True, **kw: Any) -> "QdrantState":
        """The state of a `ClientStore`'s collection, on the same client (and API key)."""
        from .client_store import ClientStore

        if not isinstance(store, ClientStore):
            raise ConfigError(NEEDS_SERVER)
        return cls(store.client, state_collection_name(store.collection), api_key=store._secret,
                   create=create, **kw)

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
                    for name, schema in (("kind", m.PayloadSchemaType.KEYWORD), ("status", m.PayloadSchemaType.KEYWORD),
                                         ("due_key", m.PayloadSchemaType.FLOAT), ("in_sitemap", m.PayloadSchemaType.BOOL),
                                         ("has_pending", m.PayloadSchemaType.BOOL), ("seq", m.PayloadSchemaType.INTEGER)):
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
                recs, offset = self.client.scroll(self.collection, scroll_filter=flt, limit=512, offset=offset,
                                                  with_payload=payload, with_vectors=False)
            for r in recs:
                yield dict(r.payload or {})
            if offset is None:
                return

    def _retrieve(self, what: str, ids: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in range(0, len(ids), _BATCH):
            with self._guard(what):
                recs = self.client.retrieve(self.collection, ids=ids[i : i + _BATCH], with_payload=True, with_vectors=False)
            out.extend(dict(r.payload or {}) for r in recs)
        return out

    def _upsert(self, what: str, points: list[tuple[str, dict[str, Any]]]) -> None:
        from qdrant_client import models as m

        self._check_lease()
        self.ensure()
        for i in range(0, len(points), _BATCH):
            with self._guard(what):
                self.client.upsert(self.collection, points=[m.PointStruct(id=pid, vector={}, payload=pl)
                                                            for pid, pl in points[i : i + _BATCH]], wait=True)

    def _check_lease(self) -> None:
        if self._lost is not None:
            raise StateLeaseLostError(self._lost)

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
            should=[m.FieldCondition(key="status", match=m.MatchExcept(**{"except": [GONE]})),
                    m.FieldCondition(key="in_sitemap", match=m.MatchValue(value=True))],
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
        return {d["host"]: (int(d.get("lastmod_advances", 0)), int(d.get("lastmod_confirmed", 0)))
                for d in self._scroll("read", self._kind("host"))}

    def add_host_trust(self, counts: dict[str, tuple[int, int]]) -> None:
        if not counts:
            return
        have = {d["host"]: d for d in self._retrieve("read", [_host_id(h) for h in counts]) if d.get("kind") == "host"}
        points = []
        for host, (adv, conf) in counts.items():
            old = have.get(host, {})
            points.append((_host_id(host), {"kind": "host", "host": host,
                                            "lastmod_advances": int(old.get("lastmod_advances", 0)) + adv,
                                            "lastmod_confirmed": int(old.get("lastmod_confirmed", 0)) + conf}))
        self._upsert("write host trust", points)

    # -- runs ----------------------------------------------------------------------------------
    def _last_run_payload(self) -> dict[str, Any] | None:
        from qdrant_client import models as m

        with self._guard("read runs"):
            recs, _ = self.client.scroll(self.collection, scroll_filter=self._kind("run"), limit=1,
                                         order_by=m.OrderBy(key="seq", direction=m.Direction.DESC),
                                         with_payload=True, with_vectors=False)
        return dict(recs[0].payload or {}) if recs else None

    def record_run(self, report: dict) -> None:
        self._check_lease()
        self.ensure()
        last = self._last_run_payload()
        seq = int(last["seq"]) + 1 if last else 1
        pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"pagesync:run:{seq}:{report['started_at']}"))
        self._upsert("record run", [(pid, {"kind": "run", "seq": seq, "started_at": report["started_at"],
                                           "finished_at": report["finished_at"], "report": json.dumps(report)})])

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

    # -- the lease -------------------------------------------------------------------------------
    def _me(self, now: float) -> Holder:
        if self._holder is None:
            return this_process(now, token=self._token)
        return Holder(self._holder[0], self._holder[1], now, None, self._token)

    def _mine_filter(self):
        from qdrant_client import models as m

        return m.Filter(must=[m.HasIdCondition(has_id=[_LEASE_ID]),
                              m.FieldCondition(key="token", match=m.MatchValue(value=self._token))])

    def read_lease(self) -> Holder | None:
        """The lease as stored now (None: no lease)."""
        got = self._retrieve("read lease", [_LEASE_ID])
        if not got or got[0].get("kind") != "lease":
            return None
        return Holder.from_dict(got[0])

    def _write_lease(self, lease: Holder) -> None:
        from qdrant_client import models as m

        with self._guard("write lease"):
            self.client.upsert(self.collection, points=[m.PointStruct(id=_LEASE_ID, vector={},
                                                                      payload={"kind": "lease", **lease.to_dict()})],
                               wait=True)

    def _refusal(self, holder: Holder | None) -> StateLockedError:
        return StateLockedError(locked_message(f"the Qdrant state {self.collection!r}", holder))

    def lock(self, wait: float = 0.0) -> None:
        """Take the lease (write, settle, read back), waiting up to `wait` seconds for a
        live one to be released or to expire; else `StateLockedError` naming the holder."""
        if self._held is not None:
            return
        self.ensure()
        deadline = self._clock() + max(0.0, wait)
        vanished = 0
        while True:
            now = self._clock()
            current = self.read_lease()
            if may_take(lease_status(current, self._token, now)):
                self._write_lease(claim(current, self._me(now), now, self.lease_seconds))
                if self.settle_seconds > 0:
                    self._sleep(self.settle_seconds)
                back = self.read_lease()
                if lease_status(back, self._token, self._clock()) is LeaseStatus.MINE:
                    self._held, self._lost = back, None
                    self._start_heartbeat()
                    return
                if back is None and vanished < 3:  # gone between our write and our read: again at once
                    vanished += 1
                    continue
                current = back  # another pass's write landed after ours: it won
            if self._clock() >= deadline:
                raise self._refusal(current)
            self._sleep(max(0.0, min(self.poll_seconds, deadline - self._clock())))

    def renew(self) -> bool:
        """Extend our lease (only if it still carries our token). False, and the lease
        marked lost, when another pass holds it now."""
        from qdrant_client import models as m

        if self._held is None:
            return False
        now = self._clock()
        new = claim(self._held, self._me(now), now, self.lease_seconds)
        with self._guard("renew lease"):
            self.client.set_payload(self.collection, payload={"expires_at": new.expires_at},
                                    points=m.FilterSelector(filter=self._mine_filter()), wait=True)
        back = self.read_lease()
        if lease_status(back, self._token, self._clock()) is LeaseStatus.MINE:
            self._held = back
            return True
        self._lost = (f"this pass lost its lease on the Qdrant state {self.collection!r} "
                      + (f"to another pass ({back.describe()})" if back else "(the lease was removed)")
                      + "; stopped before writing more")
        log.warning("pagesync: %s", self._lost)
        return False

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        if self.heartbeat_seconds <= 0:
            return
        self._beat = threading.Thread(target=self._heartbeat, name="pagesync-lease", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_seconds):
            try:
                if not self.renew():
                    return
            except PagesyncError as exc:  # already redacted; the lease lives on until it expires
                log.warning("pagesync: could not renew the state lease (will retry): %s", exc)

    def unlock(self) -> None:
        """Stop renewing and delete the lease, only if it still carries our token."""
        from qdrant_client import models as m

        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=30)
            self._beat = None
        if self._held is None:
            return
        self._held = None
        try:
            with self._guard("release lease"):
                self.client.delete(self.collection, points_selector=m.FilterSelector(filter=self._mine_filter()),
                                   wait=True)
        except PagesyncError as exc:
            log.warning("pagesync: could not release the state lease (it expires on its own): %s", exc)
