"""Bulk edits: a host whose visits find far more changed pages than their own rates predict.

A bulk edit (a rename, a reworded admonition, a docs-wide fix) changes many pages at once,
pages whose histories say they hardly ever change. The rate estimates cannot see it coming,
and a budgeted pass then takes a whole revisit cycle to find every page it touched, while
the pages it did find look faster-changing than they are. `update_bulk_state` (a one-sided
Poisson test) notices one from the passes' own visits; for `BULK_HOLD_S` the host's pages not
visited since get a priority bonus (`BulkEdit.bonus`, learned per URL section) within
`--max-fetches`, and the changes found on them are put down to the edit, not to their rates.
The engine keeps this state per host in its run report (`bulk_edits`), so nothing new is
stored per page. Off by default (`PassConfig.bulk_edits`, `--bulk-edits`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

__all__ = [
    "BULK_WINDOW_S",
    "BULK_ALPHA",
    "BULK_MIN_CHANGES",
    "BULK_HOLD_S",
    "BULK_SECTION_PRIOR",
    "poisson_tail",
    "PassEvidence",
    "pass_evidence",
    "BulkEdit",
    "BulkState",
    "url_section",
    "update_bulk_state",
    "bulk_state_to_json",
    "bulk_state_from_json",
]

_DAY_S = 86400.0

BULK_WINDOW_S = 2 * _DAY_S
"""Evidence older than this (pass clock) is forgotten."""
BULK_ALPHA = 0.01
"""One-sided significance of the excess of changes: P(X >= x) under the pages' own rates."""
BULK_MIN_CHANGES = 3
"""A bulk edit needs at least this many changed visits in the window."""
BULK_HOLD_S = 14 * _DAY_S
"""How long after its detection a bulk edit raises its pages' priority: about a whole
revisit cycle of a site under a tight budget (measured on the FastAPI replay: 7 d caught
less of the edit, 30 d no more than 14 d)."""


