"""The vector sizes earlier probes of remote models found, in a small JSON file of the cache
directory: a process that embeds with a model whose size no list knows asks the server once,
not once per run. A cache only: a file that cannot be read or written means one more probe."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from sync.core.secrets import without_userinfo

__all__ = ["DimensionCache", "CACHE_NAME"]

CACHE_NAME = "remote-dimensions.json"


class DimensionCache:
    """One model's entry (`key`: the server's URL without its userinfo and the model id) in the
    cache file of the cache directory (`PAGESYNC_CACHE_DIR`, else ~/.cache/pagesync), looked up
    when used; `enabled=False` keeps nothing."""

    def __init__(self, key: str, *, enabled: bool = True):
        self.key, self.enabled = key, enabled

    @property
    def path(self) -> Path | None:
        """The cache file, or None (caching off, or no home directory)."""
        if not self.enabled:
            return None
        from .onnx_backend import cache_dir

        try:
            return cache_dir() / CACHE_NAME
        except (OSError, RuntimeError):  # no home directory
            return None

    def read(self) -> int | None:
        """The size an earlier probe stored, or None."""
        path = self.path
        try:
            value = json.loads(path.read_text()).get(self.key) if path else None
        except (OSError, ValueError, AttributeError):
            return None
        return value if isinstance(value, int) and value > 0 else None

    def write(self, dim: int) -> None:
        """Store `dim`, replacing the file atomically (another process may read it meanwhile)."""
        path = self.path
        if path is None:
            return
        try:
            try:
                known = json.loads(path.read_text())
            except (OSError, ValueError):
                known = {}
            known = known if isinstance(known, dict) else {}
            # An entry an older version keyed by a URL with its password goes.
            known = {k: v for k, v in known.items() if isinstance(k, str) and without_userinfo(k) == k}
            known[self.key] = dim
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
            os.replace(tmp, path)
        except OSError:
            pass  # a cache only: the next process probes again
