"""The stages of a sync pass, one module each, in the order a page's data flows through them.

`write` (a page's replace in its crash-safe order) and `settle` (guard, moves, purges).
`sync.engine` conducts them. A stage may import the pure core and the edges of `sync`
(decision, policy, scheduler, state, store, ...), never `sync.engine` or the commands.
"""

from __future__ import annotations

from .settle import SettleStage
from .write import WriteStage, build_points

__all__ = ["SettleStage", "WriteStage", "build_points"]
