"""The product's property, an incremental collection equal to a fresh full index of the site:
comparing the two (`comparable`, `assert_equals_fresh`) and the state machine of site edits
that checks it after every pass (`SiteEdits`, run by tests/integration/test_property.py)."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from chunking.split import embedded_text
from demo.site_server import Site, SiteServer
from tests.helpers import Harness, page_html, para, without_fetched_at

PAGES = [f"/doc{i}.html" for i in range(6)]


def comparable(points: dict[str, dict]) -> dict[str, dict]:
    """Points minus `fetched_at` (when a page was last written differs by design)."""
    return {pid: without_fetched_at(p) for pid, p in points.items()}


class CloseVector(list):
    """A vector equal to another when every component is within 1e-5.

    Stores keep float32 and some normalise cosine vectors on write (qdrant-client's local
    mode does), so the same vector can differ in the last bits across stores; rounding
    would still split values that straddle a rounding boundary. A wrong reused vector
    differs by far more than that in nearly every component.
    """

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, list) and len(self) == len(other) and all(abs(a - b) <= 1e-5 for a, b in zip(self, other))
        )

    def __ne__(self, other: object) -> bool:
        return not self == other


def comparable_with_vectors(h: Harness) -> dict[str, dict]:
    """`comparable` points of a harness's collection, each with its vector under "vector"."""
    points, vectors = h.points_and_vectors()
    return {pid: {**p, "vector": CloseVector(vectors[pid])} for pid, p in comparable(points).items()}


