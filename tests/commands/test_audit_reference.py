"""The audit's fast scan against a plain reference on random collections.

`reference_audit` is the audit as it was before the scan was tuned: one `StoredPoint` a
point, `chunk_id` and `uuid.uuid5` computed afresh for each. Hypothesis builds small
collections with every kind of damage (foreign payloads, non-string urls, orphans, stale
hashes, old or missing titles, bad or boolean or negative chunk indexes, wrong chunk ids, wrong point ids,
duplicates, gaps, missing or out-of-date `metadata` objects) and a page state over some of their urls; both must report the same
findings, in the same order, through the lean `scroll_payloads` path and the fallback for
a store that only has `scroll`.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sync.commands.audit import AuditReport, _has_gaps_or_dupes, audit_collection
from sync.core.ids import POINT_ID_NAMESPACE, chunk_id
from sync.edges.store import StoredPoint

URLS = [
    "https://d.example/a",
    "https://d.example/b",
    "https://d.example/c",
    "https://d.example/é",
    "https://other.example/x",
]
HASHES = ["h1", "h2"]
TITLES = ["T", "Old T", "", None, 3]  # None: the payload has no title (or the state records none)


@dataclass
class Page:
    url: str
    content_hash: str | None
    chunk_count: int
    indexed: bool
    title: str | None = None


class FakeState:
    def __init__(self, pages: list[Page]):
        self.pages = pages

    def all_pages(self) -> list[Page]:
        return list(self.pages)


class ScrollOnlyStore:
    """A Store with `scroll` only (as written before `scroll_payloads`)."""

    def __init__(self, points: list[StoredPoint]):
        self.points = points
        self.scroll_calls: list[Any] = []

    def scroll(self, *, with_vectors: bool = False, batch: int = 256, payload_fields=None):
        self.scroll_calls.append(payload_fields)
        for p in self.points:
            pl = (
                {k: v for k, v in p.payload.items() if k in payload_fields} if payload_fields is not None else p.payload
            )
            yield StoredPoint(p.id, dict(pl))


class LeanStore(ScrollOnlyStore):
    def scroll_payloads(self, fields, *, batch: int = 1024):
        for i in range(0, len(self.points), batch):
            yield [(p.id, {k: v for k, v in p.payload.items() if k in fields}) for p in self.points[i : i + batch]]


def reference_audit(store, state, *, examples: int = 5, batch: int = 1024) -> AuditReport:
    rep = AuditReport()
    live = {p.url: p for p in state.all_pages() if p.indexed}
    sites = {urlsplit(p.url).netloc.lower() for p in state.all_pages()}
    rep.pages_live = len(live)
    seen: dict[str, dict] = {}
    fields = ["url", "chunk_id", "chunk_index", "content_hash", "title", "fetched_at", "headings", "metadata"]
    for point in store.scroll(batch=batch, payload_fields=fields):
        rep.points_scanned += 1
        pl = point.payload
        url = pl.get("url")
        if not isinstance(url, str):
            rep.note("foreign", 1, {"id": point.id}, examples)
            rep.foreign_ids.append(point.id)
            continue
        page = live.get(url)
        if page is None:
            if sites and urlsplit(url).netloc.lower() not in sites:
                rep.note("foreign", 1, {"id": point.id, "url": url}, examples)
                rep.foreign_ids.append(point.id)
            else:
                rep.note("orphans", 1, {"id": point.id, "url": url}, examples)
                rep.delete_ids.append(point.id)
            continue
        s = seen.setdefault(url, {"indexes": {}, "bad": [], "stale": [], "titles": [], "metadata": 0})
        if pl.get("content_hash") != page.content_hash:
            s["stale"].append(point.id)
            continue
        idx = pl.get("chunk_index")
        cid = pl.get("chunk_id")
        if (
            not isinstance(idx, int)
            or idx < 0
            or cid != chunk_id(url, idx)
            or point.id != str(uuid.uuid5(POINT_ID_NAMESPACE, cid))
        ):
            s["bad"].append(point.id)
            continue
        s["indexes"][idx] = s["indexes"].get(idx, 0) + 1
        if (pl.get("title") or "") != (page.title or ""):
            s["titles"].append(pl.get("title"))
        elif pl.get("metadata") != {
            k: pl[k] for k in ("url", "title", "chunk_id", "chunk_index", "fetched_at", "headings") if k in pl
        }:
            s["metadata"] += 1
    for url, page in live.items():
        s = seen.get(url)
        if s is not None and s["stale"]:
            rep.note("stale", len(s["stale"]), {"url": url, "points": len(s["stale"])}, examples)
            rep.delete_ids.extend(s["stale"])
        current = sum(s["indexes"].values()) if s else 0
        if current < page.chunk_count and not (s and (s["bad"] or _has_gaps_or_dupes(s["indexes"]))):
            rep.note("missing", 1, {"url": url, "points": current, "expected": page.chunk_count}, examples)
            rep.reindex_urls.append(url)
        elif s is not None and (s["bad"] or _has_gaps_or_dupes(s["indexes"]) or current > page.chunk_count):
            rep.note(
                "broken",
                1,
                {"url": url, "points": current, "expected": page.chunk_count, "bad_ids": len(s["bad"])},
                examples,
            )
            rep.reindex_urls.append(url)
        if s is not None and s["titles"]:
            rep.note(
                "stale",
                len(s["titles"]),
                {"url": url, "points": len(s["titles"]), "title": page.title or "", "stored_title": s["titles"][0]},
                examples,
            )
            if url not in rep.reindex_urls:
                rep.reindex_urls.append(url)
        if s is not None and s["metadata"]:
            rep.note("metadata", s["metadata"], {"url": url, "points": s["metadata"]}, examples)
            if url not in rep.reindex_urls:
                rep.metadata_urls.append(url)
    return rep


def findings(rep: AuditReport) -> dict:
    d = rep.to_dict()
    del d["seconds"]
    return {
        **d,
        "delete_ids": rep.delete_ids,
        "foreign_ids": rep.foreign_ids,
        "reindex_urls": rep.reindex_urls,
        "metadata_urls": rep.metadata_urls,
    }


@st.composite
def point(draw) -> StoredPoint:
    url = draw(st.sampled_from([*URLS, None, 7, ["x"]]))
    idx = draw(st.one_of(st.integers(-1, 5), st.sampled_from([None, "1", True, False, 2.0])))
    good_cid = chunk_id(url, idx) if isinstance(url, str) and isinstance(idx, int) and idx >= 0 else None
    cid = draw(st.sampled_from([good_cid, good_cid, good_cid, "wrong_c0", None, 3]))
    if isinstance(cid, str) and draw(st.booleans()):
        pid = str(uuid.uuid5(POINT_ID_NAMESPACE, cid))
    else:
        pid = str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1))))
    payload: dict[str, Any] = {}
    for key, value in (
        ("url", url),
        ("chunk_index", idx),
        ("chunk_id", cid),
        ("content_hash", draw(st.sampled_from([*HASHES, None]))),
        ("title", draw(st.sampled_from(TITLES))),
    ):
        if value is not None or draw(st.booleans()):
            payload[key] = value
    if draw(st.booleans()):
        payload["text"] = "not read by the audit"
    return StoredPoint(pid, with_metadata(draw, payload))


def with_metadata(draw, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload, maybe with a `fetched_at`, and a `metadata` object mostly its own: else
    none, one of an older write (another `fetched_at`) or one that is no object."""
    if draw(st.booleans()):
        payload["fetched_at"] = draw(st.sampled_from(["2026-01-01", "2026-02-01"]))
    own = {k: payload[k] for k in ("url", "title", "chunk_id", "chunk_index", "fetched_at", "headings") if k in payload}
    meta = draw(st.sampled_from(["own", "own", "own", "none", "older", "junk"]))
    if meta == "own":
        payload["metadata"] = own
    elif meta == "older":
        payload["metadata"] = {**own, "fetched_at": "2025-12-31"}
    elif meta == "junk":
        payload["metadata"] = "not an object"
    return payload


