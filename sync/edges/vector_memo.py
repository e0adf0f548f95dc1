"""The vectors a long job has made so far, by text, in a temporary SQLite file: a text met
again (the same chunk on many pages: a notice, a footer that survived extraction, a
repeated example) is embedded once, and memory stays flat however many texts there are.
Vectors are kept as float32, the precision Qdrant stores them at."""

from __future__ import annotations

import hashlib
import sqlite3
from array import array
from pathlib import Path
from typing import Callable, Sequence

__all__ = ["VectorMemo"]


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class VectorMemo:
    """`embed(texts, model)`: the vectors of `texts`, each distinct text not seen before
    sent to `model` once, in first-seen order; the others read back."""

    def __init__(self, path: Path):
        # Used from worker threads (the model runs off the event loop), one call at a time.
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB) WITHOUT ROWID")

    def _known(self, keys: list[bytes]) -> dict[bytes, list[float]]:
        out: dict[bytes, list[float]] = {}
        for i in range(0, len(keys), 500):  # below SQLite's bound on parameters
            part = keys[i : i + 500]
            rows = self.db.execute(f"SELECT key, vec FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)
            for key, blob in rows:
                out[key] = array("f", blob).tolist()
        return out

    def embed(
        self, texts: Sequence[str], model: Callable[[list[str]], list[list[float]]]
    ) -> tuple[list[list[float]], int]:
        """(one vector per text, how many texts were sent to `model`)."""
        keys = [_key(t) for t in texts]
        have = self._known(list(set(keys)))
        todo: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            if k not in have:
                todo.setdefault(k, t)
        if todo:
            vectors = model(list(todo.values()))
            if len(vectors) != len(todo):
                raise ValueError(f"embedder returned {len(vectors)} vectors for {len(todo)} texts")
            made = dict(zip(todo, vectors))
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)", ((k, array("f", v).tobytes()) for k, v in made.items())
            )
            self.db.execute("COMMIT")
            have.update(made)
        return [have[k] for k in keys], len(todo)

    def close(self) -> None:
        self.db.close()