class SiteEdits(RuleBasedStateMachine):
    """Random site edits, each followed by an incremental pass (`sync`) checked against a fresh
    full index of the site as it is then (tests/integration/test_property.py states the property)."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pagesync-prop-"))
        self.site = Site()
        self.server = SiteServer(self.site).__enter__()
        self.site.server = self.server  # type: ignore[attr-defined]
        self.h = Harness(self.site, self.tmp / "incremental")
        self.clock = 1_700_000_000.0
        self.content: dict[str, list[str]] = {}  # path -> paragraphs (live pages)
        self.version = 0
        self.fresh_runs = 0

    def teardown(self) -> None:
        self.server.__exit__(None, None, None)

    # -- site edits ---------------------------------------------------------------------
    def _publish(self, path: str, paras: list[str], nav: str = "a", **kw) -> None:
        self.clock += 10  # every edit gets a later mtime, hence a later sitemap lastmod
        self.content[path] = paras
        self.site.set(
            path,
            page_html(path.strip("/"), paras, nav=["Guide", f"Nav {nav}"], footer=f"© {nav}"),
            mtime=self.clock,
            **kw,
        )

    def _new_para(self) -> str:
        self.version += 1
        return para(f"v{self.version}", 70)

    @initialize(n=st.integers(1, 4), sections=st.integers(1, 4))
    def start(self, n: int, sections: int) -> None:
        for path in PAGES[:n]:
            self._publish(path, [self._new_para() for _ in range(sections)])
        self.sync()

    @rule(data=st.data())
    def add_page(self, data) -> None:
        free = [p for p in PAGES if p not in self.content]
        if free:
            self._publish(
                data.draw(st.sampled_from(free)), [self._new_para() for _ in range(data.draw(st.integers(1, 4)))]
            )

    @precondition(lambda self: self.content)
    @rule(data=st.data())
    def edit_section(self, data) -> None:
        path = data.draw(st.sampled_from(sorted(self.content)))
        paras = list(self.content[path])
        paras[data.draw(st.integers(0, len(paras) - 1))] = self._new_para()
        self._publish(path, paras)

    @precondition(lambda self: any(len(p) > 1 for p in self.content.values()))
    @rule(data=st.data())
    def shrink(self, data) -> None:
        path = data.draw(st.sampled_from(sorted(p for p, v in self.content.items() if len(v) > 1)))
        self._publish(path, self.content[path][:1])

    @precondition(lambda self: self.content)
    @rule(data=st.data(), extra=st.integers(1, 4))
    def grow(self, data, extra: int) -> None:
        path = data.draw(st.sampled_from(sorted(self.content)))
        self._publish(path, self.content[path] + [self._new_para() for _ in range(extra)])

    @precondition(lambda self: self.content)
    @rule(data=st.data())
    def nav_only(self, data) -> None:
        path = data.draw(st.sampled_from(sorted(self.content)))
        self.version += 1
        self._publish(path, self.content[path], nav=str(self.version))

    @precondition(lambda self: self.content)
    @rule(data=st.data(), how=st.sampled_from(["404", "410", "unlisted"]))
    def delete(self, data, how: str) -> None:
        path = data.draw(st.sampled_from(sorted(self.content)))
        del self.content[path]
        if how == "404":
            self.site.remove(path)
        elif how == "410":
            self.site.gone(path)
        else:  # still served, no longer in the sitemap
            self.clock += 10
            self.site.resources[path].in_sitemap = False

    @precondition(lambda self: self.content and len(self.content) < len(PAGES))
    @rule(data=st.data(), how=st.sampled_from(["301", "301 still listed", "404"]))
    def move(self, data, how: str) -> None:
        """A page's text moves to a free URL (its title, which names the URL, changes)."""
        src = data.draw(st.sampled_from(sorted(self.content)))
        dst = data.draw(st.sampled_from([p for p in PAGES if p not in self.content]))
        self._publish(dst, self.content.pop(src))
        if how == "404":
            self.site.remove(src)
        else:
            self.site.redirect(src, dst)
            self.site.resources[src].in_sitemap = how == "301 still listed"

    # -- passes -------------------------------------------------------------------------
    @rule()
    def sync(self) -> None:
        # The mass-deletion guard deliberately refuses some of these sequences (a site losing
        # most of its pages at once); it has tests of its own. Here every edit is genuine.
        # --full: every known page is visited (conditionally), so the property is about the
        # write path alone; which pages a pass *chooses* to visit is the scheduler's business
        # (a learned policy may rightly wait), measured by the freshness benchmark.
        before: dict[str, set[str]] = {}  # url -> its texts before the pass
        for p in self.h.points().values():
            before.setdefault(p["url"], set()).add(embedded_text(p["text"], p["headings"]))
        rep = self.h.run(advance=timedelta(minutes=30), allow_mass_delete=True, full=True)
        assert rep.pages_failed == 0, rep.errors
        assert rep.chunks_written == rep.chunks_embedded + rep.chunks_reused
        incremental = comparable_with_vectors(self.h)
        # Reuse sources: a written page's own old points and the points of pages that left.
        written = {c["url"] for c in rep.changes if c["action"] in ("added", "changed")}
        after_urls = {p["url"] for p in incremental.values()}
        sources = set().union(*(t for u, t in before.items() if u in written or u not in after_urls))
        new_texts = {
            embedded_text(p["text"], p["headings"]) for p in incremental.values() if p["url"] in written
        } - sources
        assert rep.chunks_embedded == len(new_texts), (rep.chunks_embedded, sorted(new_texts))

        self.fresh_runs += 1
        fresh = Harness(self.site, self.tmp / f"fresh{self.fresh_runs}", stamp_site=False)
        fresh.now = self.h.now
        frep = fresh.run()
        assert frep.pages_failed == 0, frep.errors
        expected = comparable_with_vectors(fresh)
        assert incremental == expected, _diff(incremental, expected)
        assert {p["url"] for p in expected.values()} <= {self.server.url(p) for p in self.content}

        again = self.h.run(full=True, advance=timedelta(minutes=1), allow_mass_delete=True)
        assert again.chunks_embedded == 0 and again.chunks_written == 0 and again.chunks_deleted == 0
        assert again.chunks_reused == 0
        assert again.pages_changed == again.pages_added == again.pages_removed == 0


def _diff(a: dict, b: dict) -> str:
    """Which chunks differ between two `comparable_with_vectors` collections (an assertion's message)."""
    only_a = sorted({a[k]["chunk_id"] for k in a.keys() - b.keys()})
    only_b = sorted({b[k]["chunk_id"] for k in b.keys() - a.keys()})
    differ = sorted(a[k]["chunk_id"] for k in a.keys() & b.keys() if a[k] != b[k])
    return f"only incremental: {only_a}\nonly fresh: {only_b}\npayload or vector differs: {differ}"


def assert_equals_fresh(h: Harness, name: str = "fresh") -> None:
    """The harness's collection equals a fresh full index (into `h.tmp / name`) of the site now."""
    fresh = Harness(h.site, h.tmp / name, stamp_site=False)
    fresh.now = h.now
    frep = fresh.run()
    assert frep.pages_failed == 0, frep.errors
    inc, exp = comparable_with_vectors(h), comparable_with_vectors(fresh)
    assert inc == exp, _diff(inc, exp)