@st.composite
def good_page(draw, url: str) -> list[StoredPoint]:
    """A clean generation of one page (most collections are mostly clean)."""
    h = draw(st.sampled_from(HASHES))
    return [
        StoredPoint(
            str(uuid.uuid5(POINT_ID_NAMESPACE, chunk_id(url, i))),
            with_metadata(
                draw, {"url": url, "chunk_id": chunk_id(url, i), "chunk_index": i, "content_hash": h, "title": "T"}
            ),
        )
        for i in range(draw(st.integers(0, 4)))
    ]


@st.composite
def collection(draw) -> tuple[list[StoredPoint], list[Page]]:
    points = [p for url in draw(st.lists(st.sampled_from(URLS), unique=True)) for p in draw(good_page(url))]
    points += draw(st.lists(point(), max_size=25))
    points = draw(st.permutations(points))
    # Ids are unique in a collection: keep the first of any repeat.
    uniq = list({p.id: p for p in reversed(points)}.values())[::-1]
    pages = [
        Page(
            url,
            draw(st.sampled_from([*HASHES, None])),
            draw(st.integers(0, 5)),
            draw(st.booleans()),
            draw(st.sampled_from(["T", "T", "", None])),
        )
        for url in draw(st.lists(st.sampled_from(URLS), unique=True))
    ]
    return uniq, pages


@settings(max_examples=400, deadline=None)
@given(collection(), st.integers(0, 3), st.integers(1, 7))
def test_fast_audit_matches_the_reference(coll, examples, batch):
    points, pages = coll
    want = findings(reference_audit(ScrollOnlyStore(points), FakeState(pages), examples=examples))
    assert findings(audit_collection(LeanStore(points), FakeState(pages), examples=examples, batch=batch)) == want
    assert findings(audit_collection(ScrollOnlyStore(points), FakeState(pages), examples=examples, batch=batch)) == want


def test_the_generator_reaches_every_category():
    # A guard on the test above: its collections must exercise every finding. Any
    # example will do, so the first found is kept as it is (no shrinking phase).
    from hypothesis import Phase, find

    first = settings(max_examples=2000, database=None, phases=[Phase.generate])
    for category in ("orphans", "stale", "broken", "missing", "foreign", "metadata"):
        find(
            collection(),
            lambda c, cat=category: reference_audit(ScrollOnlyStore(c[0]), FakeState(c[1])).counts[cat] > 0,
            settings=first,
        )
    find(
        collection(),
        lambda c: any(
            "stored_title" in e for e in reference_audit(ScrollOnlyStore(c[0]), FakeState(c[1])).examples["stale"]
        ),
        settings=first,
    )
