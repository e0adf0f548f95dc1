"""Collections and aliases of one Qdrant, embedded or server: what `pagesync reindex` needs
beyond the `Store` of a single collection.

- `ClientCatalog` (a server, or qdrant-client's local mode): Qdrant's own aliases. A switch
  is one `update_collection_aliases` request, [delete alias, create alias], which the
  server applies atomically (it holds its collection lock for the whole list). Qdrant
  refuses an alias with the name of an existing collection, so turning a plain collection
  into an alias of the same name means deleting it first: a short gap, reported.
- `EdgeCatalog` (Qdrant Edge, one shard directory per collection): Edge has no aliases;
  they live in `<qdrant-path>/aliases.json` (`sync.edges.aliasfile`), switched with an atomic
  rename, and `EdgeStore` resolves through it. An alias may carry the name of a shard
  directory (it wins), so even the first switch has no gap.

`open(name)` always opens the physical collection of that name (no alias resolution).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Protocol

from .aliasfile import read_aliases, write_alias
from ..errors import StoreError
from .client_store import ClientStore
from .edge_store import EdgeStore
from .store_errors import Secrets, qdrant_boundary
from .store import Store

__all__ = ["Catalog", "EdgeCatalog", "ClientCatalog"]


class Catalog(Protocol):
    kind: str  # "embedded" | "server"
    alias_may_shadow: bool  # an alias may carry the name of an existing collection

    def aliases(self) -> dict[str, str]:
        """alias -> collection."""

    def collections(self) -> set[str]:
        """Names of the physical collections."""

    def open(self, name: str) -> Store:
        """The physical collection `name` (closing it leaves the catalog usable)."""

    def vector_size(self, name: str) -> int | None: ...

    def switch(self, alias: str, target: str, *, exists: bool | None = None) -> None:
        """Point `alias` at `target` atomically (creating the alias, or moving it);
        `exists`: whether the alias exists now, when the caller knows (None: look)."""

    def drop(self, name: str) -> None:
        """Delete the physical collection `name` and its points."""

    def close(self) -> None: ...


# ---------------------------------------------------------------------------------------
class EdgeCatalog:
    kind = "embedded"
    alias_may_shadow = True

    def __init__(self, root: str | os.PathLike[str], *, lock_wait: float = 10.0):
        self.root = Path(root)
        self.lock_wait = lock_wait

    def aliases(self) -> dict[str, str]:
        return read_aliases(self.root)

    def collections(self) -> set[str]:
        if not self.root.is_dir():
            return set()
        return {
            d.name for d in self.root.iterdir() if not d.name.startswith(".") and (d / "edge_config.json").is_file()
        }

    def open(self, name: str) -> EdgeStore:
        return EdgeStore(self.root, name, resolve_alias=False, lock_wait=self.lock_wait)

    def vector_size(self, name: str) -> int | None:
        try:
            cfg = json.loads((self.root / name / "edge_config.json").read_text())
            return int(cfg["vectors"][""]["size"])
        except (OSError, KeyError, ValueError, TypeError):
            return None

    def where(self, name: str) -> str:
        return str(self.root / name)

    def switch(self, alias: str, target: str, *, exists: bool | None = None) -> None:
        if not (self.root / target / "edge_config.json").is_file():
            raise StoreError(f"cannot point alias {alias!r} at {target!r}: no such collection under {self.root}")
        write_alias(self.root, alias, target)

    def drop(self, name: str) -> None:
        path = self.root / name
        if not path.exists():
            return
        # Renamed first (atomic): nothing ever opens a half-deleted shard under its name.
        trash = self.root / f".dropped-{name}-{os.getpid()}-{time.monotonic_ns()}"
        try:
            os.replace(path, trash)
            shutil.rmtree(trash)
        except OSError as exc:
            raise StoreError(f"cannot delete collection {name!r} at {path}: {exc}") from None

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------
class _BorrowedClientStore(ClientStore):
    """A ClientStore on the catalog's client: closing it does not close the client."""

    def close(self) -> None:
        pass


class ClientCatalog:
    kind = "server"
    alias_may_shadow = False

    def __init__(self, client: Any, *, api_key: Secrets = None):
        self.client = client
        self._secret = api_key

    @classmethod
    def of(cls, store: ClientStore) -> "ClientCatalog":
        return cls(store.client, api_key=store._secret)

    def _guard(self, what: str):
        return qdrant_boundary(f"Qdrant {what}", self._secret)

    def aliases(self) -> dict[str, str]:
        with self._guard("listing aliases"):
            return {a.alias_name: a.collection_name for a in self.client.get_aliases().aliases}

    def collections(self) -> set[str]:
        with self._guard("listing collections"):
            return {c.name for c in self.client.get_collections().collections}

    def open(self, name: str) -> ClientStore:
        return _BorrowedClientStore(self.client, name, api_key=self._secret)

    def vector_size(self, name: str) -> int | None:
        from qdrant_client import models as m

        with self._guard(f"reading collection {name!r}"):
            params = self.client.get_collection(name).config.params.vectors
        return params.size if isinstance(params, m.VectorParams) else None

    def where(self, name: str) -> str:
        return f"collection {name!r} on the server"

    def switch(self, alias: str, target: str, *, exists: bool | None = None) -> None:
        from qdrant_client import models as m

        ops: list[Any] = []
        if exists if exists is not None else alias in self.aliases():
            ops.append(m.DeleteAliasOperation(delete_alias=m.DeleteAlias(alias_name=alias)))
        ops.append(m.CreateAliasOperation(create_alias=m.CreateAlias(collection_name=target, alias_name=alias)))
        with self._guard(f"switching alias {alias!r} to {target!r}"):
            # One request: the server applies the list under one lock (no reader sees no alias).
            self.client.update_collection_aliases(change_aliases_operations=ops)

    def drop(self, name: str) -> None:
        with self._guard(f"deleting collection {name!r}"):
            self.client.delete_collection(name)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
