"""Configuration and environment problems read as what they are: one line naming the cause
and the way on, the exit code of docs/commands/index.md (2: configuration, nothing purged; 1: a pass
that could not finish its writes), and never advice that would make things worse."""

from __future__ import annotations

from datetime import timedelta

from demo.site_server import Resource


from tests.cli_helpers import ROOT, cli, cli_build, cli_run, one_error_line, stored
from tests.helpers import second_site

COMMON = ("--qdrant-path", "q", "--state", "s.db")


def _alias(site) -> str:
    """The site's sitemap named by another name of its host: localhost for 127.0.0.1."""
    port = site.server.base_url.rsplit(":", 1)[1]
    return f"http://localhost:{port}/sitemap.xml"


def _urlset(urls: list[str]) -> bytes:
    return (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{u}</loc></url>" for u in urls)
        + "</urlset>"
    ).encode()


# -- a sitemap whose every URL is out of scope ---------------------------------------------------
def test_a_host_alias_on_a_fresh_state_is_exit_2_naming_the_hosts_and_allow_host(site, work):
    cli_build(site, n=5)
    r = cli(work, "run", "--sitemap", _alias(site), *COMMON, "--embedder", "fake")
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    port = site.server.base_url.rsplit(":", 1)[1]
    assert f"5 on 127.0.0.1:{port}" in line and "--allow-host 127.0.0.1" in line and "localhost" in line, line
    assert "--allow-mass-delete" not in line
    assert not any(p[1].endswith(".html") for p in site.requests), "no page is fetched"


def test_a_host_alias_on_a_tracked_site_is_exit_2_and_purges_nothing(site, work):
    cli_build(site, n=6)
    assert cli_run(site, work).returncode == 0
    before = stored(work)
    assert len({p["url"] for p in before.values()}) == 6
    for extra in ((), ("--full",), ("--dry-run",)):
        r = cli(work, "run", "--sitemap", _alias(site), *COMMON, "--embedder", "fake", *extra)
        assert r.returncode == 2, r.stdout + r.stderr
        line = one_error_line(r)
        assert "out of scope" in line and "--allow-host 127.0.0.1" in line, line
        assert "--allow-mass-delete" not in r.stderr
    assert stored(work) == before
    status = cli(work, "status", *COMMON)
    assert "6 tracked (6 live)" in status.stdout, status.stdout
    assert cli_run(site, work).returncode == 0  # the right name goes on as before


def test_a_sitemap_index_whose_children_are_all_out_of_scope_is_exit_2(site, work):
    cli_build(site, n=2)
    site.sitemap_mode = "index"  # its children are named 127.0.0.1
    r = cli(work, "run", "--sitemap", _alias(site), *COMMON, "--embedder", "fake")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--allow-host 127.0.0.1" in one_error_line(r)


def test_a_few_out_of_scope_urls_are_one_warning_line(site, work):
    urls = cli_build(site, n=2)
    port = site.server.base_url.rsplit(":", 1)[1]
    others = [f"http://localhost:{port}/p{i}.html" for i in range(4)] + ["http://other.example/x"]
    site.resources["/mixed.xml"] = Resource(_urlset([*urls, *others]), "application/xml", in_sitemap=False)
    r = cli(work, "run", "--sitemap", site.server.url("/mixed.xml"), *COMMON, "--embedder", "fake")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "out of scope" in ln or "localhost" in ln]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("warning: skipped 5 sitemap URLs out of scope (4 on localhost:"), lines[0]
    assert f"--allow-host localhost:{port} --allow-host other.example" in lines[0], lines[0]  # host and port


