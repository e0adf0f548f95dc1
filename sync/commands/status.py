"""`pagesync status`: what is tracked, what is due, intervals, last pass (read-only)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from ..errors import StoreHeldError, StoreReadOnlyError
from ..core.freshness import freshness
from ..core.plural import plural
from ..core.points_check import MISSING_MARK, REBUILD_MARK, recorded_chunks
from ..core.lastmod_trust import host_lastmod_trust, lastmod_makes_due
from ..edges.state import GONE
from ..edges.state_protocol import State
from ..edges.store import Store

__all__ = ["collect_status", "render_status", "FAILING_EXAMPLES"]

FAILING_EXAMPLES = 5  # failing pages shown without --pages: enough to see what is wrong, bounded


def _fmt_interval(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    h = seconds / 3600
    return f"{h / 24:.1f}d" if h >= 48 else f"{h:.1f}h"


def collect_status(state: State, store: Store, now: datetime, *, with_pages: bool = False) -> dict[str, Any]:
    # "status always reports": an embedded collection a running pass holds is not counted,
    # and the rest comes from the state (a warning says so).
    try:
        points, held = (store.count() if store.exists() else 0), None
    except StoreHeldError as exc:
        points, held = None, f"{exc} (a pass running?)"
    except StoreReadOnlyError as exc:
        points, held = None, str(exc)
    pages = state.all_pages()
    live = [p for p in pages if p.status != GONE]
    due = state.due_urls(now)  # the same rule a pass uses
    intervals = sorted(p.interval.total_seconds() for p in live if p.interval is not None)
    buckets = Counter(_fmt_interval(s) for s in intervals)
    next_due = min((p.due_at for p in live if p.due_at is not None and p.due_at > now), default=None)
    info: dict[str, Any] = {
        "now": now.isoformat(),
        "collection": store.collection,
        "points": points,
        "pages": dict(Counter(p.status for p in pages)),
        "pages_tracked": len(live),
        "pages_due": len(due),
        # Of those, gone pages a sitemap still lists: revisited in case they come back.
        "pages_due_gone": len({p.url for p in pages if p.status == GONE} & set(due)),
        "pages_pending": sum(1 for p in pages if p.pending_hash is not None),
        "pages_failing": len(failing := [p for p in live if p.failures > 0]),
        # The worst few, so a plain `status` shows what fails and why (--pages lists them all).
        "failing_examples": [
            {"url": p.url, "failures": p.failures, "last_error": p.last_error}
            for p in sorted(failing, key=lambda p: (-p.failures, p.url))[:FAILING_EXAMPLES]
        ],
        "chunks_recorded": sum(p.chunk_count for p in live),
        "next_due_at": next_due.isoformat() if next_due else None,
        # The page least recently visited: how stale the collection may be at worst.
        **{k: v for k, v in freshness(live, len(due), now).items() if k.startswith("oldest_")},
        "interval_min": _fmt_interval(intervals[0]) if intervals else None,
        "interval_median": _fmt_interval(intervals[len(intervals) // 2]) if intervals else None,
        "interval_max": _fmt_interval(intervals[-1]) if intervals else None,
        "intervals": dict(sorted(buckets.items())),
        "last_pass": state.last_run(),
    }
    # Points lost while the state survived (a deleted --qdrant-path, a new server, another
    # --collection): `pagesync run --rebuild` rebuilds them; `audit --fix` repairs too.
    # A missing collection may also be a mistyped --collection or --qdrant-path: status
    # still reports (it is where a user looks first) and names both readings.
    info["warnings"] = []
    if held:
        info["warnings"].append(f"points not counted: {held}; the rest is the state's")
    if info["points"] == 0 and info["chunks_recorded"] > 0:
        recorded = f"the state records {plural(info['chunks_recorded'], 'chunk')}"
        if store.exists():
            info["warnings"].append(
                f"collection {store.collection!r} has no points but {recorded}: it was emptied; re-index with "
                "`pagesync audit --fix` (or `pagesync run --rebuild`, which rebuilds an empty collection on a server)"
            )
        else:
            where = getattr(store, "location", "the store")
            info["warnings"].append(
                f"collection {store.collection!r} was not found in {where} (a mistyped --collection or "
                f"--qdrant-path / --qdrant-url?) but {recorded}: if it was lost, `pagesync run --rebuild` rebuilds it"
            )
    info["warnings"] += _rewrite_warnings(info, pages, store)
    # Per host: how far its sitemap lastmod is believed (advances a visit confirmed).
    info["hosts"] = []
    for host, (adv, conf) in sorted(state.host_trust_counts().items()):
        trust = host_lastmod_trust(adv, conf)
        info["hosts"].append(
            {
                "host": host,
                "lastmod_advances": adv,
                "lastmod_confirmed": conf,
                "lastmod_trust": round(trust, 3),
                "lastmod_followed": lastmod_makes_due(trust),
            }
        )
    if info["last_pass"]:
        info["last_pass"].pop("changes", None)
    if with_pages:
        info["page_list"] = [
            {
                "url": p.url,
                "status": p.status,
                "chunks": p.chunk_count,
                "interval": _fmt_interval(p.interval.total_seconds() if p.interval else None),
                "due_at": p.due_at.isoformat() if p.due_at else None,
                "failures": p.failures,
                "last_error": p.last_error,
            }
            for p in pages
        ]
    return info


def _rewrite_warnings(info: dict[str, Any], pages, store: Store) -> list[str]:
    """Points the collection lacks though it is not empty (some pages' points deleted),
    and pages a rebuild or repair marked that no pass has written yet (one cut short)."""
    out = []
    settled = recorded_chunks(pages)
    info["points_missing"] = max(0, settled - info["points"]) if info["points"] else 0
    if info["points_missing"]:
        out.append(
            f"collection {store.collection!r} holds {plural(info['points'], 'point')} but the state records "
            f"{plural(settled, 'chunk')} for pages written in full: {plural(info['points_missing'], 'point')} "
            "missing; `pagesync audit --fix` rewrites those pages (a pass does too once it counts them)"
        )
    marks = Counter(p.pending_hash for p in pages if p.pending_hash in (REBUILD_MARK, MISSING_MARK))
    if marks[REBUILD_MARK]:
        way = "`pagesync run --rebuild` finishes it" if info["points"] == 0 else "the next `pagesync run` writes them"
        out.append(
            f"a rebuild of the collection is not finished: {plural(marks[REBUILD_MARK], 'page')} not written yet; {way}"
        )
    if marks[MISSING_MARK]:
        out.append(
            f"{plural(marks[MISSING_MARK], 'page')} lacking points in the collection: the next "
            "`pagesync run` rewrites them"
        )
    return out


def _pages_line(info: dict[str, Any]) -> str:
    """`pages: 10 tracked (8 live, 2 new); 2 gone (no points); 12 in the state`: the tracked
    pages' statuses add up to the tracked count, and gone pages are counted apart."""
    by_status = dict(info["pages"])
    gone = by_status.pop(GONE, 0)
    parts = ", ".join(f"{v} {k}" for k, v in sorted(by_status.items()))
    line = f"pages: {info['pages_tracked']} tracked" + (f" ({parts})" if parts else "")
    if gone:
        line += f"; {gone} gone (no points); {info['pages_tracked'] + gone} in the state"
    return line


# What the last pass's sitemaps said by lastmod (the run report's lastmod_state), when the
# revisit policy alone decides; "unusable": a report from before lastmod_state existed.
_LASTMOD_SAID = {
    "none": "no URL has one",
    "same": "the same stamp on every URL (ignored)",
    "unusable": "none, or the same stamp on every URL",
}


def _failing_lines(info: dict[str, Any]) -> list[str]:
    """The failing pages' examples (most failures first) with their last error, and how
    many more there are; "see status --pages" only when the page list is not shown anyway."""
    examples = info.get("failing_examples") or []
    if not examples:
        return []
    lines = ["failing pages (most failures first):"]
    lines += [f"  {p['url']}  [{plural(p['failures'], 'failure')}: {p['last_error']}]" for p in examples]
    more = info["pages_failing"] - len(examples)
    if more > 0:
        lines.append(f"  {plural(more, 'more failing page')}" + ("" if "page_list" in info else ": see status --pages"))
    return lines


def _due_gone(info: dict[str, Any]) -> str:
    n = info.get("pages_due_gone") or 0
    return f" (of them {n} gone but still listed, looked at again in case they return)" if n else ""


def _when(stamp: str | None) -> str:
    """An ISO stamp to the second, UTC as Z (the JSON keeps it whole)."""
    if not stamp:
        return "-"
    try:
        dt = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    return dt.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def render_status(info: dict[str, Any]) -> str:
    lines = [f"warning: {w}" for w in info.get("warnings", [])]
    lines += [
        f"collection {info['collection']}: "
        f"{'points not counted' if info['points'] is None else plural(info['points'], 'point')}; "
        f"state records {plural(info['chunks_recorded'], 'chunk')}",
        _pages_line(info),
        f"due now: {info['pages_due']}{_due_gone(info)}   pending writes: {info['pages_pending']}   "
        f"failing: {info['pages_failing']}",
        f"next due: {_when(info['next_due_at'])}",
        f"revisit intervals: min {info['interval_min'] or '-'}, median {info['interval_median'] or '-'}, max {info['interval_max'] or '-'}",
    ]
    lines += _failing_lines(info)
    lp = info.get("last_pass")
    if lp:
        lines.append(
            f"last pass: {lp['finished_at']} (clock {lp.get('now', '-')}): fetched {lp['pages_fetched']}, "
            f"added {lp['pages_added']}, changed {lp['pages_changed']}, removed {lp['pages_removed']}, "
            f"failed {lp['pages_failed']}, chunks embedded {lp['chunks_embedded']}, reused {lp.get('chunks_reused', 0)}"
        )
        said = _LASTMOD_SAID.get(lp.get("lastmod_state") or ("unusable" if lp.get("lastmod_trusted") is False else ""))
        if said and lp.get("policy") != "uniform":
            lines.append(
                f"sitemap lastmod: {said} at the last pass, so the revisit policy alone decides; without "
                "a usable lastmod, --policy uniform with a --revisit-interval measured better than the "
                "default (README, Measured)"
            )
    else:
        lines.append("last pass: none")
    for h in info.get("hosts", []):
        lines.append(
            f"host {h['host']}: {plural(h['lastmod_advances'], 'sitemap lastmod advance')}, {h['lastmod_confirmed']} "
            f"confirmed by a text change: trust {h['lastmod_trust']:.2f}, "
            + ("advances make a page due now" if h["lastmod_followed"] else "advances not followed")
        )
    if lp:  # --policy deploys: each host's deploys and change feed (`sync.core.deploys`)
        from ..core.deploys import schedule_lines

        lines += schedule_lines(lp.get("host_schedule"))
    for p in info.get("page_list", []):
        lines.append(
            f"  {p['status']:<5} {p['interval']:>6}  due {p['due_at'] or '-':<32} "
            f"{p['chunks']:>4} chunk{'' if p['chunks'] == 1 else 's'}  {p['url']}"  # aligned: not plural()
            + (f"  [{plural(p['failures'], 'failure')}: {p['last_error']}]" if p["failures"] else "")
        )
    return "\n".join(lines)