def poisson_tail(k: int, mu: float) -> float:
    """P(X >= k) for X ~ Poisson(mu), in [0, 1].

    The test statistic of `update_bulk_state`: the number of changed visits, whose exact
    law under "no bulk edit" is Poisson-binomial with the visits' predicted P(change) p_i.
    The Poisson law of the same mean Σ p_i is more spread out (variance Σ p_i against
    Σ p_i (1 - p_i)), so its upper tail is the larger one (Hoeffding 1956 for k >= mean
    + 1): using it errs on the side of not declaring a bulk edit.
    """
    if not (math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be finite and >= 0, got {mu!r}")
    if k <= 0:
        return 1.0
    if mu == 0.0:
        return 0.0
    if k <= mu:  # the tail is at least ~1/2: 1 - P(X < k), summed upwards
        term = math.exp(-mu)
        below = 0.0
        for i in range(k):
            below += term
            term *= mu / (i + 1)
        return min(1.0, max(0.0, 1.0 - below))
    term = math.exp(-mu + k * math.log(mu) - math.lgamma(k + 1))  # P(X = k), terms now shrink
    total, i = 0.0, k
    while term > 1e-17 * total or total == 0.0:
        total += term
        i += 1
        term *= mu / i
        if term == 0.0:
            break
    return min(1.0, total)


@dataclass(frozen=True)
class PassEvidence:
    """One pass's visits to one host that tell about bulk edits: how many there were, how
    many found changed text, and how many changes the pages' own rates predicted (the sum
    of each visit's P(change) = 1 - e^(-λt), λ estimated before the visit)."""

    at_s: float
    visits: int
    changes: int
    expected: float

    def __post_init__(self) -> None:
        if not (0 <= self.changes <= self.visits and 0 <= self.expected <= self.visits + 1e-9):
            raise ValueError(f"inconsistent evidence {self!r}")


def pass_evidence(at_s: float, observations: Sequence[tuple[float, bool]]) -> PassEvidence:
    """A pass's evidence from its (predicted P(change), changed) pairs."""
    return PassEvidence(
        at_s, len(observations), sum(1 for _, ch in observations if ch), math.fsum(p for p, _ in observations)
    )


BULK_SECTION_PRIOR = 2.0
"""Pseudo-visits at the host's share behind each section's share of a bulk edit."""


def url_section(url: str) -> str:
    """The first segment of the URL's path when more follow ('' for a page at the top
    level, `/features/` or `/index.html`): docs sites lay their sections out this way, and a
    bulk edit often covers some sections and not others."""
    path = url.split("://", 1)[-1].partition("/")[2].split("?", 1)[0].split("#", 1)[0]
    segments = [seg for seg in path.split("/") if seg]
    return segments[0] if len(segments) >= 2 else ""


@dataclass(frozen=True)
class BulkEdit:
    """A bulk edit under way on a host, detected at `since_s`.

    Pages last visited before `since_s` ("suspects") may carry it; each had a share `share`
    of being changed by it. Until `until_s` a suspect's priority gets `bonus`, and a
    change found on one is put down to the edit rather than to the page's own rate.
    `sections` counts the suspects visited since, per `url_section`: (section, visited,
    changed), so the edit's share is learned per section as its pages are seen.
    """

    since_s: float
    until_s: float
    share: float
    sections: tuple[tuple[str, int, int], ...] = ()

    def share_for(self, section: str) -> float:
        """The section's share of changed suspects so far, smoothed towards the host's:
        (changed + k·share) / (visited + k), k = `BULK_SECTION_PRIOR`."""
        for name, visited, changed in self.sections:
            if name == section:
                k = BULK_SECTION_PRIOR
                return (changed + k * self.share) / (visited + k)
        return self.share

    def with_visits(self, seen: Sequence[tuple[str, bool]]) -> "BulkEdit":
        """This edit with suspect visits (section, changed) added to its section counts."""
        counts = {name: [v, c] for name, v, c in self.sections}
        for section, changed in seen:
            cell = counts.setdefault(section, [0, 0])
            cell[0] += 1
            cell[1] += int(bool(changed))
        return replace(self, sections=tuple(sorted((n, v, c) for n, (v, c) in counts.items())))

    def active(self, now_s: float) -> bool:
        return now_s < self.until_s

    def suspect(self, last_visit_s: float | None, now_s: float) -> bool:
        """Whether a page last visited at `last_visit_s` (None: never) may carry the edit."""
        return self.active(now_s) and last_visit_s is not None and last_visit_s < self.since_s

    def bonus(self, last_visit_s: float | None, now_s: float, section: str = "") -> float:
        """Seconds added to a suspect's priority: share x (since - last visit), 0 otherwise;
        the share is its section's (`share_for`).

        Why this: Olston & Pandey's utility U = t·S'(t) - S(t) of a slowly changing page
        that also took a step change with probability q at time B, b = B - (last visit)
        after its last visit, is its Poisson utility plus q·b (to first order in λt). So a
        suspect ranks by its own utility plus the edit's, in the same unit, and the
        pages longest unvisited before the edit go first.
        """
        if last_visit_s is None or not self.suspect(last_visit_s, now_s):  # never visited: no suspect
            return 0.0
        return self.share_for(section) * (self.since_s - float(last_visit_s))


@dataclass(frozen=True)
class BulkState:
    """What the engine keeps per host between passes: the evidence since the last
    detection (within `BULK_WINDOW_S`), and the bulk edit under way, if any."""

    evidence: tuple[PassEvidence, ...] = ()
    edit: BulkEdit | None = None


def update_bulk_state(
    state: BulkState,
    new: PassEvidence | None,
    now_s: float,
    *,
    window_s: float = BULK_WINDOW_S,
    alpha: float = BULK_ALPHA,
    min_changes: int = BULK_MIN_CHANGES,
    hold_s: float = BULK_HOLD_S,
) -> BulkState:
    """The host's state after a pass at `now_s` that gathered `new` (None: no evidence).

    Evidence is the visits that no trusted `lastmod` advance or repair caused and that
    were not to a current edit's suspects (the caller filters; those expect changes).
    Over the passes in the window: with x changed visits of n and m = Σ P(change)
    predicted, a bulk edit is declared when x >= `min_changes` and the one-sided
    P(X >= x) under Poisson(m) is at most `alpha` (`poisson_tail`). Its `since_s` is now,
    so every page not visited in this pass is a suspect (a superset of those last visited
    before the edit began: only the few visited between the edit and now are visited
    needlessly); `share` is the excess (x - m) / n; it lasts `hold_s`. A detection
    consumes its evidence, so the same changes never declare two edits; a new detection
    while one is under way replaces it (its suspects are a superset). An expired edit
    is dropped.
    """
    if not (window_s > 0 and 0 < alpha < 1 and min_changes >= 1 and hold_s > 0):
        raise ValueError("need window_s > 0, 0 < alpha < 1, min_changes >= 1, hold_s > 0")
    evidence = [e for e in state.evidence if 0 <= now_s - e.at_s < window_s and e.at_s != now_s]
    if new is not None and new.visits:
        evidence.append(new)
    edit = state.edit if state.edit is not None and state.edit.active(now_s) else None
    n = sum(e.visits for e in evidence)
    x = sum(e.changes for e in evidence)
    m = math.fsum(e.expected for e in evidence)
    if n and x >= min_changes and x > m and poisson_tail(x, m) <= alpha:
        share = min(1.0, (x - m) / n)
        return BulkState((), BulkEdit(since_s=now_s, until_s=now_s + hold_s, share=share))
    return BulkState(tuple(evidence), edit)


def bulk_state_to_json(state: BulkState) -> dict:
    """A JSON-ready form for the run report (epoch seconds; the evidence as
    `[at_s, visits, changes, expected]` rows)."""
    out: dict = {"evidence": [[e.at_s, e.visits, e.changes, round(e.expected, 6)] for e in state.evidence]}
    if state.edit is not None:
        out.update(
            since_s=state.edit.since_s,
            until_s=state.edit.until_s,
            share=round(state.edit.share, 6),
            sections={name: [v, c] for name, v, c in state.edit.sections},
        )
    return out


def bulk_state_from_json(d: object) -> BulkState:
    """Inverse of `bulk_state_to_json`; anything unreadable is an empty state (the
    state is a scheduling hint: losing it costs only a slower reaction)."""
    try:
        if not isinstance(d, dict):
            return BulkState()
        evidence = tuple(PassEvidence(float(a), int(v), int(c), float(m)) for a, v, c, m in d.get("evidence", ()))
        edit = None
        if "since_s" in d:
            sections = tuple(sorted((str(name), int(v), int(c)) for name, (v, c) in d.get("sections", {}).items()))
            if any(not 0 <= c <= v for _, v, c in sections):
                raise ValueError("bad section counts")
            edit = BulkEdit(float(d["since_s"]), float(d["until_s"]), float(d["share"]), sections)
            if not (0.0 <= edit.share <= 1.0 and all(map(math.isfinite, (edit.since_s, edit.until_s)))):
                edit = None
        return BulkState(evidence, edit)
    except (TypeError, ValueError, KeyError):
        return BulkState()