def test_the_guard_advises_the_scope_not_a_mass_delete_when_pages_only_left_the_scope(site, harness):
    """Pages indexed through --allow-host, the flag dropped: more than the guard's share
    would go, all of them for scope. The refusal names --allow-host, not --allow-mass-delete."""
    cli_build(site, n=6)
    port = site.server.base_url.rsplit(":", 1)[1]
    listed = [site.server.url("/p0.html")] + [f"http://localhost:{port}/p{i}.html" for i in range(1, 6)]
    site.resources["/custom.xml"] = Resource(_urlset(listed), "application/xml", in_sitemap=False)
    sm = [site.server.url("/custom.xml")]
    assert harness.run(sitemaps=sm, allow_hosts=[f"localhost:{port}"]).pages_added == 6
    before = harness.points()
    rep = harness.run(sitemaps=sm, advance=timedelta(minutes=5))
    assert rep.pages_removed == 0 and rep.mass_delete_blocked == 5 and not rep.ok
    guard = rep.errors[-1]["error"]
    assert "out of scope now (5 on localhost:" in guard and "--allow-host localhost" in guard, guard
    assert "--allow-mass-delete" not in guard
    assert harness.points() == before
    assert len({p["url"] for p in harness.points().values()}) == 6


# -- an HTML page given as --sitemap ------------------------------------------------------------------
def test_an_html_page_is_not_a_sitemap_whatever_its_markup():
    import pytest

    from sync.errors import NotASitemapError
    from sync.core.sitemaps import parse_sitemap

    pages = [
        b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>x</title></head><body><p>a<br></p></body></html>',
        b'<html lang="en"><head><meta name="a" content="b"></head></html>',
        b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body/></html>',
    ]  # XHTML parses
    for body in pages:
        with pytest.raises(NotASitemapError, match="not a sitemap: the answer is an HTML page"):
            parse_sitemap(body)
    with pytest.raises(Exception, match="not XML") as broken:
        parse_sitemap(b"<urlset><url><loc>http://a/</loc></url>")  # a broken sitemap stays "not XML"
    assert not isinstance(broken.value, NotASitemapError)


