"""The collection as the page state sees it: what a pass checks before it fetches anything.

- `lost_refusal`: the collection is missing or empty while the state records indexed
  pages. That is a mistyped `--collection` (or `--qdrant-path` / `--qdrant-url`) as often
  as a lost collection, and rebuilding it means re-embedding the whole site, so a pass
  refuses (exit 2, nothing created) unless asked to rebuild (`--rebuild`,
  `PassConfig.rebuild`).
- `mark_for_rewrite`: the pages a rebuild or a repair is about to rewrite get a pending
  mark and lose their validators, in one state write before the first store write. A pass
  killed anywhere after that leaves them due, fetched unconditionally (no 304 can hide
  points that are missing) and rewritten, exactly as an interrupted page write is.
- `short_pages` (with `recorded_chunks` and `points_per_url`): the cheap check of every pass, the store's exact point count against
  the chunks the state records for its settled pages; only when it falls short are the
  points counted per url, to find the pages that lost some.

Pure functions over pages and counts, plus the one store read `points_per_url`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..errors import CollectionLostError
from .plural import plural
from .page import PageState

__all__ = [
    "REBUILD_MARK",
    "MISSING_MARK",
    "settled",
    "recorded_chunks",
    "lost_refusal",
    "mark_for_rewrite",
    "points_per_url",
    "short_pages",
    "MissingPoints",
    "rewrite_reason",
]

# `pending_hash` values that are no content hash: the page's points must be rewritten
# whatever its next fetch says (an interrupted write's mark is the hash it was writing).
REBUILD_MARK = "rebuild"  # the collection was lost and is being rebuilt
MISSING_MARK = "points-missing"  # the collection lost some of this page's points


def settled(page: PageState) -> bool:
    """Indexed with a confirmed write: the state's chunk count is what the collection holds."""
    return page.indexed and page.pending_hash is None


def recorded_chunks(pages: Iterable[PageState]) -> int:
    """The points the collection should hold for these pages' settled writes."""
    return sum(p.chunk_count for p in pages if settled(p))


def lost_refusal(collection: str, where: str, pages: Sequence[PageState]) -> CollectionLostError:
    """The one-line refusal of a pass into a missing or empty collection the state has
    indexed into: both readings and the way on."""
    chunks = sum(p.chunk_count for p in pages)
    return CollectionLostError(
        f"collection {collection!r} is missing or empty in {where}, but the page state records "
        f"{plural(chunks, 'chunk')} of {plural(len(pages), 'indexed page')}. Either --collection (or "
        f"--qdrant-path / --qdrant-url) is mistyped: fix it; or the collection was lost: run again with "
        f"--rebuild (PassConfig.rebuild=True) to re-index every page into it. Nothing was written"
    )


def mark_for_rewrite(pages: Iterable[PageState], mark: str) -> list[PageState]:
    """Give each page the pending `mark` and drop its validators (the next fetch is
    unconditional); returns the pages, for one state write."""
    out = []
    for p in pages:
        p.pending_hash = mark
        p.etag = p.last_modified = None
        out.append(p)
    return out


def rewrite_reason(mark: str | None) -> str:
    """Why a page whose text did not change is written all the same (its pending mark)."""
    if mark == REBUILD_MARK:
        return "rebuild: the collection lost its points"
    if mark == MISSING_MARK:
        return "repair: the collection lost some of its points"
    return "an interrupted write is redone"


def points_per_url(store) -> Counter:
    """url -> points the collection holds under it (one lean scroll of the url payloads)."""
    counts: Counter = Counter()
    for batch in store.scroll_payloads(["url"]):
        counts.update(payload.get("url") for _, payload in batch)
    return counts


@dataclass(frozen=True)
class MissingPoints:
    stored: int  # the collection's exact point count
    recorded: int  # what the state records for its settled pages
    pages: tuple[PageState, ...]  # settled pages holding fewer points than their chunk count
    points: int  # how many points those pages lack


def short_pages(pages: Iterable[PageState], per_url: Counter, stored: int, recorded: int) -> MissingPoints:
    """The settled pages holding fewer points than the state records for them."""
    short = [p for p in pages if settled(p) and per_url.get(p.url, 0) < p.chunk_count]
    lack = sum(p.chunk_count - min(per_url.get(p.url, 0), p.chunk_count) for p in short)
    return MissingPoints(stored, recorded, tuple(short), lack)
