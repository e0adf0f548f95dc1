"""Free space on the embedded store's disk: the margin kept, and the refusal before a write.

Qdrant Edge maps its files sparse and fills them in place, so a write on a full disk is a
SIGBUS with no message; the store asks here first and refuses with `StoreFullError`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import ConfigError, StoreFullError

__all__ = ["MIN_FREE_BYTES", "MIN_FREE_ENV", "min_free_default", "refuse_when_short", "full_error", "out_of_space"]

# Free space the embedded store keeps on its disk before any write. Qdrant Edge grows its
# write-ahead log, vectors and payloads in 32 MiB files that it maps sparse into memory
# and fills in place: on a full disk, a store into such a page is a SIGBUS that kills the
# process with no message. 256 MiB covers a new chunk of each plus the holes of the open
# ones; a write also needs 4x its own size (WAL, segment, payload index). Below that a
# write is refused with `StoreFullError` (one line, exit 1) before Qdrant Edge is called.
# The environment variable PAGESYNC_MIN_FREE_MB sets another margin (in MiB; 0: no check).
MIN_FREE_BYTES = 256 * 1024 * 1024
MIN_FREE_ENV = "PAGESYNC_MIN_FREE_MB"
WRITE_FACTOR = 4
NO_SPACE = ("no space left on device", "os error 28", "disk quota exceeded", "os error 122")


FULL_WAY_ON = (
    "free some space and run it again: what was written is consistent, and the next pass resumes where this one stopped"
)


def min_free_default() -> int:
    """MIN_FREE_BYTES, or PAGESYNC_MIN_FREE_MB when set (ConfigError when it is no number)."""
    raw = os.environ.get(MIN_FREE_ENV, "").strip()
    if not raw:
        return MIN_FREE_BYTES
    try:
        mib = float(raw)
    except ValueError:
        mib = -1.0
    if not 0 <= mib < 2**40:
        raise ConfigError(f"{MIN_FREE_ENV}={raw!r} is not a size in MiB (e.g. 256; 0 turns the free-space check off)")
    return int(mib * 1048576)


def mib(n: int) -> str:
    return f"{n / 1048576:.0f} MiB"


def out_of_space(exc: BaseException) -> bool:
    """Whether Qdrant Edge's own I/O error says the disk is full."""
    return any(sign in str(exc).lower() for sign in NO_SPACE)


def full_error(where: str, what: str, exc: BaseException) -> StoreFullError:
    return StoreFullError(f"{where}: {what} failed: the disk is full ({exc}); {FULL_WAY_ON}")


def refuse_when_short(directory: Path, min_free_bytes: int, where: str, what: str, nbytes: int = 0) -> None:
    """Refuse a write (`StoreFullError`) when the directory's disk has less free space than
    the margin (`MIN_FREE_BYTES`) plus 4x the write's size, before Qdrant Edge maps a page
    it could not back."""
    probe = directory
    while not probe.exists() and probe != probe.parent:  # a shard not created yet: its disk
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return  # no answer: Qdrant Edge's own error decides
    need = min_free_bytes + WRITE_FACTOR * nbytes
    if min_free_bytes and free < need:
        raise StoreFullError(
            f"{where}: {what} refused: {mib(free)} free on its disk, under the {mib(need)} pagesync keeps "
            f"free there ({mib(min_free_bytes)} margin + 4x the write); {FULL_WAY_ON}"
        )
