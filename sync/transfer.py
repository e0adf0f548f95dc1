"""`export` / `import`: points as JSON lines, for backups, diffs, and moving to a server."""

from __future__ import annotations

import json
from typing import IO

from .errors import ConfigError
from .store import Store, StoredPoint

__all__ = ["export_points", "import_points"]


def export_points(store: Store, out: IO[str], *, with_vectors: bool = False) -> int:
    """Write every point as `{"id", "payload"}` (+ `"vector"`), one JSON object a line."""
    n = 0
    for p in store.scroll(with_vectors=with_vectors):
        rec = {"id": p.id, "payload": p.payload}
        if with_vectors:
            rec["vector"] = p.vector
        out.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
        n += 1
    out.flush()
    return n


def import_points(store: Store, lines: IO[str], *, batch: int = 256) -> int:
    """Upsert points as given. Every point needs a vector (export --with-vectors)."""
    buf: list[StoredPoint] = []
    n = 0
    dim_checked = False
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            point = StoredPoint(str(rec["id"]), dict(rec["payload"]), rec.get("vector"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"line {lineno}: not a point as export writes it ({exc})") from None
        if not point.vector:
            raise ConfigError(f"line {lineno}: point {point.id} has no vector (export with --with-vectors)")
        if not dim_checked:
            store.ensure_collection(len(point.vector))
            dim_checked = True
        buf.append(point)
        if len(buf) >= batch:
            store.upsert(buf)
            n += len(buf)
            buf = []
    if buf:
        store.upsert(buf)
        n += len(buf)
    return n
