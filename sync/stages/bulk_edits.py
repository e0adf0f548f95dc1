"""Bulk edits: a template or site-wide change told from a page's own edits, for the plan.

A host whose pages change far beyond what their rates predict is having a bulk edit; while
it is under way, the pages not seen since it began are visited sooner (`suspects`), and
their changes are put down to the edit rather than to their own rates (`observe`). The
state per host rides in the run report (`bulk_edits`).
"""

from __future__ import annotations

from datetime import datetime

from ..core.page import LIVE, PageState
from ..core.bulk_edits import (
    BulkEdit,
    BulkState,
    bulk_state_from_json,
    bulk_state_to_json,
    pass_evidence,
    update_bulk_state,
    url_section,
)
from ..core.change_rate import change_probability, estimate_rate
from ..core.history import Visit
from ..core.policies import Policy
from ..core.scope import url_host
from ..edges.state_protocol import State
from ..core.planning import ChangeEvent

__all__ = ["BulkEdits"]


class BulkEdits:
    """The bulk-edit watch of a pass: the hosts' states from the last run report (`last`), this
    pass's evidence, and the suspects of an edit under way."""

    def __init__(self, last: object, *, now: datetime, repair: bool):
        self.now, self.repair = now, repair
        self.bulk: dict[str, BulkState] = (
            {str(h): bulk_state_from_json(v) for h, v in last.items()} if isinstance(last, dict) else {}
        )
        self.observed: dict[str, list[tuple[float, bool]]] = {}  # host -> (predicted P(change), changed)
        self.suspects_seen: dict[str, list[tuple[str, bool]]] = {}  # host -> (section, changed)

    def edit_for(self, url: str) -> BulkEdit | None:
        """The bulk edit under way on the url's host, or None."""
        if not self.bulk:
            return None
        st = self.bulk.get(url_host(url)[1])
        edit = st.edit if st is not None else None
        return edit if edit is not None and edit.active(self.now.timestamp()) else None

    def suspects(
        self, visits: list[ChangeEvent], known: dict[str, PageState], sitemap_now: dict[str, str | None], state: State
    ) -> list[ChangeEvent]:
        """Pages a bulk edit under way may have changed (last visited before it was
        noticed) that are not visits yet: candidates of this pass, within --max-fetches.

        Reads every page of the state, but only while a bulk edit is under way on a host
        (`BULK_HOLD_S` after its detection at most)."""
        now_s = self.now.timestamp()
        if not any(st.edit is not None and st.edit.active(now_s) for st in self.bulk.values()):
            return []
        listed = {ev.url for ev in visits}
        out = []
        for page in state.all_pages():
            if page.url in listed or page.status != LIVE or page.pending_hash is not None:
                continue
            if page.failures and page.due_at is not None and page.due_at > self.now:
                continue  # backing off after a failure
            if page.url not in sitemap_now and page.source != "url":
                continue
            edit = self.edit_for(page.url)
            last = page.last_fetched_at.timestamp() if page.last_fetched_at is not None else None
            if edit is not None and edit.suspect(last, now_s):
                known[page.url] = page
                out.append(ChangeEvent(page.url, "bulk"))
        return out

    def update(self) -> dict:
        """Each host's bulk-edit state after this pass, for the run report (a repair pass
        or a pass without evidence carries it on)."""
        now_s = self.now.timestamp()
        hosts = set(self.bulk) | set(self.observed)
        out = {}
        for host in sorted(hosts):
            obs = self.observed.get(host)
            st = self.bulk.get(host, BulkState())
            if st.edit is not None and host in self.suspects_seen:
                st = BulkState(st.evidence, st.edit.with_visits(self.suspects_seen[host]))
            st = update_bulk_state(st, pass_evidence(now_s, obs) if obs else None, now_s)
            if st.evidence or st.edit is not None:
                out[host] = bulk_state_to_json(st)
        return out

    def observe(
        self, page: PageState, visits: list[Visit], elapsed: float, changed: bool, *, policy: Policy, reason: str | None
    ) -> bool:
        """Count this visit as bulk-edit evidence, or put its change down to the edit under
        way. Returns True when the change is the edit's: a suspect (last visited before the
        edit was noticed) found changed while the edit is under way.

        Evidence is every other visit with text that no trusted lastmod advance, pending
        write or repair pass caused (those expect a change; `reason`: why the plan visits
        it): its predicted P(change) from the page's rate under `policy` as it stood before
        the visit, and whether the text changed."""
        assert page.last_fetched_at is not None
        edit = self.edit_for(page.url)
        host = url_host(page.url)[1]
        if edit is not None and edit.suspect(page.last_fetched_at.timestamp(), self.now.timestamp()):
            self.suspects_seen.setdefault(host, []).append((url_section(page.url), changed))
            return changed
        if self.repair or reason in ("lastmod", "pending", "rebuild"):
            return False
        rate_of = getattr(policy, "rate", None) or estimate_rate  # change-rate policies learn a rate
        self.observed.setdefault(host, []).append((change_probability(rate_of(visits), elapsed), changed))
        return False
