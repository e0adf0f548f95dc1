"""Collection aliases for the embedded store: a pointer file beside the shards.

Qdrant Edge has no aliases, so `pagesync reindex` keeps them in `<qdrant-path>/aliases.json`:

    {"version": 1, "aliases": {"pages": "pages__20261130t091200"}}

`EdgeStore` resolves a collection name through this file each time it is about to open
a shard, so every reader goes through an alias transparently. A name with no entry is a
plain shard directory, exactly as before aliases existed (no file: nothing changes). A
switch rewrites the whole file through a temporary file, fsync and `os.replace`: a reader
sees the old mapping or the new one, never a torn file. An alias may carry the name of a
shard directory (the first reindex of a plain collection); the alias wins.

No imports from the rest of pagesync but the errors, so `store` can use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path

from ..errors import StoreError, StoreUnavailableError

__all__ = ["ALIAS_FILE", "read_aliases", "resolve_alias", "write_alias"]

ALIAS_FILE = "aliases.json"
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")


def read_aliases(root: str | os.PathLike[str]) -> dict[str, str]:
    """alias -> collection (shard directory name) under `root`; {} when there is no file."""
    path = Path(root) / ALIAS_FILE
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        # A --qdrant-path that names a file: a configuration error (exit 2), not a store failure.
        raise StoreUnavailableError(
            f"cannot use {root} as the embedded store: it is a file, not a directory (--qdrant-path names a directory)"
        ) from None
    except OSError as exc:
        raise StoreError(f"cannot read the alias file {path}: {exc}") from None
    try:
        data = json.loads(raw)
        aliases = data["aliases"]
        if not isinstance(aliases, dict):
            raise TypeError("'aliases' is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"alias file {path} is damaged ({exc}); fix or remove it") from None
    out = {}
    for alias, target in aliases.items():
        # Names become directory names: nothing that could leave `root`.
        if not (
            isinstance(alias, str)
            and isinstance(target, str)
            and _NAME_RE.match(alias)
            and _NAME_RE.match(target)
            and target not in (".", "..")
        ):
            raise StoreError(f"alias file {path} is damaged (bad entry {alias!r}: {target!r}); fix or remove it")
        out[alias] = target
    return out


def resolve_alias(root: str | os.PathLike[str], name: str) -> str:
    """The shard directory name `name` stands for under `root` (itself when not an alias)."""
    return read_aliases(root).get(name, name)


def write_alias(root: str | os.PathLike[str], alias: str, target: str | None) -> None:
    """Point `alias` at `target` (None: remove the alias), atomically and durably."""
    root = Path(root)
    aliases = read_aliases(root)
    if target is None:
        aliases.pop(alias, None)
    else:
        aliases[alias] = target
    root.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"version": 1, "aliases": dict(sorted(aliases.items()))}, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".aliases-", suffix=".tmp", dir=root)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, root / ALIAS_FILE)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise StoreError(f"cannot write the alias file {root / ALIAS_FILE}: {exc}") from None
    with contextlib.suppress(OSError):  # the rename itself survives a power cut
        dfd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
