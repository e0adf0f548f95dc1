"""The pure ranking rules of a hybrid search's candidates (best first, `(score, payload)`).

A question ranks guides before API references (`guides_first`): a reference page, made of
generated API entries (`chunking.extract.page_kind_of`), names every parameter a question may use,
so the embedding and BM25 both find it close to any question on its topic, above the guide that
answers. Each reference chunk's fused score is weighed by `REFERENCE_WEIGHT` before its pages are
ranked; a name (`query_kind`) is ranked by BM25 alone and not weighed, since a reference is where a
name is defined. A point written before it was told has no `page_kind` and counts as a guide.

A first hit both searches rank first (`agreed_first`) keeps its place: it is not weighed, and no
lifted page passes it (`sync.commands.read.page_ranked`).

A name's BM25 hits that hold it as typed come before those that only share its words
(`verbatim_first`): BM25 reads `--max-pages` and a Python field `max_pages` as the same two words.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from chunking.extract import REFERENCE

__all__ = ["REFERENCE_WEIGHT", "guides_first", "agreed_first", "verbatim_first"]

# The share of its fused score a reference chunk keeps against a question. On the bench's
# question sets (bench/retrieval.py) 0.7 and 0.8 gave the same first hits and 0.9 fewer:
# the higher of the two, so a reference that clearly answers best still comes first.
REFERENCE_WEIGHT = 0.8


def agreed_first(found: Sequence[tuple[float, Mapping[str, Any]]], agreed: float | None) -> bool:
    """Whether the first of `found` is scored `agreed` (both searches rank it first); scores
    are float32, hence a relative margin. `agreed` None: no hit is."""
    return agreed is not None and bool(found) and found[0][0] >= agreed * (1 - 1e-6)


def guides_first(
    found: Sequence[tuple[float, Mapping[str, Any]]],
    weight: float = REFERENCE_WEIGHT,
    agreed: float | None = None,
) -> list[tuple[float, Mapping[str, Any]]]:
    """`found` (score, payload; best first) with each chunk of a reference page scored
    `weight` times its own, best first again (stable: equal scores keep their order). A first
    hit scored `agreed` (both searches rank it first) keeps its score: they agree on it."""
    held = agreed_first(found, agreed)
    out = [
        (score * weight if payload.get("page_kind") == REFERENCE and not (held and i == 0) else score, payload)
        for i, (score, payload) in enumerate(found)
    ]
    out.sort(key=lambda x: -x[0])
    return out


def verbatim_first(
    found: Sequence[tuple[float, Mapping[str, Any]]], name: str
) -> list[tuple[float, Mapping[str, Any]]]:
    """`found` (score, payload; best first) with the hits whose text or headings hold `name`
    exactly as given (case and punctuation kept) before the others, each part in its order."""

    def holds(payload: Mapping[str, Any]) -> bool:
        headings = payload.get("headings") or ()
        return name in str(payload.get("text", "")) or any(name in str(h) for h in headings)

    marked = [(holds(hit[1]), hit) for hit in found]
    return [hit for held, hit in marked if held] + [hit for held, hit in marked if not held]
