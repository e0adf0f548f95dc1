"""Exit codes and error lines of the command line: configuration and environment errors are
exit 2 with one line and nothing written (docs/commands/index.md, exit codes), never a traceback or exit 1 (which
means "pages failed" or "the audit found problems")."""

from __future__ import annotations

import json
import sqlite3

import pytest

from sync.edges.edge_store import EdgeStore
from tests.cli_helpers import cli, cli_build, cli_run, one_error_line, parallel, sitemap, stored
from tests.helpers import damage, page_html, para

COMMON = ("--qdrant-path", "q", "--state", "s.db")


# -- A: audit --fix checks the embedder before writing -------------------------------------------
def indexed_and_damaged(site, work) -> None:
    """Four pages indexed with the 16-d fake embedder, then every audit category planted."""
    cli_build(site, n=4)
    assert cli_run(site, work).returncode == 0
    store = EdgeStore(work / "q", "pages")
    try:
        damage(store, site)
    finally:
        store.close()


def test_audit_fix_with_an_embedder_that_does_not_fit_exits_2_and_deletes_nothing(site, work):
    indexed_and_damaged(site, work)
    before = stored(work)
    r = cli(work, "audit", "--fix", "--include-foreign", "--embedder", "fake-32", *COMMON)
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    assert "16-dimensional" in line and "32" in line
    assert stored(work) == before, "nothing is deleted before the embedder is checked"


def test_audit_fix_without_embedder_uses_the_one_the_points_name(site, work):
    indexed_and_damaged(site, work)
    r = cli(work, "audit", "--fix", "--include-foreign", "--json", *COMMON)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "using embedder 'fake-hash-16'" in r.stderr
    assert json.loads(r.stdout)["after_fix"]["ok"]


