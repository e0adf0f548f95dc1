"""What may stand at the path of an output `run` writes (`--report`, `--metrics`).

Checked before the pass, so that a path that cannot take the file is exit 2 with nothing
written, not a hang or an error after the collection was written: a FIFO nobody reads blocks
the writer, a device takes or refuses the bytes (`/dev/full`), a dangling symlink points
nowhere. `--metrics` replaces its file by a rename, which would replace a symlink or a device
node itself (as root, `--metrics /dev/null` would replace the system's /dev/null): only a
regular file, or nothing, may be there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["output_problem"]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "something else"


def output_problem(path: Path, *, replaced: bool) -> str | None:
    """Why `path` cannot receive an output file, or None: it is absent or a regular file.
    `replaced` (the file is renamed into place): a symlink is refused too; otherwise (written
    in place) a symlink is followed, and one that points nowhere is refused. OSError (a
    directory this user may not search) is the caller's."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        if replaced:
            return "is a symlink (the rename would replace the link, not its target): name the file itself"
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return f"is a dangling symlink (to {os.readlink(path)})"
    if stat.S_ISREG(st.st_mode):
        return None
    return f"is {_kind(st.st_mode)}, not a regular file"
