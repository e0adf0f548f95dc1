"""The vectors a long job has made so far, by reuse key, in a temporary SQLite file: a text met
again (the same chunk on many pages: a notice, a footer that survived extraction, a
repeated example) is embedded once, and memory stays flat however many texts there are.
Vectors are kept as float32, the precision Qdrant stores them at."""

from __future__ import annotations

import sqlite3
from array import array
from pathlib import Path
from typing import Sequence

__all__ = ["VectorMemo"]


class VectorMemo:
    """Vectors by reuse key on disk, for the embed queue of a reindex (its `VectorLookup`):
    unlike the pass's in-memory cache, nothing is dropped however long the job runs."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB) WITHOUT ROWID")

    def __contains__(self, key: str) -> bool:
        return self.db.execute("SELECT 1 FROM vectors WHERE key = ?", (key,)).fetchone() is not None

    def get(self, key: str) -> array | None:
        row = self.db.execute("SELECT vec FROM vectors WHERE key = ?", (key,)).fetchone()
        return array("f", row[0]) if row is not None else None

    def put(self, key: str, vector: Sequence[float]) -> None:
        blob = (vector if isinstance(vector, array) else array("f", vector)).tobytes()
        self.db.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?)", (key, blob))

    def close(self) -> None:
        self.db.close()
