"""A decided change on its way through the embed queue to its write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from chunking.extract import GUIDE
from chunking.split import embedded_text

from ..core.decision import Decision
from ..core.page import PageState
from ..edges.fetcher import FetchResult

__all__ = ["PendingPage", "Embeddable"]


class Embeddable(Protocol):
    """What the embed queue reads and fills of a page waiting for its vectors: per chunk, what
    the model embeds (`inputs`), then its reuse key and its vector (None until known)."""

    page: PageState
    chunks: list[str]
    inputs: list[str]
    keys: list[str]
    vectors: list[Sequence[float] | None]
    reused: int  # chunks that are no model input of their own


@dataclass
class PendingPage:
    """A page decided ADD/REPLACE, waiting for its vectors and its write."""

    page: PageState
    decision: Decision
    result: FetchResult
    hash_: str
    title: str
    chunks: list[str]
    keys: list[str] = field(default_factory=list)  # reuse_key per chunk
    # Per chunk: a vector already known (reused), or None until the batch's model call.
    vectors: list[Sequence[float] | None] = field(default_factory=list)
    reused: int = 0  # chunks that will not be model inputs of their own
    # Per chunk: its heading path (payload `headings`), and what the model embeds for it
    # (`chunking.embedded_text`: the path, then the chunk), which the reuse key is taken over.
    headings: list[tuple[str, ...]] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    markdown: str = ""  # the page's extracted text (kept in the state for `reindex` once written)
    page_kind: str = GUIDE  # a guide or an API reference (`chunking.extract.page_kind_of`), on every point

    def __post_init__(self) -> None:
        if not self.headings:
            self.headings = [() for _ in self.chunks]
        if not self.inputs:
            self.inputs = [embedded_text(t, h) for t, h in zip(self.chunks, self.headings, strict=True)]

    def vectors_ready(self) -> list[Sequence[float]]:
        """Every chunk's vector, once the embed queue gave each one (a gap is a bug)."""
        out = [v for v in self.vectors if v is not None]
        if len(out) != len(self.chunks):
            raise AssertionError(f"{self.page.url}: {len(self.chunks) - len(out)} chunk(s) without a vector")
        return out