def test_search_without_embedder_uses_the_one_the_points_name_and_a_wrong_one_is_exit_2(site, work):
    cli_build(site)
    assert cli_run(site, work).returncode == 0
    ok, wrong = parallel(
        lambda: cli(work, "search", "p1-s1", "--qdrant-path", "q", "--json"),
        lambda: cli(work, "search", "p1-s1", "--qdrant-path", "q", "--embedder", "fake-32"),
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr
    assert "16-dimensional" in one_error_line(wrong)


# -- B: a damaged state file ------------------------------------------------------------------------
def _damage_state(path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # what the tester did: garbage over bytes 8192-60000
        fh.seek(8192)
        fh.write(b"\xab" * (min(60000, size - 4096) - 8192))


def test_a_damaged_state_is_exit_2_naming_the_file_and_what_to_do(site, work):
    cli_build(site, n=30, sections=6)
    assert cli_run(site, work, "--now", "2026-01-01T00:00:00Z").returncode == 0
    db = work / "s.db"
    with sqlite3.connect(db) as c:  # fold the WAL in, so the damage is in the file the next open reads
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert db.stat().st_size > 20000
    _damage_state(db)
    calls = [
        lambda: cli_run(site, work, "--full"),
        lambda: cli_run(site, work, "--now", "2026-01-01T00:00:00Z"),  # nothing due
        lambda: cli_run(site, work, "--now", "2027-01-01T00:00:00Z"),  # everything due
        lambda: cli(work, "status", *COMMON),
        lambda: cli(work, "audit", *COMMON),
    ]
    for r in [call() for call in calls]:  # one at a time: each takes the state's pass lock
        assert r.returncode == 2, r.args[3:] + [r.stdout, r.stderr]
        line = one_error_line(r)
        assert "s.db" in line and "state import" in line and "delete it" in line


def test_a_state_that_is_not_a_database_is_exit_2(work):
    (work / "s.db").write_bytes(b"not a database at all " * 400)
    r = cli(work, "status", *COMMON)
    assert r.returncode == 2, r.stderr
    assert "s.db" in one_error_line(r)


# -- C: configuration and environment errors ---------------------------------------------------------
def test_a_shard_held_by_another_process_is_exit_2_for_readers(site, work):
    """audit, export and search need the points: exit 2, at once, naming the writer (a pass
    holds its shard for minutes: waiting for it helps no reader). status reports from the
    state (README: it always reports), the points not counted and a warning first
    (tests/commands/test_cli.py::test_status_reports_from_the_state_while_a_pass_holds_the_store)."""
    import os

    cli_build(site)
    assert cli_run(site, work).returncode == 0
    holder = EdgeStore(work / "q", "pages")
    holder.count()  # opens (and locks) the shard, as a pass does
    # Longer than cli()'s 60 s timeout: a reader that waited for the writer would fail the test.
    long = {"PAGESYNC_STORE_WAIT": "120"}
    try:
        rs = parallel(
            lambda: cli(work, "status", *COMMON),
            lambda: cli(work, "audit", *COMMON, env=long),
            lambda: cli(work, "export", *COMMON, env=long),
            lambda: cli(work, "search", "p1-s1", "--qdrant-path", "q", env=long),
        )
    finally:
        holder.close()
    status, readers = rs[0], rs[1:]
    assert status.returncode == 0 and "open in another process" in status.stdout.splitlines()[0]
    for r in readers:
        assert r.returncode == 2, r.args[3:] + [r.stdout, r.stderr]
        line = one_error_line(r)
        assert "open in another process for writing" in line and f"pid {os.getpid()}" in line


def test_a_writer_waits_for_a_shard_held_and_says_how_long(site, work):
    cli_build(site)
    assert cli_run(site, work).returncode == 0
    point = cli(work, "export", "--with-vectors", *COMMON).stdout.splitlines()[0]
    holder = EdgeStore(work / "q", "pages", reading=True)
    holder.count()
    try:
        r = cli(work, "import", "-", *COMMON, input=point + "\n", env={"PAGESYNC_STORE_WAIT": "0.2"})
    finally:
        holder.close()
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    assert "open in another process" in line and "a reader" in line and "waited 0.2s" in line


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_store_wait_that_is_not_seconds_is_exit_2(work, value):
    r = cli(work, "export", *COMMON, env={"PAGESYNC_STORE_WAIT": value})
    assert r.returncode == 2 and "PAGESYNC_STORE_WAIT" in one_error_line(r) and "seconds" in r.stderr


def test_unreachable_server_and_unusable_paths_are_exit_2(site, work):
    cli_build(site)
    args = ("run", "--sitemap", sitemap(site), "--embedder", "fake")
    rs = parallel(
        lambda: cli(work, *args, "--state", "s.db", "--qdrant-url", "http://127.0.0.1:1"),
        lambda: cli(work, "export", "--qdrant-url", "http://127.0.0.1:1"),
        lambda: cli(work, *args, "--state", "/proc/x/state.db", "--qdrant-path", "q"),
        lambda: cli(work, *args, "--state", "s2.db", "--qdrant-path", "/proc/x/q"),
        # Seen in use: a --qdrant-path that is a plain file was exit 1 ("cannot read the alias file").
        lambda: (
            work.joinpath("garbage.db").write_text("x"),
            cli(work, *args, "--state", "s3.db", "--qdrant-path", "garbage.db"),
        )[1],
    )
    for r in rs:
        assert r.returncode == 2, r.args[3:] + [r.stdout, r.stderr]
        one_error_line(r)
    assert "Qdrant" in rs[0].stderr and "127.0.0.1:1" in rs[1].stderr
    assert "/proc/x/state.db" in rs[2].stderr and "/proc/x/q" in rs[3].stderr
    assert "garbage.db" in rs[4].stderr and "not a directory" in rs[4].stderr


# -- H: a collection that does not exist -------------------------------------------------------------
def test_a_mistyped_collection_is_exit_2_for_every_reader(site, work):
    """audit, export and search refuse; status reports, its first line a warning naming it."""
    cli_build(site)
    assert cli_run(site, work).returncode == 0
    rs = parallel(
        *[lambda c=c: cli(work, c, "--collection", "pagse", *COMMON) for c in ("audit", "export")],
        lambda: cli(work, "search", "x", "--collection", "pagse", "--qdrant-path", "q"),
        lambda: cli(work, "status", "--collection", "pagse", *COMMON),
    )
    for r in rs[:-1]:
        assert r.returncode == 2, r.args[3:] + [r.stdout, r.stderr]
        assert "collection 'pagse' not found in q" in one_error_line(r)
    st = rs[-1]
    assert st.returncode == 0, st.stderr
    first = st.stdout.splitlines()[0]
    assert first.startswith("warning: collection 'pagse' was not found in q (a mistyped --collection"), first


def test_nothing_indexed_yet_is_not_a_missing_collection(site, work):
    """A first pass that indexed nothing (every page failed): status and audit say so, exit 0."""
    cli_build(site, n=1)
    site.error("/p0.html", 500)
    assert cli_run(site, work).returncode == 1
    rs = parallel(
        lambda: cli(work, "status", *COMMON), lambda: cli(work, "audit", *COMMON), lambda: cli(work, "export", *COMMON)
    )
    for r in rs:
        assert r.returncode == 0, r.args[3:] + [r.stdout, r.stderr]


# -- D: numbers that add up and say what they count ---------------------------------------------------
def test_status_pages_line_adds_up_and_audit_examples_say_what_they_count(site, work):
    urls = cli_build(site, n=4)
    assert cli_run(site, work).returncode == 0
    site.remove("/p3.html")
    assert cli_run(site, work, "--full").returncode == 0
    r = cli(work, "status", *COMMON)
    assert r.returncode == 0, r.stderr
    assert "pages: 3 tracked (3 live); 1 gone (no points); 4 in the state" in r.stdout, r.stdout

    store = EdgeStore(work / "q", "pages")
    damage(store, site)  # among others: /p1.html loses its chunk 1 -> broken
    store.close()
    r = cli(work, "audit", *COMMON)
    assert r.returncode == 1
    broken = next(ln for ln in r.stdout.splitlines() if ln.startswith("broken"))
    assert "good current points of" in broken and "recorded" in broken and urls[1] in broken, broken


# -- E: a dry run's lines --------------------------------------------------------------------------------
def test_dry_run_lines_read_as_would_be_actions(site, work):
    urls = cli_build(site)
    assert cli_run(site, work).returncode == 0
    site.remove("/p2.html")
    r = cli_run(site, work, "--dry-run", "--full")
    assert r.returncode == 0, r.stderr
    assert f"would remove {urls[2]}" in r.stderr
    assert any(ln.startswith("would remove") and urls[2] in ln for ln in r.stdout.splitlines()), r.stdout
    assert "removed " not in r.stderr and "would removed" not in r.stdout


def test_a_page_answering_an_error_in_a_dry_run_reads_as_failed_not_would_fail(site, work):
    """The dry run fetched the page and it answered 500: that happened, so its lines say
    "failed", not "would fail", and no "error" line suggests that something failed to be
    written. The exit code stays the contract's: 1, pages failed."""
    urls = cli_build(site)
    assert cli_run(site, work).returncode == 0
    site.error("/p1.html", 500)
    r = cli_run(site, work, "--dry-run", "--full")
    assert r.returncode == 1, r.stderr
    out = r.stdout + r.stderr
    assert "would fail" not in out and not any(ln.startswith("error") for ln in r.stderr.splitlines()), out
    (line,) = [ln for ln in r.stdout.splitlines() if urls[1] in ln]
    assert line.startswith("failed ") and "(HTTP 500; a pass would keep its points and retry later)" in line, line
    assert f"failed {urls[1]}: HTTP 500 (dry run: nothing written)" in r.stderr, r.stderr
    real = cli_run(site, work, "--full")
    assert real.returncode == 1 and f"error {urls[1]}: HTTP 500" in real.stderr, real.stderr


# -- F: -q / -v after `run`, quiet third parties, help texts -----------------------------------------------
def test_run_takes_q_and_v_and_v_logs_skips_but_no_third_party_debug(site, work):
    urls = cli_build(site)
    assert cli_run(site, work, "-q").returncode == 0
    r = cli_run(site, work, "--full", "-v")
    assert r.returncode == 0, r.stderr
    assert f"not_modified {urls[0]}" in r.stderr  # every page, skips included
    assert "Using selector" not in r.stderr and "minimum date" not in r.stderr
    r = cli(work, "-v", "run", "--sitemap", sitemap(site), *COMMON, "--embedder", "fake", "--full")
    assert r.returncode == 0 and f"not_modified {urls[0]}" in r.stderr
    assert "Using selector" not in r.stderr


def test_help_texts():
    import typer.testing

    from sync.commands.cli import app

    runner = typer.testing.CliRunner(env={"COLUMNS": "250"})
    top = runner.invoke(app, ["--help"]).output
    assert "exit 1 when anything is found" in top and "switch an alias to it" in top
    assert "(at most 4 per host)" not in runner.invoke(app, ["run", "--help"]).output
    assert "How many chunks" in runner.invoke(app, ["search", "--help"]).output


# -- G: an error names its URL once ---------------------------------------------------------------------------
def test_a_sitemap_error_names_the_url_once(site, work):
    cli_build(site)
    site.sitemap_mode = "missing"  # the sitemap answers 404
    r = cli_run(site, work)
    assert r.returncode == 1, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    assert line.count(sitemap(site)) == 1, line


def test_run_without_a_sitemap_or_url_is_a_usage_error_even_with_a_state(site, work):
    """The state does not keep the sources, and the scope is theirs: a run without them
    used to skip every due page as out of scope and exit 0."""
    cli_build(site)
    assert cli_run(site, work).returncode == 0
    r = cli(work, "run", "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake", "--now", "2030-01-01T00:00:00Z")
    assert r.returncode == 2
    assert "give --sitemap or --url" in one_error_line(r) and "--crawl" in one_error_line(r)
    fresh = cli(work, "run", "--qdrant-path", "q2", "--state", "s2.db", "--embedder", "fake")
    assert fresh.returncode == 2 and "give --sitemap or --url" in one_error_line(fresh)
    assert not (work / "s2.db").exists()


def test_audit_fix_now_is_the_repair_pass_clock(site, work):
    """A replay or backfill runs `run --now`; `audit --fix` in it must not record its repair
    pass at the wall clock (every later pass then warned that its --now was
    before the last pass's clock, and the repaired pages were scheduled from the real date)."""
    cli_build(site, n=4)
    assert cli_run(site, work, "--now", "2026-01-01T00:00:00Z").returncode == 0
    store = EdgeStore(work / "q", "pages")
    try:
        damage(store, site)
    finally:
        store.close()
    r = cli(work, "audit", "--fix", "--include-foreign", "--now", "2026-01-01T06:00:00Z", *COMMON)
    assert r.returncode == 0, r.stdout + r.stderr
    db = sqlite3.connect(str(work / "s.db"))
    try:
        last = json.loads(db.execute("SELECT report FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()[0])
        fetched = {row[0] for row in db.execute("SELECT last_fetched_at FROM pages")}
    finally:
        db.close()
    assert last["now"].startswith("2026-01-01T06:00:00")
    assert max(fetched) == pytest.approx(1767247200.0)  # 2026-01-01T06:00:00Z, not today
    r = cli_run(site, work, "--now", "2026-01-02T00:00:00Z")
    assert r.returncode == 0 and "before the last pass's clock" not in r.stderr, r.stderr
    bad = cli(work, "audit", "--fix", "--now", "yesterday", *COMMON)
    assert bad.returncode == 2 and "--now 'yesterday'" in one_error_line(bad)


def test_a_run_with_another_embedder_of_the_same_size_is_refused_even_with_full(site, work):
    """Seen in use: a pass with another model of the same vector size (fake-384, then the
    default all-MiniLM-L6-v2) re-embedded only the pages it visited; the collection then held
    both models' vectors, and audit, status and search said nothing. Refused (exit 2, nothing
    written), --full too; without --embedder a run keeps the collection's own model."""
    cli_build(site, n=3)
    common = ("--sitemap", sitemap(site), "--qdrant-path", "q", "--state", "s.db")
    assert cli(work, "run", *common, "--embedder", "fake-384").returncode == 0
    site.set("/p1.html", site.resources["/p1.html"].body.replace(b"p1-s1", b"p1-s1 edited"))
    before = stored(work)
    for extra in ((), ("--full",)):
        r = cli(work, "run", *common, "--embedder", "all-MiniLM-L6-v2", *extra, env={"HF_HUB_OFFLINE": "1"})
        assert r.returncode == 2, r.stdout + r.stderr
        line = one_error_line(r)
        assert "'fake-hash-384'" in line and "reindex" in line and "--embedder fake-384" in line
        assert stored(work) == before
    r = cli(work, "run", *common, "--full")  # no --embedder: the collection's own model
    assert r.returncode == 0, r.stderr
    assert {p["embedder"] for p in stored(work).values()} == {"fake-hash-384"}


def test_audit_fix_with_one_state_leaves_another_states_site_alone(site, work):
    """Seen in use: two sites, each with its own --state, in one collection; `audit --fix
    --state a.db` deleted the other site's points as orphans, and that site's next run did
    not notice (0 fetched). Points of a site a state never tracked are foreign to it."""
    from demo.site_server import Site, SiteServer

    cli_build(site, n=2)
    other = Site()
    with SiteServer(other) as server:
        other.server = server  # type: ignore[attr-defined]
        other.set("/b.html", page_html("B", [para("b")]))
        for state, sm in (("a.db", sitemap(site)), ("b.db", server.url("/sitemap.xml"))):
            r = cli(work, "run", "--sitemap", sm, "--qdrant-path", "q", "--state", state, "--embedder", "fake")
            assert r.returncode == 0, r.stderr
        before = stored(work)
        r = cli(work, "audit", "--qdrant-path", "q", "--state", "a.db", "--json")
        found = json.loads(r.stdout)["audit"]
        assert found["counts"]["orphans"] == 0 and found["counts"]["foreign"] > 0, found
        r = cli(work, "audit", "--fix", "--qdrant-path", "q", "--state", "a.db", "--embedder", "fake")
        assert stored(work) == before, "another state's site was deleted"


@pytest.mark.parametrize("flag", ["--crawl", "--url", "--sitemap"])
@pytest.mark.parametrize("url", ["http://[::1", "https://h.example:99999/"])
def test_a_source_that_does_not_parse_is_one_line_and_exit_2_with_nothing_written(flag, url, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from sync.commands.cli import app

    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["run", flag, url, "--embedder", "fake", "--state", "s.db", "--qdrant-path", "q"])
    assert r.exit_code == 2 and r.stderr.strip() == f"pagesync: error: {flag} {url!r} is not a URL ({_why(url)})"
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "q").exists()


def _why(url: str) -> str:
    from sync.core.ids import canonical_url

    try:
        canonical_url(url)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(url)
