"""The crawl's property: after any sequence of faults and edits, two clean passes give a fresh crawl's index.

A small site (an index, 3 hubs, leaves) is crawled pass after pass while leaves are edited,
unlinked (still 200), linked again, added, deleted, moved (301) within the crawl's directory or
out of it and back, and hubs (or the index) answer badly
for a while: a maintenance stub, an empty 200, `text/plain`, a 404, a 500, a 302 to a login
page. Then the site is healthy again: after two clean passes (every page read, a revisit
interval apart) the collection equals a fresh crawl of the site as it is (same points,
payloads and texts).
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demo.site_server import Site, SiteServer, render_page
from sync.core.unlinked import CONFIRM_CAP
from tests.helpers import Harness, para, without_fetched_at

pytestmark = [pytest.mark.slow, pytest.mark.integration]

HUBS = 3
LEAVES = 8  # leaf ids a sequence may use; the first 2 per hub exist at the start
FAULTS = ("stub", "empty", "text/plain", "404", "500", "302 to a login page")
STUB = "<!doctype html><html><head><title>Maintenance</title></head><body><p>Down for maintenance.</p></body></html>"


class Model:
    """The site as the sequence left it: each hub's leaves, each leaf's version (None: deleted),
    and the pages answering badly (path -> fault)."""

    def __init__(self) -> None:
        self.links = {h: [f"{h}-{i}" for i in range(2)] for h in range(HUBS)}
        self.leaves: dict[str, int | None] = {leaf: 0 for ls in self.links.values() for leaf in ls}
        self.faults: dict[str, str] = {}
        self.moved: dict[str, str] = {}  # leaf -> "in" (301 within /docs/) or "out" (301 to /private/)

    def build(self, site: Site) -> None:
        hubs = "".join(f'<li><a href="/docs/h{h}/index.html">Hub {h}</a></li>' for h in range(HUBS))
        site.set("/docs/index.html", render_page("Docs", f"<p>{para('the docs index', 30)}</p><ul>{hubs}</ul>", nav=[]))
        for h, leaves in self.links.items():
            items = "".join(
                f'<li><a href="/docs/h{leaf.split("-")[0]}/{leaf}.html">Leaf {leaf}</a></li>' for leaf in leaves
            )
            site.set(
                f"/docs/h{h}/index.html",
                render_page(f"Hub {h}", f"<p>{para(f'hub {h}', 30)}</p><ul>{items}</ul>", nav=[]),
            )
        for leaf, version in self.leaves.items():
            path = f"/docs/h{leaf.split('-')[0]}/{leaf}.html"
            targets = {"in": f"/docs/h{leaf.split('-')[0]}/{leaf}-moved.html", "out": f"/private/{leaf}.html"}
            if version is None:
                for target in (path, *targets.values()):
                    site.remove(target)
                continue
            page = render_page(f"Leaf {leaf}", f"<p>{para(f'leaf {leaf} v{version}', 40)}</p>", nav=[])
            if leaf in self.moved:
                site.set(targets[self.moved[leaf]], page)
                site.redirect(path, targets[self.moved[leaf]], 301)
            else:
                site.set(path, page)
        site.set("/login", render_page("Sign in", "<form><input name='user'></form>", nav=[]))
        for path, fault in self.faults.items():
            if fault == "stub":
                site.set(path, STUB)
            elif fault == "empty":
                site.set(path, b"")
            elif fault == "text/plain":
                site.set(path, "Hub\n\nsee the pages", "text/plain")
            elif fault == "404":
                site.remove(path)
            elif fault == "500":
                site.error(path, 500)
            else:
                site.redirect(path, "/login?next=" + path, status=302)

    def apply(self, op: tuple) -> None:
        kind, h, i = op[0], op[1], op[2]
        leaf = f"{h}-{i}"
        if kind == "edit" and self.leaves.get(leaf) is not None:
            self.leaves[leaf] = (self.leaves[leaf] or 0) + 1
        elif kind == "unlink" and leaf in self.links[h]:
            self.links[h].remove(leaf)
        elif kind == "link":
            if leaf not in self.links[h]:
                self.links[h].append(leaf)
            if self.leaves.get(leaf) is None:
                self.leaves[leaf] = 0
        elif kind == "delete" and leaf in self.leaves:
            self.leaves[leaf] = None
            if leaf in self.links[h]:
                self.links[h].remove(leaf)
        elif kind == "move" and self.leaves.get(leaf) is not None:
            if leaf in self.moved:
                del self.moved[leaf]  # the move undone: the page answers at its own URL again
            else:
                self.moved[leaf] = op[3]
        elif kind == "fault":
            path = "/docs/index.html" if i == 0 else f"/docs/h{h}/index.html"
            self.faults[path] = op[3]
        elif kind == "heal":
            self.faults.clear()


LEAF = st.tuples(
    st.sampled_from(["edit", "unlink", "link", "delete"]), st.integers(0, HUBS - 1), st.integers(0, LEAVES - 1)
)
FAULT = st.tuples(st.just("fault"), st.integers(0, HUBS - 1), st.integers(0, 3), st.sampled_from(FAULTS))
MOVE = st.tuples(st.just("move"), st.integers(0, HUBS - 1), st.integers(0, 1), st.sampled_from(["in", "out"]))
OPS = st.lists(
    st.tuples(st.one_of(LEAF, FAULT, MOVE, st.just(("heal", 0, 0))), st.integers(1, 120)), min_size=1, max_size=7
)
# Not generated: a site larger than --max-pages. Past the bound an incremental crawl keeps the
# pages it tracks first (`sync.stages.crawl`: they keep their room), where a fresh crawl takes
# the first it finds breadth first, so the two may hold different pages of the same site by
# design (docs/concepts/crawling.md#bounds). Every sequence here stays well under the bound.


@pytest.fixture(scope="module")
def server():
    with SiteServer(Site()) as srv:
        yield srv


def comparable(h: Harness) -> dict[str, dict]:
    return {pid: without_fetched_at(p) for pid, p in h.points().items()}


def settles(server, ops) -> None:
    """Crawl the model's site pass after pass through `ops`, heal it, make two clean passes:
    the collection equals a fresh crawl's."""
    site = Site()
    server.serve(site)
    site.server = server  # type: ignore[attr-defined]
    start = [server.url("/docs/index.html")]
    model = Model()
    model.build(site)
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(site, Path(tmp) / "crawl")
        h.run(sitemaps=[], crawl=start)
        for op, hours in ops:
            model.apply(op)
            model.build(site)
            h.run(sitemaps=[], crawl=start, advance=timedelta(hours=hours))
        model.faults.clear()
        model.build(site)
        h.run(sitemaps=[], crawl=start, full=True, advance=timedelta(hours=1))
        h.run(sitemaps=[], crawl=start, full=True, advance=CONFIRM_CAP)
        fresh = Harness(site, Path(tmp) / "fresh", stamp_site=False)
        fresh.now = h.now
        fresh.run(sitemaps=[], crawl=start)
        got, want = comparable(h), comparable(fresh)
        assert sorted(p["url"] for p in got.values()) == sorted(p["url"] for p in want.values()), ops
        assert got == want, ops


def test_faults_and_edits_settle_on_a_fresh_crawl_within_two_clean_passes(server):
    @settings(max_examples=12, derandomize=True, database=None, deadline=None)
    @given(OPS)
    def check(ops):
        settles(server, ops)

    check()


@pytest.mark.parametrize(
    "ops",
    [
        [(("move", 1, 0, "out"), 30)],
        [(("move", 0, 1, "in"), 5), (("fault", 0, 1, "stub"), 30), (("move", 2, 0, "out"), 100)],
        [(("fault", 0, 0, "404"), 2), (("link", 2, 5, 0), 3), (("move", 2, 1, "out"), 40)],  # the start page's 404
        [
            (("edit", 0, 0), 1),
            (("edit", 0, 0), 1),
            (("fault", 0, 1, "empty"), 70),
        ],  # a hub purged for no text, its interval long
    ],
    ids=["out", "in, a stub, out", "start 404, a link, out", "a hub empty for days"],
)
def test_these_sequences_settle_on_a_fresh_crawl_within_two_clean_passes(server, ops):
    settles(server, ops)