def test_an_html_page_as_sitemap_is_exit_2_on_a_first_run_and_a_sitemap_error_after(site, work):
    cli_build(site, n=3)
    page = site.server.url("/p0.html")
    r = cli(work, "run", "--sitemap", page, *COMMON, "--embedder", "fake")
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    assert f"--sitemap {page} is not a sitemap: the answer is an HTML page" in line, line
    assert "tag mismatch" not in line and "line " not in line
    assert cli_run(site, work).returncode == 0  # tracked now
    before = stored(work)
    r = cli(work, "run", "--sitemap", page, *COMMON, "--embedder", "fake", "--full")
    assert r.returncode == 1, r.stdout + r.stderr
    (err,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    assert (
        err == f"error {page}: sitemap: not a sitemap: the answer is an HTML page (a sitemap is XML with <urlset> "
        "or <sitemapindex>); give the sitemap's own URL (often /sitemap.xml; robots.txt names it)"
    ), err
    assert "Traceback" not in r.stderr and "tag mismatch" not in r.stderr
    assert stored(work) == before, "a sitemap error purges nothing"


# -- the API key in whatever form a server echoes it ---------------------------------------------------
def test_the_api_key_is_redacted_in_escaped_and_encoded_forms_too():
    import json
    from urllib.parse import quote, quote_plus

    import pytest

    from sync.errors import StoreError
    from sync.edges.store_errors import qdrant_boundary, redact

    key = 'SEC"RET/ké y\\+%&'
    echoes = [
        key,
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
        json.dumps(json.dumps(key)[1:-1])[1:-1],
        quote(key, safe=""),
        quote(key, safe="").lower(),
        quote_plus(key),
        repr(key)[1:-1],
    ]
    for echo in echoes:
        out = redact(f'{{"error": "bad api-key {echo}"}} trailer', key)
        assert out == '{"error": "bad api-key ***"} trailer', (echo, out)
    assert redact("nothing secret", key) == "nothing secret" and redact("x", None) == "x"
    with pytest.raises(StoreError) as ei:
        with qdrant_boundary("count", key):
            raise RuntimeError(json.dumps({"status": {"error": f"Unknown api key {key}"}}))
    assert "SEC" not in str(ei.value) and "***" in str(ei.value), str(ei.value)


# -- bytes in the state that are no UTF-8 text ---------------------------------------------------------
def test_a_state_whose_texts_are_not_utf8_is_the_damaged_line_and_exit_2(site, work):
    import sqlite3

    cli_build(site, n=3)
    assert cli_run(site, work).returncode == 0
    with sqlite3.connect(work / "s.db") as db:  # printable garbage where a run report was
        db.execute("UPDATE runs SET report = '{\"now\": 3,, x'")
    r = cli(work, "status", *COMMON)
    assert r.returncode == 2 and "s.db is damaged" in one_error_line(r) and "run report is not JSON" in r.stderr
    with sqlite3.connect(work / "s.db") as db:  # random bytes where a text was
        db.execute("UPDATE runs SET report = '{}'")
        db.execute("UPDATE pages SET title = CAST(X'FF00FE9C41' AS TEXT), url = url || CAST(X'C3' AS TEXT)")
    for r in (cli(work, "status", "--pages", *COMMON), cli_run(site, work, "--full")):
        assert r.returncode == 2, r.args[3:] + [r.stdout, r.stderr]
        line = one_error_line(r)
        assert "s.db is damaged" in line and "state import" in line and "delete it" in line, line
        assert "Could not decode" in line  # the cause, once, in the same line


# -- --now out of range ------------------------------------------------------------------------------
def test_a_now_out_of_range_is_exit_2_with_one_line_for_every_command(site, work):
    cli_build(site, n=2)
    assert cli_run(site, work).returncode == 0
    before = stored(work)
    calls = {
        "9999-12-31T23:00:00Z": ("run", "status", "audit"),
        "9999-12-31T23:59:59-01:00": ("status",),
        "0001-01-01T00:00:00+01:00": ("run",),
    }
    for now, commands in calls.items():
        for command in commands:
            if command == "run":
                r = cli_run(site, work, "--now", now)
            else:
                r = cli(work, command, *(("--fix",) if command == "audit" else ()), "--now", now, *COMMON)
            assert r.returncode == 2, r.args[3:] + [r.stdout, r.stderr]
            assert f"--now {now!r} is out of range" in one_error_line(r)
    assert stored(work) == before
    assert cli_run(site, work, "--now", "2999-12-31T00:00:00Z").returncode == 0  # the last year allowed


# -- the extraction libraries' own log lines ------------------------------------------------------------
def test_the_extraction_libraries_log_lines_show_only_with_v(site, work):
    cli_build(site, n=2)
    site.set("/p1.html", "<html></html>")  # trafilatura: "discarding data: None"
    sm = site.server.url("/sitemap.xml")
    rs = [
        cli(
            work,
            *pre,
            "run",
            "--sitemap",
            sm,
            "--qdrant-path",
            f"q{i}",
            "--state",
            f"s{i}.db",
            "--embedder",
            "fake",
            *post,
        )
        for i, (pre, post) in enumerate([((), ()), ((), ("-v",)), (("-v",), ())])
    ]
    assert all(r.returncode == 0 for r in rs), [r.stderr for r in rs]
    assert "discarding data" not in rs[0].stderr, rs[0].stderr
    assert all("discarding data" in r.stderr for r in rs[1:]), [r.stderr for r in rs[1:]]


# -- a full disk under the embedded store ----------------------------------------------------------------
def _one_point(url: str):
    from sync.edges.store import PageWrite, StoredPoint

    return PageWrite(url, [StoredPoint("00000000-0000-0000-0000-000000000001", {"url": url, "text": "t"}, [1.0] * 4)])


def test_the_embedded_store_refuses_a_write_under_its_free_space_margin(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    import pytest

    from sync.edges import disk_space as store_mod  # where the free-space check asks the disk
    from sync.errors import StoreFullError
    from sync.edges.disk_space import MIN_FREE_BYTES
    from sync.edges.edge_store import EdgeStore

    usage = namedtuple("usage", "total used free")
    s = EdgeStore(tmp_path / "q", "pages")
    s.ensure_collection(4)
    s.replace_pages([_one_point("http://a/x")])
    monkeypatch.setattr(store_mod.shutil, "disk_usage", lambda p: usage(10**12, 10**12 - 10 * 2**20, 10 * 2**20))
    for write in (
        lambda: s.replace_pages([_one_point("http://a/y")]),
        lambda: s.delete_pages(["http://a/x"]),
        lambda: s.upsert(_one_point("http://a/z").points),
    ):
        with pytest.raises(StoreFullError, match=r"refused: 10 MiB free on its disk, under the 256 MiB") as ei:
            write()
        assert ei.value.exit_code == 1 and "\n" not in str(ei.value)
    assert s.count() == 1 and s.count("http://a/x") == 1, "nothing was written or deleted"
    fresh = EdgeStore(tmp_path / "q2", "pages")
    with pytest.raises(StoreFullError, match="create refused"):
        fresh.ensure_collection(4)
    monkeypatch.setattr(store_mod.shutil, "disk_usage", shutil.disk_usage)
    assert MIN_FREE_BYTES == 256 * 2**20
    s.close()


def test_a_full_disk_error_from_the_store_is_a_store_full_error(tmp_path, monkeypatch):
    import errno

    import pytest

    from sync.errors import StoreFullError
    from sync.edges.edge_store import EdgeStore

    s = EdgeStore(tmp_path / "q", "pages", min_free_bytes=0)
    s.ensure_collection(4)
    for raised in (
        OSError(errno.ENOSPC, "No space left on device"),
        Exception("Service runtime error: failed to flush: No space left on device (os error 28)"),
    ):

        def fail(url, raised=raised):
            raise raised

        monkeypatch.setattr(s, "_delete_url", fail)
        with pytest.raises(StoreFullError, match="the disk is full"):
            s.replace_pages([_one_point("http://a/x")])
    s.close()


def test_a_pass_on_a_full_disk_stops_with_one_line_and_exit_1_and_the_next_one_resumes(site, work):
    cli_build(site, n=3)
    assert cli_run(site, work).returncode == 0
    site.set("/p1.html", site.resources["/p1.html"].body.replace(b"p1-s1", b"p1-s1 edited"))
    full = cli(
        work,
        "run",
        "--sitemap",
        site.server.url("/sitemap.xml"),
        *COMMON,
        "--embedder",
        "fake",
        "--full",
        env={"PAGESYNC_MIN_FREE_MB": str(2**39)},
    )  # more than any disk has: the disk counts as full
    assert full.returncode == 1, full.stdout + full.stderr
    line = one_error_line(full)
    assert "replace refused" in line and "free some space" in line and "resumes" in line, line
    again = cli_run(site, work)  # space freed: the page is still due (its write is pending)
    assert again.returncode == 0, again.stderr
    assert "1 changed" in again.stderr or "change 1" in again.stderr, again.stderr
    assert any("p1-s1 edited" in p["text"] for p in stored(work).values())
    bad = cli(work, "status", *COMMON, env={"PAGESYNC_MIN_FREE_MB": "lots"})
    assert bad.returncode == 2 and "PAGESYNC_MIN_FREE_MB='lots'" in one_error_line(bad)


# -- a state this user may not write ------------------------------------------------------------------------
def _unprivileged(work) -> list[str]:
    """The argv prefix that runs a command without permission overrides: none for a normal
    user; as root, setpriv dropping CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER
    from the bounding set (root then obeys mode bits like anyone). Skips the test when
    neither makes a read-only directory refuse a write (probed, not assumed)."""
    import os
    import shutil
    import subprocess
    import sys

    import pytest

    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: permissions do not apply")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    probe = work / "probe"
    probe.mkdir()
    probe.chmod(0o555)
    try:
        r = subprocess.run(
            [*prefix, sys.executable, "-c", "import sys; open(sys.argv[1], 'w')", str(probe / "x")], capture_output=True
        )
    finally:
        probe.chmod(0o755)
    if r.returncode == 0:
        pytest.skip("this process's permissions are not enforced here")
    return prefix


def _cli_as(prefix: list[str], work, *args: str):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [*prefix, sys.executable, "-m", "sync", *args], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_state_this_user_may_not_write_names_the_path_and_the_permission(site, work):
    prefix = _unprivileged(work)
    cli_build(site, n=2)
    state = ("--qdrant-path", "q", "--state", "d/s.db")
    assert cli(work, "run", "--sitemap", site.server.url("/sitemap.xml"), *state, "--embedder", "fake").returncode == 0
    d, db = work / "d", work / "d" / "s.db"
    writers = (("audit",), ("run", "--sitemap", site.server.url("/sitemap.xml"), "--embedder", "fake"))
    readers = (("status",), ("state", "export"))
    cases = [
        (0o555, 0o644, "no permission to write in its directory d (SQLite keeps s.db-wal", True),
        (0o000, 0o644, "permission denied to enter its directory d", False),
        (0o755, 0o000, "no permission to read d/s.db", False),
    ]
    try:
        for dir_mode, file_mode, said, readable in cases:
            d.chmod(0o755)
            db.chmod(file_mode)
            d.chmod(dir_mode)
            for args in writers if readable else writers + readers:
                r = _cli_as(prefix, work, *args, *state)
                assert r.returncode == 2, (oct(dir_mode), oct(file_mode), args, r.stdout, r.stderr)
                line = one_error_line(r)
                assert line.startswith("pagesync: error: cannot open state database d/s.db: ") and said in line, line
                assert "fix the permissions or give --state a path this user can write" in line, line
            for args in readers if readable else ():  # reading needs no write: read-only, said once
                r = _cli_as(prefix, work, *args, *state)
                assert r.returncode == 0, (args, r.stdout, r.stderr)
                (warning,) = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
                assert warning.startswith("warning: page state d/s.db opened read-only: ") and said in warning, warning
            status = _cli_as(prefix, work, "status", *state)
            assert not readable or "2 tracked" in status.stdout, status.stdout
    finally:
        d.chmod(0o755)
        db.chmod(0o644)


def test_a_read_only_embedded_store_says_why_in_one_line_and_status_still_reports(site, work):
    import os

    prefix = _unprivileged(work)
    cli_build(site, n=2)
    assert cli_run(site, work).returncode == 0
    q = work / "q"
    modes = {}
    for root, dirs, files in os.walk(q):  # read-only, all the way down (as a read-only copy or mount)
        for name in [*dirs, *files]:
            modes[os.path.join(root, name)] = os.stat(os.path.join(root, name)).st_mode
    try:
        for path in sorted(modes, reverse=True) + [str(q)]:
            os.chmod(path, 0o555 if os.path.isdir(path) else 0o444)
        for args in (("search", "p1-s1", "--qdrant-path", "q"), ("audit", *COMMON), ("export", *COMMON)):
            r = _cli_as(prefix, work, *args)
            assert r.returncode == 2, (args, r.stdout, r.stderr)
            line = one_error_line(r)
            assert "embedded store (q/pages) is not writable for this user" in line, line
            assert "Permission denied" in line and "copy it somewhere writable" in line, line
        st = _cli_as(prefix, work, "status", *COMMON)
        assert st.returncode == 0, st.stderr
        first = st.stdout.splitlines()[0]
        assert first.startswith("warning: points not counted: embedded store (q/pages) is not writable"), first
        assert "a pass running?" not in first and "2 tracked" in st.stdout, st.stdout
    finally:
        os.chmod(q, 0o755)
        for path in sorted(modes):
            os.chmod(path, modes[path])


def test_one_sites_sitemap_now_naming_another_host_purges_nothing_and_advises_the_scope(site, harness):
    """Two sites; the second's sitemap starts naming its pages by another name of the host
    (localhost). That site's pages are not "gone": nothing is purged, and the error says
    the scope, not --allow-mass-delete."""
    cli_build(site, n=6)
    with second_site() as (other, server):
        port = server.base_url.rsplit(":", 1)[1]
        other.resources["/alias.xml"] = Resource(
            _urlset([server.url(f"/b{i}.html") for i in range(2)]), "application/xml", in_sitemap=False
        )
        both = [harness.sitemap(), server.url("/alias.xml")]
        assert harness.run(sitemaps=both).pages_added == 8
        before = harness.points()
        other.resources["/alias.xml"] = Resource(
            _urlset([f"http://localhost:{port}/b{i}.html" for i in range(2)]), "application/xml", in_sitemap=False
        )
        rep = harness.run(sitemaps=both, full=True)
        assert rep.pages_removed == 0 and not rep.ok
        (err,) = [e["error"] for e in rep.errors if "listed no URLs of this site" in e["error"]]
        assert "out of scope" in err and "--allow-host localhost" in err and "--allow-mass-delete" not in err, err
        assert harness.points() == before
