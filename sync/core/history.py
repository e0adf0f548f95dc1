"""A page's visit history: the `Visit` record, and its compact JSON codec for the state DB.

The engine stores each page's history (`history_to_json`) and, after a visit that got an
answer with text, appends a `Visit` (`add_visit`, or `history_json_with` on the stored text).
"""

from __future__ import annotations

import json
import math
import re
from typing import NamedTuple, Sequence

from ..errors import StateError

__all__ = [
    "HISTORY_LIMIT",
    "Visit",
    "history_to_json",
    "history_from_json",
    "history_json_with",
    "add_visit",
]

HISTORY_LIMIT = 64
"""Visits kept per page, oldest dropped: enough for a stable estimate, bounded state."""


class _VisitFields(NamedTuple):
    elapsed_s: float
    changed: bool
    announced: bool = False


class Visit(_VisitFields):
    """One visit that got an answer with text (200, or 304 meaning the same text).

    `elapsed_s` is the time since the page's previous such visit; a page's first visit
    has no predecessor and is not recorded as a `Visit`. `changed` is whether the
    extracted text's hash differs from the previous visit's (never ETag churn).
    `announced` is whether a trusted sitemap `lastmod` advance had said the page changed
    (the pass visited it for that): such a change is the feed's catch, not the revisit
    policy's, so `estimate_rate` leaves it out. Failed fetches are not visits: they
    observe nothing about the text.

    A (validated) named tuple rather than a dataclass: every visit of a page's history
    (up to `HISTORY_LIMIT`) is rebuilt from the state at each of its visits, and a tuple
    is built in a fraction of a frozen dataclass's time (`history_from_json`).
    """

    __slots__ = ()

    def __new__(cls, elapsed_s: float, changed: bool, announced: bool = False) -> "Visit":
        if not (math.isfinite(elapsed_s) and elapsed_s >= 0):
            raise ValueError(f"Visit.elapsed_s must be finite and >= 0, got {elapsed_s!r}")
        return tuple.__new__(cls, (elapsed_s, changed, announced))


def _visit_json(v: Visit) -> str:
    """One visit as `history_to_json` writes it: `[elapsed_s,0|1]`, or `[elapsed_s,0|1,1]`
    when announced. A whole number of seconds (what the engine records) is written as an
    integer: shorter, and parsed faster; it reads back as the same float. Written by hand,
    not by `json.dumps`, at a fraction of its cost: the fields are a finite float (whose
    `repr` is what `json` writes) and flags."""
    e = float(v.elapsed_s)
    field = repr(int(e)) if e.is_integer() else repr(e)
    if v.announced:
        return f"[{field},{1 if v.changed else 0},1]"
    return f"[{field},{1 if v.changed else 0}]"


def history_to_json(visits: Sequence[Visit]) -> str:
    """Compact JSON for the state DB: `[[elapsed_s, 0|1], ...]`, oldest first; an
    announced visit has a third field, `[elapsed_s, 0|1, 1]` (older rows read as before)."""
    return "[" + ",".join([_visit_json(v) for v in visits]) + "]"


def history_from_json(s: str | None) -> list[Visit]:
    """Inverse of `history_to_json`; `None` or `''` (no history yet) gives `[]`.

    Raises `StateError` on anything else that is not a list of `[seconds, 0|1]` pairs
    (or `[seconds, 0|1, 0|1]` triples), so a corrupted row is reported rather than
    silently scheduled as a new page. Each item is checked here, as `Visit` would, and
    the tuple built without a second check: this runs once per page visit on the whole
    history.
    """
    if not s:
        return []
    make, inf = tuple.__new__, math.inf
    try:
        raw = json.loads(s)
        if type(raw) is not list:
            raise ValueError("not a list")
        out: list[Visit] = []
        append = out.append
        for item in raw:
            n = len(item) if type(item) is list else 0
            if n == 2:
                elapsed, changed = item
                announced = 0
            elif n == 3:
                elapsed, changed, announced = item
            else:
                raise ValueError(f"bad visit {item!r}")
            kind = type(elapsed)  # bool is not accepted: type(True) is bool, not int
            if not ((kind is int or kind is float) and 0 <= elapsed < inf):  # NaN fails too
                raise ValueError(f"bad elapsed {elapsed!r}")
            if changed not in (0, 1) or announced not in (0, 1):  # also accepts true/false
                raise ValueError(f"bad flag in {item!r}")
            append(make(Visit, (float(elapsed), changed == 1, announced == 1)))
        return out
    except (ValueError, TypeError, OverflowError) as e:
        raise StateError(f"unreadable visit history {s[:80]!r}: {e}") from e


def add_visit(visits: Sequence[Visit], visit: Visit) -> list[Visit]:
    """A new history with `visit` appended, keeping the last `HISTORY_LIMIT` visits."""
    out = [*visits, visit]
    return out[-HISTORY_LIMIT:]


# A history exactly as `history_to_json` writes it when every elapsed time is a whole
# number of seconds below 10^15 (what the engine records; such a float prints as the
# integer it is): items `[s,c]` or `[s,c,1]`, s without leading zeros, c 0 or 1.
_WHOLE_VISIT = r"\[(?:0|[1-9][0-9]{0,14}),[01](?:,1)?\]"
_WHOLE_HISTORY = re.compile(rf"\[(?:{_WHOLE_VISIT}(?:,{_WHOLE_VISIT})*)?\]")


def history_json_with(stored: str | None, visits: Sequence[Visit], visit: Visit) -> str:
    """`history_to_json(add_visit(visits, visit))`, where `visits` is
    `history_from_json(stored)`: the JSON a visit leaves in the state.

    When `stored` is what `history_to_json` writes (whole seconds, as the engine records
    them), the result is `stored` with the visit's item appended and the oldest items
    past `HISTORY_LIMIT` cut from the front, as text: the same string, without writing
    every visit of the history again at each visit of the page."""
    n = len(visits)
    if not (stored and _WHOLE_HISTORY.fullmatch(stored)):
        return history_to_json(add_visit(visits, visit))
    item = _visit_json(visit)
    drop = n + 1 - HISTORY_LIMIT  # the oldest visits add_visit leaves out
    if drop <= 0:
        return f"{stored[:-1]},{item}]" if n else f"[{item}]"
    if drop >= n:
        return f"[{item}]"
    cut = 0
    for _ in range(drop):  # items are separated by "],[" and hold no bracket of their own
        cut = stored.index("],[", cut) + 2
    return f"[{stored[cut:-1]},{item}]"
