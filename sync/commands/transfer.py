"""`export` / `import`: points as JSON lines, for backups, diffs, and moving to a server;
`state export` / `state import`: the whole page state as JSON lines, to move it between
SQLite (`--state PATH`) and Qdrant (`--state qdrant`)."""

from __future__ import annotations

import json
import tempfile
import uuid
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import IO, Any

from ..errors import CollectionMismatchError, ConfigError
from ..edges.state import PageState
from ..edges.state_protocol import State
from ..edges.keywords import sparse_from_json
from ..edges.store import Store, StoredPoint

__all__ = [
    "export_points",
    "import_points",
    "export_state",
    "import_state",
    "read_state_dump",
    "load_state",
    "StateDump",
    "page_to_record",
    "page_from_record",
]


def export_points(store: Store, out: IO[str], *, with_vectors: bool = False) -> int:
    """Write every point as `{"id", "payload"}` (+ `"vector"`, and `"sparse_vector"`, its BM25
    keyword vector as `{"indices", "values"}`, when it has one), one JSON object a line."""
    n = 0
    for p in store.scroll(with_vectors=with_vectors):
        rec: dict[str, Any] = {"id": p.id, "payload": p.payload}
        if with_vectors:
            rec["vector"] = p.vector
            if p.sparse is not None:
                rec["sparse_vector"] = p.sparse.to_json()
        out.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
        n += 1
    out.flush()
    return n


def _point(line: str, lineno: int) -> StoredPoint:
    """One line of an export as a point, or `ConfigError` naming the line: a point id is a
    UUID or an unsigned integer (what Qdrant takes), and it needs a vector."""
    try:
        rec = json.loads(line)
        pid, payload, vector = rec["id"], dict(rec["payload"]), rec.get("vector")
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"line {lineno}: not a point as export writes it ({exc})") from None
    if isinstance(pid, bool) or not (isinstance(pid, int) and pid >= 0):
        try:
            pid = str(uuid.UUID(str(pid)))
        except ValueError:
            raise ConfigError(
                f"line {lineno}: point id {rec['id']!r} is neither a UUID nor an unsigned integer"
            ) from None
    if not vector:
        raise ConfigError(f"line {lineno}: point {pid} has no vector (export with --with-vectors)")
    if not isinstance(vector, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector):
        raise ConfigError(f"line {lineno}: point {pid}'s vector is not a list of numbers")
    sparse = rec.get("sparse_vector")
    keywords = sparse_from_json(sparse) if sparse is not None else None
    if sparse is not None and keywords is None:
        raise ConfigError(f'line {lineno}: point {pid}\'s sparse_vector is not {{"indices": [...], "values": [...]}}')
    # No sparse_vector (an export from before them): the store computes it from the payload.
    return StoredPoint(pid, payload, vector, keywords)


def import_points(store: Store, lines: IO[str], *, batch: int = 256) -> int:
    """Upsert points as given, after every line was checked: a line that is no point, has
    no vector, an id Qdrant would refuse or a vector of another size than the first is a
    `ConfigError` naming it, and nothing is written (docs/commands/index.md: exit 2, nothing written).
    Input that cannot be read twice (a pipe) is kept in a temporary file while checked."""
    spool = None if lines.seekable() else tempfile.TemporaryFile("w+", encoding="utf-8")
    start = lines.tell() if spool is None else 0
    dim: int | None = None
    for lineno, line in enumerate(lines, 1):
        if spool is not None:
            spool.write(line)
        if not line.strip():
            continue
        size = len(_point(line, lineno).vector or [])
        if dim is None:
            dim = size
        elif size != dim:
            raise ConfigError(
                f"line {lineno}: a {size}-dimensional vector among {dim}-dimensional ones "
                "(the first line's); nothing imported"
            )
    if dim is None:
        return 0
    try:
        store.ensure_collection(dim)
    except CollectionMismatchError:
        # No embedder is involved here: the size to name is the file's.
        held_size = getattr(store, "vector_size", lambda: None)()
        held = f"{held_size}-dimensional vectors" if held_size is not None else "vectors of another size"
        raise CollectionMismatchError(
            f"the points in the file have {dim}-dimensional vectors but collection "
            f"{store.collection!r} holds {held}; import into another --collection"
        ) from None
    source = spool if spool is not None else lines
    source.seek(start)
    buf: list[StoredPoint] = []
    n = 0
    for lineno, line in enumerate(source, 1):
        if line.strip():
            buf.append(_point(line, lineno))
        if len(buf) >= batch:
            store.upsert(buf)
            n += len(buf)
            buf = []
    if buf:
        store.upsert(buf)
        n += len(buf)
    if spool is not None:
        spool.close()
    return n


# -- the page state ---------------------------------------------------------------------------
STATE_FORMAT = "pagesync-state"
STATE_VERSION = 1
_TIME_FIELDS = ("due_at", "first_seen_at", "last_fetched_at", "last_changed_at", "unlinked_since")


