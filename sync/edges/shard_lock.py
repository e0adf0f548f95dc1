"""The lock that keeps a Qdrant Edge shard open in one process at a time.

Qdrant Edge locks its write-ahead log, but only after `EdgeShard.load` has mapped the segment
files read-write and loaded them: a load attempt against a shard another process has open,
even one that then fails with WouldBlock, races that process's writes and flushes and can lose
points it wrote (reproduced by bench/kill_stress.py: a pass's pages gone while its state records
them). So every opening first takes an exclusive lock on `<shard>/pagesync.lock` (flock,
released by `release` or when the process dies), and only then loads or creates the shard.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from pathlib import Path

from ..errors import StoreHeldError
from .lease import Holder, iso, this_process
from .store_errors import read_only_error

try:
    import fcntl
except ImportError:  # not POSIX: no advisory lock, Qdrant Edge's own WAL lock only
    fcntl = None  # type: ignore[assignment]

__all__ = ["SHARD_LOCK", "ShardLock"]

SHARD_LOCK = "pagesync.lock"  # in the shard directory: taken before Qdrant Edge touches a segment


def _holder_record(reading: bool) -> bytes:
    """What the holder of a shard's lock writes in it: who (`sync.edges.lease.Holder`) and
    whether it only reads."""
    record = this_process(time.time()).to_dict()
    del record["token"], record["expires_at"]
    return json.dumps({**record, "reading": reading}, sort_keys=True).encode()


def _lock_holder(fd: int) -> tuple[Holder | None, bool]:
    """The holder a shard's lock file describes and whether it only reads; (None, False)
    when it describes none (released, just taken, or a pagesync from before the record)."""
    try:
        record = json.loads(os.pread(fd, 1000, 0) or b"null")
        return Holder.from_dict(record), record.get("reading") is True
    except (OSError, ValueError, TypeError, AttributeError):
        return None, False


def _who(holder: Holder) -> str:
    return f"host {holder.hostname}, pid {holder.pid}, since {iso(holder.started_at)}"


def _held_for_writing(path: Path, holder: Holder) -> str:
    return (
        f"embedded store ({path}) is open in another process for writing (a pagesync pass, import or "
        f"repair: {_who(holder)}); Qdrant Edge opens a shard in one process at a time: read it when "
        f"that process is done, or keep the collection on a Qdrant server (--qdrant-url) to read it while "
        f"passes run"
    )


class ShardLock:
    """One opener's hold on a shard's `pagesync.lock`, waited for up to `wait` seconds.

    The holder describes itself in the lock file (host, pid, start, and whether it only
    reads). `reading=True` marks an opener that only reads (search, export, the read API): it
    waits, like any opener, while another reader holds the shard for a moment, but a shard held
    for writing (a pass, an import, a repair) is refused at once with one line: a pass holds it
    for minutes, and Qdrant Edge's Python API has no read-only opening that could read beside it.
    """

    def __init__(self, *, reading: bool = False, wait: float = 10.0):
        self.reading = reading
        self.wait = wait
        self._fd: int | None = None

    def take(self, path: Path) -> None:
        """Take `<path>/pagesync.lock` (exclusive) before anything opens the shard's files, and
        describe this holder in it; `release` lets it go. Taking it again while held is a no-op."""
        if fcntl is None or self._fd is not None:
            return
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path / SHARD_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and (path / "edge_config.json").exists():
                raise read_only_error(path, exc) from None  # a shard that is there, but not ours to write
            raise
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder, reads = _lock_holder(fd)
                if self.reading and holder is not None and not reads:
                    os.close(fd)
                    raise StoreHeldError(_held_for_writing(path, holder)) from None
                if time.monotonic() >= deadline:
                    os.close(fd)
                    shown = f"{'a reader: ' if reads else ''}{_who(holder)}; " if holder is not None else ""
                    raise StoreHeldError(
                        f"embedded store ({path}) is open in another process or thread ({shown}waited {self.wait:g}s)"
                    ) from None
                time.sleep(0.05)
            except BaseException:
                os.close(fd)
                raise
        with contextlib.suppress(OSError):  # the description is for others' messages only
            os.ftruncate(fd, 0)
            os.pwrite(fd, _holder_record(self.reading), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # released: no holder to describe (a crashed one's stays, and is overwritten)
            os.close(fd)  # closing the only descriptor releases the flock
