"""A link crawl loses no live page to a fault: each `pagesync run --crawl` (in process) on a local site.

The site: an index linking 5 hubs, each linking 4 leaves (26 pages). A first pass indexes it
whole; then one hub answers badly (a stub, a wrong type, a 404, a redirect to a login, ...)
in an ordinary scheduled pass, 30 days later (every page due). No leaf of that hub may be
purged: the hub's answer is not evidence that its leaves left the site.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from demo.site_server import Site, SiteServer, render_page
from sync.commands.cli import app

pytestmark = [pytest.mark.slow, pytest.mark.integration]

T0 = "2031-03-01T06:00:00Z"
T1 = "2031-03-31T06:00:00Z"  # 30 days on: every page is due
T2 = "2031-05-01T06:00:00Z"
T3 = "2031-06-01T06:00:00Z"
HUBS, LEAVES = 5, 4
FAULTY = "/docs/s3/index.html"


def hub_html(h: int) -> str:
    links = "".join(f'<li><a href="/docs/s{h}/p{i}.html">Leaf {h}.{i}</a></li>' for i in range(LEAVES))
    return render_page(f"Section {h}", f"<p>Section {h} of the guide, with its pages.</p><ul>{links}</ul>", nav=[])


def build(site: Site) -> None:
    hubs = "".join(f'<li><a href="/docs/s{h}/index.html">Section {h}</a></li>' for h in range(HUBS))
    site.set("/docs/index.html", render_page("Docs", f"<p>The guide's sections.</p><ul>{hubs}</ul>", nav=[]))
    for h in range(HUBS):
        site.set(f"/docs/s{h}/index.html", hub_html(h))
        for i in range(LEAVES):
            site.set(
                f"/docs/s{h}/p{i}.html",
                render_page(
                    f"Leaf {h}.{i}", f"<p>Leaf {h}.{i} explains one thing in a few words. " * 8 + "</p>", nav=[]
                ),
            )


def live_pages(work: Path) -> set[str]:
    db = sqlite3.connect(work / ".pagesync" / "state.db")
    try:
        return {u.split("/", 3)[3] for (u,) in db.execute("SELECT url FROM pages WHERE status = 'live'")}
    finally:
        db.close()


@pytest.fixture(scope="module")
def server():
    """One local server for the module; each test serves its own `Site` on it."""
    with SiteServer(Site()) as srv:
        yield srv


@pytest.fixture
def site(server, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("PAGESYNC_", "QDRANT_")):
            monkeypatch.delenv(name)
    s = Site()
    server.serve(s)
    s.server = server  # type: ignore[attr-defined]
    return s


def run(site: Site, work: Path, now: str, *extra: str):
    report = work / "r.json"
    report.unlink(missing_ok=True)
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--crawl",
            site.server.url("/docs/index.html"),
            "--embedder",
            "fake",
            "--now",
            now,
            "--state",
            str(work / ".pagesync" / "state.db"),
            "--qdrant-path",
            str(work / ".pagesync" / "qdrant"),
            "--report",
            str(report),
            "-q",
            *extra,
        ],
    )
    rep = json.loads(report.read_text()) if report.exists() else {}
    return r, rep


ALL = (
    {"docs/index.html"}
    | {f"docs/s{h}/index.html" for h in range(HUBS)}
    | {f"docs/s{h}/p{i}.html" for h in range(HUBS) for i in range(LEAVES)}
)
LEAVES_OF_FAULTY = {f"docs/s3/p{i}.html" for i in range(LEAVES)}

STUB = (
    "<!doctype html><html><head><title>Maintenance</title></head><body><p>We are down for maintenance.</p>"
    "</body></html>"
)
JS_SHELL = (
    "<!doctype html><html><head><title>Docs</title><script src='/static/app.js'></script></head>"
    "<body><div id='root'></div><noscript>Enable JavaScript.</noscript></body></html>"
)
NOINDEX = (
    "<!doctype html><html><head><title>Maintenance</title><meta name='robots' content='noindex,nofollow'>"
    "</head><body><p>We are down for maintenance.</p></body></html>"
)


def _login(site: Site) -> None:
    site.set("/login", render_page("Sign in", "<form><input name='user'><input type='password'></form>", nav=[]))
    site.redirect(FAULTY, "/login?next=/docs/s3/index.html", status=302)


FAULTS: dict[str, Callable[[Site], None]] = {
    "maintenance stub": lambda s: s.set(FAULTY, STUB),
    "empty 200": lambda s: s.set(FAULTY, b""),
    "js-only shell": lambda s: s.set(FAULTY, JS_SHELL),
    "noindex,nofollow maintenance page": lambda s: s.set(FAULTY, NOINDEX),
    "body cut short": lambda s: s.set(FAULTY, hub_html(3)[: len(hub_html(3)) // 2 + 40]),
    "text/plain": lambda s: s.set(FAULTY, "Section 3\n\nsee the pages", "text/plain"),
    "application/json": lambda s: s.set(FAULTY, '{"error": "maintenance"}', "application/json"),
    "application/octet-stream": lambda s: s.set(FAULTY, bytes(range(256)) * 4, "application/octet-stream"),
    "garbage bytes as html": lambda s: s.set(FAULTY, bytes((i * 37 + 11) % 256 for i in range(4096))),
    "body of 20 MB": lambda s: s.set(FAULTY, b"<html><body>" + b"x" * (20 * 1024 * 1024) + b"</body></html>"),
    "404": lambda s: s.remove(FAULTY),
    "410": lambda s: s.gone(FAULTY),
    "302 to a login page": _login,
    "base href off-site": lambda s: s.set(
        FAULTY, hub_html(3).replace("<head>", "<head><base href='https://elsewhere.example/'>")
    ),
    "robots disallows the hub's directory": lambda s: s.set(
        "/robots.txt", "User-agent: *\nDisallow: /docs/s3/\n", "text/plain"
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_one_bad_answer_of_a_hub_purges_none_of_its_leaves(site, tmp_path, fault):
    build(site)
    r, rep = run(site, tmp_path, T0)
    assert r.exit_code == 0, r.stderr
    assert live_pages(tmp_path) == ALL
    FAULTS[fault](site)
    r, rep = run(site, tmp_path, T1)
    assert r.exit_code in (0, 1), r.stderr
    live = live_pages(tmp_path)
    assert LEAVES_OF_FAULTY <= live, (fault, sorted(LEAVES_OF_FAULTY - live), rep.get("removed"))
    # Healthy again: the index is the site's, the next pass or the one after.
    build(site)
    site.remove("/robots.txt")
    run(site, tmp_path, T2)
    r, rep = run(site, tmp_path, T3)
    assert r.exit_code == 0, r.stderr
    assert live_pages(tmp_path) == ALL


def test_a_hub_that_really_drops_a_link_loses_the_leaf_after_two_complete_crawls(site, tmp_path):
    """The evidence a purge needs: the hub read healthy no longer links the leaf, and a second
    complete crawl a revisit interval later agrees; the reason names the hub and the date."""
    build(site)
    run(site, tmp_path, T0)
    site.set("/docs/s1/index.html", hub_html(1).replace('<li><a href="/docs/s1/p2.html">Leaf 1.2</a></li>', ""))
    r, rep = run(site, tmp_path, T1)
    assert r.exit_code == 0, r.stderr
    assert "docs/s1/p2.html" in live_pages(tmp_path)  # one crawl is no evidence yet
    r, rep = run(site, tmp_path, T2)
    assert r.exit_code == 0, r.stderr
    assert live_pages(tmp_path) == ALL - {"docs/s1/p2.html"}
    out = (tmp_path / "r.json").read_text()
    assert "/docs/s1/index.html" in out and "2031-03-31" in out, out


def test_a_page_dropped_twice_in_one_day_stays_until_a_revisit_interval_passed(site, tmp_path):
    build(site)
    run(site, tmp_path, T0)
    site.set("/docs/s1/index.html", hub_html(1).replace('<li><a href="/docs/s1/p2.html">Leaf 1.2</a></li>', ""))
    run(site, tmp_path, T1)
    r, rep = run(site, tmp_path, "2031-03-31T07:00:00Z", "--full")
    assert r.exit_code == 0, r.stderr
    assert "docs/s1/p2.html" in live_pages(tmp_path)


# -- no fault at all: trap caps and link order, a 301's target, links that grow without end --


def _posts_index(site: Site, numbers) -> None:
    links = "".join(f'<li><a href="/docs/posts/{n}.html">Post {n}</a></li>' for n in numbers)
    site.set(
        "/docs/index.html", render_page("Posts", f"<p>Every post of the blog, listed.</p><ul>{links}</ul>", nav=[])
    )


def _tracked(work: Path) -> set[str]:
    db = sqlite3.connect(work / ".pagesync" / "state.db")
    try:
        return {u.split("/", 3)[3] for (u,) in db.execute("SELECT url FROM pages WHERE status != 'gone'")}
    finally:
        db.close()


def test_a_numbered_pattern_cap_never_trades_a_tracked_page_for_a_new_one(site, tmp_path):
    """300 posts, 256 of one numbered pattern admitted: reversing the list loses none of them."""
    for n in range(1, 301):
        site.set(f"/docs/posts/{n}.html", render_page(f"Post {n}", f"<p>Post number {n} of the blog.</p>", nav=[]))
    _posts_index(site, range(1, 301))
    r, rep = run(site, tmp_path, T0)
    assert r.exit_code == 0, r.stderr
    first = live_pages(tmp_path)
    assert rep["crawl_refused"]["too many pages of one numbered pattern"] == 44 and len(first) == 257
    _posts_index(site, range(300, 0, -1))  # newest first
    for now in (T1, T2):
        r, rep = run(site, tmp_path, now)
        assert r.exit_code == 0, r.stderr
        assert live_pages(tmp_path) == first, sorted(first - live_pages(tmp_path))[:5]


def test_a_301_target_is_reached_through_its_source_on_every_pass(site, tmp_path):
    build(site)
    site.set("/docs/s1/moved-here.html", render_page("Moved", "<p>The page that moved here, in full.</p>" * 4, nav=[]))
    site.redirect("/docs/s1/p2.html", "/docs/s1/moved-here.html", 301)
    for now in (T0, T1, "2031-04-02T06:00:00Z", T2, T3):
        r, rep = run(site, tmp_path, now)
        assert r.exit_code == 0, r.stderr
        assert "docs/s1/moved-here.html" in live_pages(tmp_path), now
    db = sqlite3.connect(tmp_path / ".pagesync" / "state.db")
    (moved,) = db.execute("SELECT moved_to FROM pages WHERE url LIKE '%/docs/s1/p2.html'").fetchone()
    assert moved.endswith("/docs/s1/moved-here.html")


def _letters(n: int, width: int = 6) -> str:
    out = ""
    for _ in range(width):
        n, d = divmod(n, 26)
        out += chr(97 + d)
    return out


def test_a_newest_first_listing_loses_no_old_post_to_the_cap(site, tmp_path):
    """An index of 300 posts, newest first, past the numbered pattern's cap of 256; each pass
    adds a post at the top. The cap refuses the new post, never an old one still listed."""
    posts = list(range(1, 301))

    def publish(n: int) -> None:
        site.set(f"/docs/posts/{n}.html", render_page(f"Post {n}", f"<p>Post number {n} of the blog.</p>", nav=[]))

    for n in posts:
        publish(n)
    _posts_index(site, reversed(posts))
    r, rep = run(site, tmp_path, T0)
    assert r.exit_code == 0, r.stderr
    first = live_pages(tmp_path)
    assert len(first) == 257 and "docs/posts/300.html" in first and "docs/posts/44.html" not in first
    for now in (T1, T2, T3, "2031-07-01T06:00:00Z"):
        posts.append(posts[-1] + 1)
        publish(posts[-1])
        _posts_index(site, reversed(posts))
        r, rep = run(site, tmp_path, now)
        assert r.exit_code == 0, r.stderr
        live = live_pages(tmp_path)
        assert first <= live, (now, sorted(first - live)[:5], rep.get("changes", [])[:3])


def _slug(n: int) -> str:
    return "post-" + _letters(n)


def test_a_shift_across_the_pagers_cap_loses_no_post(site, tmp_path):
    """A listing of 10 posts a page, `list.html?page=1..32`, the most query strings one path
    may have; 10 new posts shift every post down, the oldest 10 onto `?page=33`, past the
    cap. They are still listed: none is purged, and the new ones are indexed."""
    posts = list(range(320))

    def publish(n: int) -> None:
        site.set(
            f"/docs/posts/{_slug(n)}.html",
            render_page(f"Post {n}", f"<p>Post {n} of the blog, in a few words.</p>", nav=[]),
        )

    def pager(path: str):
        from demo.site_server import Resource

        if not path.startswith("/docs/list.html?page="):
            return None
        page = int(path.rsplit("=", 1)[1])
        newest = posts[::-1][(page - 1) * 10 : page * 10]
        if not newest:
            return None
        links = "".join(f'<li><a href="/docs/posts/{_slug(n)}.html">Post {n}</a></li>' for n in newest)
        return Resource(
            render_page(
                f"Posts, page {page}", f"<p>The blog's posts, newest first.</p><ul>{links}</ul>", nav=[]
            ).encode(),
            mtime=0,
        )

    def index() -> None:
        pages = "".join(f'<a href="/docs/list.html?page={p}">{p}</a> ' for p in range(1, (len(posts) + 9) // 10 + 1))
        site.set("/docs/index.html", render_page("Blog", f"<p>The blog, page by page.</p><p>{pages}</p>", nav=[]))

    site.dynamic = pager
    for n in posts:
        publish(n)
    index()
    r, rep = run(site, tmp_path, T0)
    assert r.exit_code == 0, r.stderr
    first = live_pages(tmp_path)
    assert len(first) == 1 + 32 + 320 and rep["crawl_complete"] is True
    for n in range(320, 330):
        posts.append(n)
        publish(n)
    index()
    for now in (T1, T2, T3):
        r, rep = run(site, tmp_path, now)
        assert r.exit_code == 0, r.stderr
        assert rep["crawl_refused"]["too many query strings on one path"] == 1
        live = live_pages(tmp_path)
        assert first <= live, (now, sorted(first - live)[:5])
        assert {f"docs/posts/{_slug(n)}.html" for n in range(320, 330)} <= live


def test_links_that_grow_without_end_stay_within_max_pages_and_say_so(site, tmp_path, caplog):
    """Visitor ids in links: a page linking 3 URLs never seen before on every read, and each of
    those the same. Over six passes the tracked pages never exceed --max-pages, each pass says
    it found more than it may hold, and the visit pages nothing links any more expire (behind
    the guard), while every page of the docs stays."""
    import itertools

    from demo.site_server import Resource

    fresh = itertools.count()

    def visit_page(path: str):
        if path != "/docs/visit.html" and not path.startswith("/docs/s/"):
            return None
        links = "".join(f'<a href="/docs/s/{_letters(next(fresh))}/page.html">more</a>' for _ in range(3))
        return Resource(render_page("Visit", f"<p>A page of the visit, with its links.</p>{links}", nav=[]).encode())

    site.dynamic = visit_page
    docs = [f"/docs/guide/{_letters(i, 3)}.html" for i in range(50)]
    for path in docs:
        site.set(path, render_page("Guide", f"<p>A page of the guide: {path}, explained at length.</p>", nav=[]))
    links = "".join(f'<li><a href="{p}">{p}</a></li>' for p in docs)
    site.set(
        "/docs/index.html",
        render_page(
            "Docs", f'<p>The docs.</p><ul>{links}</ul><p><a href="/docs/visit.html">Your visit</a></p>', nav=[]
        ),
    )
    stable = {"docs/index.html", "docs/visit.html"} | {p.lstrip("/") for p in docs}
    codes, overflow, warnings, visits, reasons = [], [], [], [], []
    for day in range(0, 24, 4):
        caplog.clear()
        r, rep = run(site, tmp_path, f"2031-03-{1 + day:02d}T06:00:00Z", "--max-pages", "60")
        codes.append(r.exit_code)
        overflow.append(rep["crawl_overflow"])
        warnings.append(sum("more pages than --max-pages 60" in m for m in caplog.messages))
        tracked = _tracked(tmp_path)
        assert len(tracked) <= 60 and stable <= live_pages(tmp_path), day
        assert rep["crawl_complete"] is False and rep["crawl_bounded"] is True
        visits.append(tracked - stable)
        reasons += [c["reason"] for c in rep["changes"] if c["action"] == "removed"]
    assert codes == [0, 1, 1, 1, 1, 1], codes
    assert all(n > 0 for n in overflow) and warnings == [1] * 6, (overflow, warnings)
    assert visits[0] and not visits[0] & visits[-1], "the first pass's visit pages never expired"
    assert reasons and all("/docs/" in r and "2 later crawls, the last at" in r for r in reasons), reasons[:3]


def test_a_crawl_that_overflows_pass_after_pass_is_exit_1_until_the_site_is_fixed(site, tmp_path, caplog):
    """Visitor ids in links: the first pass that finds more than --max-pages exits 0 with the
    warning; one that overflows after an overflowing crawl is exit 1 (one line says why, the
    report is written), a pass without --crawl in between carries the count, and once the
    links stop growing the pass is 0 again."""
    import itertools

    from demo.site_server import Resource

    fresh = itertools.count()
    grows = [True]

    def visit_page(path: str):
        if path != "/docs/visit.html" and not path.startswith("/docs/s/"):
            return None
        links = (
            "".join(f'<a href="/docs/s/{_letters(next(fresh))}/page.html">more</a>' for _ in range(3))
            if grows[0]
            else ""
        )
        return Resource(
            render_page(
                "Visit",
                f'<p>A page of the visit, with its links.</p>{links}<p><a href="/docs/index.html">Docs</a></p>',
                nav=[],
            ).encode()
        )

    site.dynamic = visit_page
    docs = [f"/docs/guide/{_letters(i, 3)}.html" for i in range(60)]
    for path in docs:
        site.set(path, render_page("Guide", f"<p>A page of the guide: {path}, explained at length.</p>", nav=[]))
    links = "".join(f'<li><a href="{p}">{p}</a></li>' for p in docs)
    site.set(
        "/docs/index.html",
        render_page(
            "Docs", f'<p>The docs.</p><ul>{links}</ul><p><a href="/docs/visit.html">Your visit</a></p>', nav=[]
        ),
    )
    got = []

    def crawl_pass(now: str) -> None:
        caplog.clear()
        r, rep = run(site, tmp_path, now, "--max-pages", "70")
        assert rep, r.output  # the report is written whatever the exit code
        assert len(_tracked(tmp_path)) <= 70
        warned = [m for m in caplog.messages if "more pages than --max-pages 70" in m]
        got.append(
            (
                r.exit_code,
                rep["crawl_overflow_passes"],
                len(warned),
                "exit 1" in "".join(warned),
                "crawl over --max-pages" in r.output,
            )
        )

    crawl_pass("2031-03-01T06:00:00Z")
    # A pass of one page, no crawl: the count goes on as it was.
    other = CliRunner().invoke(
        app,
        [
            "run",
            "--url",
            site.server.url(docs[0]),
            "--embedder",
            "fake",
            "--now",
            "2031-03-02T06:00:00Z",
            "--state",
            str(tmp_path / ".pagesync" / "state.db"),
            "--qdrant-path",
            str(tmp_path / ".pagesync" / "qdrant"),
            "--report",
            str(tmp_path / "u.json"),
            "-q",
        ],
    )
    assert other.exit_code == 0, other.output
    assert json.loads((tmp_path / "u.json").read_text())["crawl_overflow_passes"] == 1
    crawl_pass("2031-03-05T06:00:00Z")
    crawl_pass("2031-03-09T06:00:00Z")
    grows[0] = False  # the site is fixed: the visit pages link no new ids
    crawl_pass("2031-03-13T06:00:00Z")
    assert got == [(0, 1, 1, False, False), (1, 2, 1, True, True), (1, 3, 1, True, True), (0, 0, 0, False, False)], got


def test_a_move_out_of_the_crawls_directory_indexes_nothing_outside_it(site, tmp_path):
    """/docs/s1/p2.html answers 301 to /private/y.html, on the same host: the crawl's scope is
    its start directory, so the target is never indexed, on any pass, and the source leaves as
    a page that left the site, its reason naming the target."""
    build(site)
    site.set(
        "/private/y.html", render_page("Private", "<p>A page outside the docs, not for the index.</p>" * 4, nav=[])
    )
    r, rep = run(site, tmp_path, T0)
    assert r.exit_code == 0 and live_pages(tmp_path) == ALL, r.output
    site.redirect("/docs/s1/p2.html", "/private/y.html", 301)
    for now in (T1, "2031-04-02T06:00:00Z", T2, T3):
        r, rep = run(site, tmp_path, now)
        assert r.exit_code == 0, r.output
        assert live_pages(tmp_path) == ALL - {"docs/s1/p2.html"}, (now, sorted(live_pages(tmp_path) ^ ALL))
        assert not any("/private/" in u for u in _tracked(tmp_path)), now
        if now == T1:
            (gone,) = [c for c in rep["changes"] if c["action"] == "removed"]
            assert gone["url"].endswith("/docs/s1/p2.html")
            assert gone["reason"] == (
                "moved permanently out of the crawl's directories, to " + site.server.url("/private/y.html")
            ), gone
            assert rep["crawl_complete"] is True


def test_a_start_page_moved_out_of_its_directory_is_an_error_and_purges_nothing(site, tmp_path, caplog):
    """The start page answers 301 to /private/: a configuration to fix (exit 1, one line naming
    the target); the crawl is incomplete, so no page leaves for not being linked."""
    build(site)
    site.set("/private/index.html", render_page("Private", "<p>The private side of the site.</p>" * 4, nav=[]))
    run(site, tmp_path, T0)
    site.redirect("/docs/index.html", "/private/index.html", 301)
    for now in (T1, T2):
        caplog.clear()
        r, rep = run(site, tmp_path, now, "--allow-mass-delete")
        assert r.exit_code == 1 and rep["crawl_start_errors"] == 1 and rep["crawl_complete"] is False, r.output
        said = [m for m in caplog.messages if m.startswith("error ")]
        assert said == [
            f"error {site.server.url('/docs/index.html')}: crawl start page: moved permanently out of "
            f"the crawl's directories, to {site.server.url('/private/index.html')} (give that as "
            "--crawl)"
        ], said
        assert live_pages(tmp_path) == ALL - {"docs/index.html"}, now
        assert not any("/private/" in u for u in _tracked(tmp_path))


def test_the_start_page_is_read_every_pass_whatever_its_schedule(site, tmp_path):
    """The root of what the crawl reaches is asked on every pass, due or not: a link it gains
    an hour later is followed that pass; its 404 an hour after that is exit 1 and purges
    nothing for not being linked; back an hour later, the crawl goes on from it."""
    build(site)
    r, rep = run(site, tmp_path, T0)
    assert r.exit_code == 0 and live_pages(tmp_path) == ALL, r.output
    site.set("/docs/s9/index.html", render_page("Section 9", "<p>A new section of the guide, in full.</p>" * 4, nav=[]))
    index = render_page(
        "Docs",
        "<p>The guide's sections.</p><ul>"
        + "".join(f'<li><a href="/docs/s{h}/index.html">Section {h}</a></li>' for h in [*range(HUBS), 9])
        + "</ul>",
        nav=[],
    )
    site.set("/docs/index.html", index)
    r, rep = run(site, tmp_path, "2031-03-01T07:00:00Z")
    assert r.exit_code == 0 and live_pages(tmp_path) == ALL | {"docs/s9/index.html"}, r.output
    site.remove("/docs/index.html")
    r, rep = run(site, tmp_path, "2031-03-01T08:00:00Z")
    assert r.exit_code == 1 and rep["crawl_start_errors"] == 1 and rep["crawl_complete"] is False, r.output
    assert live_pages(tmp_path) == ALL - {"docs/index.html"} | {"docs/s9/index.html"}
    site.set("/docs/index.html", index)
    site.set("/docs/s8/index.html", render_page("Section 8", "<p>Another new section, in full.</p>" * 4, nav=[]))
    site.set("/docs/index.html", index.replace("</ul>", '<li><a href="/docs/s8/index.html">8</a></li></ul>'))
    r, rep = run(site, tmp_path, "2031-03-01T09:00:00Z")
    assert r.exit_code == 0 and rep["crawl_complete"] is True, r.output
    assert live_pages(tmp_path) == ALL | {"docs/s9/index.html", "docs/s8/index.html"}