def page_to_record(page: PageState) -> dict[str, Any]:
    """Every field of a page as JSON: datetimes ISO 8601 (UTC), the interval as `interval_s`."""
    d = asdict(page)
    for k in _TIME_FIELDS:
        d[k] = d[k].astimezone(timezone.utc).isoformat() if d[k] is not None else None
    iv = d.pop("interval")
    d["interval_s"] = iv.total_seconds() if iv is not None else None
    return {"kind": "page", **d}


def page_from_record(rec: dict[str, Any]) -> PageState:
    d = {k: v for k, v in rec.items() if k != "kind"}
    iv = d.pop("interval_s", None)
    d["interval"] = timedelta(seconds=iv) if iv is not None else None
    for k in _TIME_FIELDS:
        if d.get(k) is not None:
            dt = datetime.fromisoformat(d[k])
            d[k] = dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    unknown = set(d) - {f.name for f in fields(PageState)}
    if unknown:
        raise ValueError(f"unknown page fields {sorted(unknown)}")
    return PageState(**d)


def export_state(state: State, out: IO[str]) -> dict[str, int]:
    """Write the whole page state as JSON lines: a header, then every page (all fields),
    every host's lastmod trust, and every run report, oldest first. Returns the counts.

    Takes no lock: export between passes for a consistent copy."""
    out.write(json.dumps({"kind": STATE_FORMAT, "version": STATE_VERSION}) + "\n")
    n = {"pages": 0, "hosts": 0, "runs": 0}
    for page in state.all_pages():
        out.write(json.dumps(page_to_record(page), ensure_ascii=False, sort_keys=True) + "\n")
        n["pages"] += 1
    for host, (adv, conf) in sorted(state.host_trust_counts().items()):
        out.write(
            json.dumps(
                {"kind": "host", "host": host, "lastmod_advances": adv, "lastmod_confirmed": conf},
                ensure_ascii=False,
                sort_keys=True,
            )
            + "\n"
        )
        n["hosts"] += 1
    for report in state.runs():
        out.write(json.dumps({"kind": "run", "report": report}, ensure_ascii=False, sort_keys=True) + "\n")
        n["runs"] += 1
    out.flush()
    return n


@dataclass
class StateDump:
    """A parsed `export_state` dump: pages, host trust counts, run reports (oldest first)."""

    pages: list[PageState] = field(default_factory=list)
    hosts: dict[str, tuple[int, int]] = field(default_factory=dict)
    runs: list[dict] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"pages": len(self.pages), "hosts": len(self.hosts), "runs": len(self.runs)}


def read_state_dump(lines: IO[str]) -> StateDump:
    """Parse and check every line of an `export_state` dump (`ConfigError` naming the line).
    Memory grows with the number of pages."""
    pages: list[PageState] = []
    hosts: dict[str, tuple[int, int]] = {}
    runs: list[dict] = []
    header = False
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            kind = rec["kind"]
            if not header:
                if kind != STATE_FORMAT:
                    raise ValueError(f"the first line must be the {STATE_FORMAT!r} header (is this a point export?)")
                if rec.get("version") != STATE_VERSION:
                    raise ValueError(f"unsupported state format version {rec.get('version')!r}")
                header = True
            elif kind == "page":
                pages.append(page_from_record(rec))
            elif kind == "host":
                hosts[str(rec["host"])] = (int(rec["lastmod_advances"]), int(rec["lastmod_confirmed"]))
            elif kind == "run":
                report = rec["report"]
                if not isinstance(report, dict) or "started_at" not in report or "finished_at" not in report:
                    raise ValueError("a run needs a report with started_at and finished_at")
                runs.append(report)
            else:
                raise ValueError(f"unknown record kind {kind!r}")
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"state import, line {lineno}: not a state record as 'state export' writes it ({exc})"
            ) from None
    if not header:
        raise ConfigError("state import: no input (expected JSON lines as 'pagesync state export' writes them)")
    return StateDump(pages, hosts, runs)


def load_state(
    state: State, dump: StateDump, *, replace: bool = False, wait_lock: float = 0.0, batch: int = 500
) -> dict[str, int]:
    """Write a parsed dump into `state`, under its pass lock. The target must hold no
    pages, hosts or runs, unless `replace`, which forgets them first. Returns the counts."""
    pages, hosts, runs = dump.pages, dump.hosts, dump.runs
    state.lock(wait=wait_lock)
    try:
        if not replace and (state.last_run() is not None or state.host_trust_counts() or state.all_pages()):
            raise ConfigError(
                "the target page state is not empty: import into a new state, or pass --replace "
                "to forget what it holds first"
            )
        if replace:
            state.clear()
        for i in range(0, len(pages), batch):
            state.put_many(pages[i : i + batch])
        if hosts:
            state.add_host_trust(hosts)
        for report in runs:
            state.record_run(report)
    finally:
        state.unlock()
    return dump.counts()


def import_state(state: State, lines: IO[str], *, replace: bool = False, wait_lock: float = 0.0) -> dict[str, int]:
    """Load an `export_state` dump into `state`: every line is read and checked before
    anything is written (a bad line: `ConfigError`, nothing written), then `load_state`."""
    return load_state(state, read_state_dump(lines), replace=replace, wait_lock=wait_lock)
