"""The `pagesync` command line, driven as a subprocess exactly as docs/commands/ documents it.

Every call is `python -m sync ...` in a fresh working directory, against the `site`
fixture (a docs site on 127.0.0.1), with `--embedder fake` so no model is loaded.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from sync.commands.options import parse_duration as _parse_duration
from sync.errors import ConfigError
from sync.core.ids import chunk_id, point_id
from sync.edges.edge_store import EdgeStore
from tests.cli_helpers import (
    API_KEY,
    DEAD,
    ROOT,
    T0_ISO,
    cli,
    cli_build,
    cli_run,
    one_error_line,
    parallel,
    sitemap,
    state_db_rows,
    stored,
)
from tests.helpers import REPORT_KEYS, page_html, para

PAYLOAD_KEYS = {"url", "chunk_id", "chunk_index", "content_hash", "text", "title", "fetched_at", "embedder", "metadata"}


# -- helpers ----------------------------------------------------------------------------------
def export(work: Path, *extra: str) -> list[dict]:
    r = cli(work, "export", *extra)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def by_id(records: list[dict]) -> dict[str, dict]:
    out = {rec["id"]: rec for rec in records}
    assert len(out) == len(records), "duplicate ids in export"
    return out


# -- run ----------------------------------------------------------------------------------------
def test_run_report_keys_and_counts_then_a_full_pass_is_all_not_modified(site, work):
    urls = cli_build(site)
    r = cli_run(site, work, "--now", T0_ISO, report="R.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "R.json").read_text())
    assert REPORT_KEYS <= rep.keys()
    assert rep["pages_in_sitemaps"] == 3
    assert rep["pages_fetched"] == 3
    assert rep["pages_added"] == 3
    assert (rep["pages_not_modified"], rep["pages_unchanged"], rep["pages_changed"]) == (0, 0, 0)
    assert (rep["pages_removed"], rep["pages_failed"], rep["chunks_deleted"]) == (0, 0, 0)
    assert rep["errors"] == []
    assert rep["bytes_downloaded"] > 0
    started = datetime.fromisoformat(rep["started_at"])
    finished = datetime.fromisoformat(rep["finished_at"])
    assert started.tzinfo is not None and started <= finished

    points = stored(work)
    assert len(points) == rep["chunks_written"] == rep["chunks_embedded"] >= 3
    assert {p["url"] for p in points.values()} == set(urls)
    for p in points.values():
        # --now is the pass's clock
        assert datetime.fromisoformat(p["fetched_at"]) == datetime(2026, 1, 1, tzinfo=timezone.utc)

    # second pass, --full, over the unchanged site: every page answers 304, nothing is embedded
    r = cli_run(site, work, "--full", report="R2.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "R2.json").read_text())
    assert REPORT_KEYS <= rep.keys()
    assert rep["pages_not_modified"] == rep["pages_fetched"] == rep["pages_in_sitemaps"] == 3
    assert rep["chunks_embedded"] == rep["chunks_written"] == rep["chunks_deleted"] == 0
    assert rep["pages_added"] == rep["pages_changed"] == rep["pages_removed"] == rep["pages_failed"] == 0
    assert rep["errors"] == []
    assert stored(work) == points


def test_dry_run_prints_would_lines_and_writes_nothing(site, work):
    urls = cli_build(site)
    r = cli_run(site, work, "--dry-run")
    assert r.returncode == 0, r.stderr
    would = [ln for ln in r.stdout.splitlines() if ln.startswith("would")]
    assert len(would) == 3
    for u in urls:
        assert any(u in ln and ln.startswith("would add ") for ln in would), r.stdout
        assert f"would add {u}" in r.stderr, r.stderr  # the log lines say would-be actions too
    assert "added " not in r.stderr and "would added" not in r.stdout
    assert not (work / "q" / "pages").exists(), "dry run created the collection"
    assert sorted(p.name for p in work.iterdir()) == [], "dry run wrote files (state database / lock)"


def test_dry_run_after_a_pass_changes_neither_collection_nor_state(site, work):
    urls = cli_build(site)
    assert cli_run(site, work, "--now", T0_ISO).returncode == 0
    points_before = stored(work)
    state_before = state_db_rows(work / "s.db")
    site.set("/p1.html", page_html("Page 1", [para("rewritten-1"), para("rewritten-2")]))
    site.remove("/p2.html")

    r = cli_run(site, work, "--dry-run", "--full")
    assert r.returncode == 0, r.stderr
    would = [ln for ln in r.stdout.splitlines() if ln.startswith("would")]
    assert len(would) == 2, r.stdout
    assert any(urls[1] in ln and ln.startswith("would change ") for ln in would), r.stdout
    assert any(urls[2] in ln and ln.startswith("would remove ") for ln in would), r.stdout
    assert stored(work) == points_before
    assert state_db_rows(work / "s.db") == state_before


def test_bad_now_exits_2_with_one_line_and_writes_nothing(site, work):
    cli_build(site)
    r = cli_run(site, work, "--now", "yesterday-ish")
    assert r.returncode == 2
    assert "--now" in one_error_line(r)
    assert list(work.iterdir()) == []
    assert site.count() == 0  # nothing was fetched either


@pytest.mark.parametrize(
    "text,expected",
    [
        ("12h", timedelta(hours=12)),
        ("3d", timedelta(days=3)),
        ("1w", timedelta(weeks=1)),
        ("90m", timedelta(minutes=90)),
        ("1d12h", timedelta(hours=36)),
        ("1.5d", timedelta(hours=36)),
        (" 2D ", timedelta(days=2)),
    ],
)
def test_durations(text, expected):
    assert _parse_duration(text, "--x") == expected


@pytest.mark.parametrize(
    "text", ["", "3", "d", "3 d", "3x", "-1d", "1d-", "1e3h", "1h 2m", "P3D", "99999999999999999w"]
)
def test_bad_durations_name_the_flag(text):
    with pytest.raises(ConfigError, match="--x"):
        _parse_duration(text, "--x")


@pytest.mark.parametrize(
    "extra",
    [
        ["--policy", "uniform", "--revisit-interval", "2x"],  # not a duration
        ["--revisit-interval", "1d"],  # the default policy sets each page's interval itself
        ["--policy", "uniform", "--revisit-interval", "1h"],  # below the 6 h floor
    ],
)
def test_bad_revisit_interval_exits_2_with_one_line_and_writes_nothing(site, work, extra):
    cli_build(site)
    r = cli_run(site, work, *extra)
    assert r.returncode == 2
    assert "interval" in one_error_line(r)
    assert list(work.iterdir()) == []
    assert site.count() == 0


def test_uniform_revisit_interval_schedules_every_page_that_far_ahead(site, work):
    cli_build(site)
    r = cli_run(site, work, "--now", T0_ISO, "--policy", "uniform", "--revisit-interval", "12h")
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(work / "s.db") as db:
        due = {row[0] for row in db.execute("SELECT due_at FROM pages")}
    assert due == {datetime(2026, 1, 1, 12, tzinfo=timezone.utc).timestamp()}, due  # T0_ISO + 12 h


@pytest.mark.parametrize("bad", ["ftp://example.com/sitemap.xml", "sitemap.xml"])
def test_non_http_sitemap_exits_2(work, bad):
    r = cli(work, "run", "--sitemap", bad, "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake")
    assert r.returncode == 2
    assert "--sitemap" in one_error_line(r)
    assert list(work.iterdir()) == []


def test_run_without_sitemap_url_or_state_exits_2(work):
    r = cli(work, "run", "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake")
    assert r.returncode == 2
    one_error_line(r)
    assert list(work.iterdir()) == []


def test_page_failures_exit_1_and_are_reported(site, work):
    urls = cli_build(site)
    site.error("/p1.html", 500)
    r = cli_run(site, work, report="R.json")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    rep = json.loads((work / "R.json").read_text())
    assert rep["pages_failed"] == 1
    assert rep["pages_added"] == 2
    assert len(rep["errors"]) == 1
    (err,) = rep["errors"]
    assert set(err) == {"url", "error"}
    assert err["url"] == urls[1]
    assert "500" in err["error"]
    assert {p["url"] for p in stored(work).values()} == {urls[0], urls[2]}
    # One line for the failed page on stderr (its error), not a progress line and then its error.
    assert [ln for ln in r.stderr.splitlines() if urls[1] in ln] == [f"error {urls[1]}: HTTP 500"], r.stderr


def test_the_summary_line_says_how_many_due_pages_max_fetches_left(site, work):
    cli_build(site, n=5)
    r = cli_run(site, work, "--max-fetches", "2", "--now", T0_ISO, report="R.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "R.json").read_text())
    assert rep["pages_deferred"] == 3
    summary = r.stderr.strip().splitlines()[-1]
    assert "0 failed, 3 deferred (--max-fetches); chunks:" in summary, summary
    r = cli_run(site, work, "--now", T0_ISO)  # nothing left over: not said
    assert "deferred" not in r.stderr.strip().splitlines()[-1]


def test_dead_qdrant_url_from_env_fails_with_one_clear_line(site, work):
    cli_build(site)
    r = cli(
        work,
        "run",
        "--sitemap",
        sitemap(site),
        "--state",
        "s.db",
        "--embedder",
        "fake",
        env={"QDRANT_URL": DEAD, "QDRANT_API_KEY": API_KEY},
    )
    assert r.returncode in (1, 2), (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    assert API_KEY not in r.stderr and API_KEY not in r.stdout
    assert site.count() == 0, "the store is checked before anything is fetched"
    line = one_error_line(r)
    assert "Qdrant" in line


# -- status -------------------------------------------------------------------------------------
def test_status_shows_tracked_and_due_counts(site, work):
    cli_build(site)
    assert cli_run(site, work, "--now", T0_ISO).returncode == 0
    n_points = len(stored(work))

    r = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--now", T0_ISO)  # clock of the pass
    assert r.returncode == 0, r.stderr
    assert "pages: 3 tracked" in r.stdout
    assert "due now: 0" in r.stdout
    assert f"collection pages: {n_points} points" in r.stdout

    r = cli(work, "status", "--json", "--qdrant-path", "q", "--state", "s.db", "--now", "2026-02-01T00:00:00Z")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert (info["pages_tracked"], info["pages_due"], info["points"]) == (3, 3, n_points)
    assert info["collection"] == "pages"


def test_status_shows_failing_pages_with_a_few_examples_without_pages(site, work):
    """`status` used to list failing pages (and their errors) only with --pages:
    now it names the first few, with their last error, and how many more."""
    urls = cli_build(site, n=7, sections=1)
    assert cli_run(site, work, "--now", T0_ISO).returncode == 0
    for i in range(7):
        site.error(f"/p{i}.html", 500)
    assert cli_run(site, work, "--now", T0_ISO, "--full").returncode == 1
    r = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--now", T0_ISO)
    assert r.returncode == 0, r.stderr
    assert "failing: 7" in r.stdout
    shown = [ln for ln in r.stdout.splitlines() if ln.startswith("  ") and "HTTP 500" in ln]
    assert len(shown) == 5 and all(any(u in ln for u in urls) for ln in shown), r.stdout
    assert "2 more failing pages: see status --pages" in r.stdout, r.stdout
    info = json.loads(cli(work, "status", "--json", "--qdrant-path", "q", "--state", "s.db", "--now", T0_ISO).stdout)
    assert info["pages_failing"] == 7 and len(info["failing_examples"]) == 5
    assert {"url", "failures", "last_error"} <= info["failing_examples"][0].keys()
    assert "HTTP 500" in info["failing_examples"][0]["last_error"]
    r = cli(work, "status", "--pages", "--qdrant-path", "q", "--state", "s.db", "--now", T0_ISO)
    assert "see status --pages" not in r.stdout  # every page is listed below


def test_status_says_when_the_sitemap_lastmod_is_one_stamp(site, work):
    """The one case where the revisit policy alone decides, and the README's advice for it."""
    cli_build(site)
    site.sitemap_mode = "same-lastmod"
    assert cli_run(site, work, "--now", T0_ISO).returncode == 0
    r = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--now", T0_ISO)
    assert r.returncode == 0, r.stderr
    assert "the same stamp on every URL" in r.stdout and "--policy uniform" in r.stdout
    assert cli_run(site, work, "--now", "2026-01-05T00:00:00Z", "--policy", "uniform").returncode == 0
    r = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--now", "2026-01-05T00:00:00Z")
    assert "same stamp" not in r.stdout  # the advice is taken


def test_status_shows_each_hosts_lastmod_trust(site, work):
    cli_build(site)
    for i in range(3):  # distinct stamps: a usable lastmod
        site.touch(f"/p{i}.html", 1_700_000_000 + 3600 * i)
    assert cli_run(site, work, "--now", T0_ISO, "--policy", "change-rate").returncode == 0
    r = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--now", T0_ISO)
    assert "same stamp" not in r.stdout and "host " not in r.stdout  # no advance seen yet
    site.set("/p0.html", page_html("Page 0", [para("edited")]), mtime=1_700_000_000 + 86400)
    assert (
        cli_run(site, work, "--now", "2026-01-01T01:00:00Z", "--policy", "change-rate").returncode == 0
    )  # the advance is visited, confirmed
    r = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--now", "2026-01-01T01:00:00Z")
    host = site.server.url("/").split("//")[1].split(":")[0]
    assert (
        f"host {host}: 1 sitemap lastmod advance, 1 confirmed by a text change: trust 0.75, "
        "advances make a page due now"
    ) in r.stdout, r.stdout
    r = cli(work, "status", "--json", "--qdrant-path", "q", "--state", "s.db", "--now", "2026-01-01T01:00:00Z")
    assert json.loads(r.stdout)["hosts"] == [
        {"host": host, "lastmod_advances": 1, "lastmod_confirmed": 1, "lastmod_trust": 0.75, "lastmod_followed": True}
    ]


# -- export / import ------------------------------------------------------------------------------
def test_export_lines_and_round_trip_through_import(site, work):
    cli_build(site)
    r = cli_run(site, work, report="R.json")
    assert r.returncode == 0, r.stderr
    written = json.loads((work / "R.json").read_text())["chunks_written"]

    plain = export(work, "--qdrant-path", "q")
    assert len(plain) == written
    for rec in plain:
        assert set(rec) == {"id", "payload"}
        p = rec["payload"]
        assert PAYLOAD_KEYS <= set(p)
        assert p["chunk_id"] == chunk_id(p["url"], p["chunk_index"])
        assert rec["id"] == point_id(p["chunk_id"])
        assert p["embedder"] == "fake-hash-16"

    r = cli(work, "export", "--qdrant-path", "q", "--with-vectors")
    assert r.returncode == 0, r.stderr
    dump = r.stdout  # piped into `import` below, byte for byte
    vec = [json.loads(line) for line in dump.splitlines()]
    assert len(vec) == written
    for rec in vec:
        # The dense vector, and the BM25 keyword one beside it (every point a pass writes has one).
        assert set(rec) == {"id", "payload", "vector", "sparse_vector"}
        assert len(rec["vector"]) == 16
        assert set(rec["sparse_vector"]) == {"indices", "values"} and rec["sparse_vector"]["indices"]
        assert math.isclose(math.sqrt(sum(x * x for x in rec["vector"])), 1.0, abs_tol=1e-4)
    assert {r["id"]: r["payload"] for r in vec} == {r["id"]: r["payload"] for r in plain}

    # export --with-vectors | import, into another collection and into another embedded store
    original = vec
    (work / "dump.jsonl").write_text(dump)
    imports = parallel(
        lambda: cli(work, "import", "--collection", "copy", "--qdrant-path", "q", input=dump),  # from stdin
        lambda: cli(work, "import", "dump.jsonl", "--qdrant-path", "q2"),  # from a file
    )
    for r in imports:
        assert r.returncode == 0, r.stderr
    exports = parallel(
        lambda: export(work, "--collection", "copy", "--qdrant-path", "q", "--with-vectors"),
        lambda: export(work, "--qdrant-path", "q2", "--with-vectors"),
    )
    for exp in exports:
        _same_points(original, exp)
    # the source is untouched
    assert stored(work) == {rec["id"]: rec["payload"] for rec in original}


def _same_points(a: list[dict], b: list[dict]) -> None:
    a, b = by_id(a), by_id(b)
    assert set(a) == set(b)
    for pid in a:
        assert a[pid]["payload"] == b[pid]["payload"]
        assert len(a[pid]["vector"]) == len(b[pid]["vector"])
        assert all(abs(x - y) < 1e-5 for x, y in zip(a[pid]["vector"], b[pid]["vector"]))
        sa, sb = a[pid].get("sparse_vector"), b[pid].get("sparse_vector")
        assert (sa is None) == (sb is None)
        if sa is not None:  # imported as given, not recomputed
            assert sa["indices"] == sb["indices"]
            assert all(abs(x - y) < 1e-5 for x, y in zip(sa["values"], sb["values"], strict=True))


def good_line(i: int) -> str:
    url = f"https://x.example/p{i}"
    return json.dumps(
        {"id": point_id(chunk_id(url, 0)), "payload": {"url": url, "chunk_index": 0}, "vector": [0.6, 0.8]}
    )


def test_import_of_a_malformed_line_exits_2_and_writes_no_points(work):
    good = json.dumps(
        {
            "id": point_id(chunk_id("https://x.example/a", 0)),
            "payload": {"url": "https://x.example/a", "chunk_index": 0},
            "vector": [0.6, 0.8],
        }
    )
    no_vector = json.dumps(
        {"id": point_id(chunk_id("https://x.example/a", 1)), "payload": {"url": "https://x.example/a"}}
    )
    cases = [
        ("{not json\n", "line 1"),
        ('{"payload": {"url": "u"}, "vector": [1.0, 0.0]}\n', "line 1"),  # no id
        (good + "\n" + '{"id": "x", "payload": [1, 2]\n', "line 2"),  # broken second line
        (no_vector + "\n", "line 1"),  # a plain export line: no vector
        # Seen in use: 600 good lines, then an id Qdrant refuses: 512 points were written, exit 1.
        (
            "".join(good_line(i) + "\n" for i in range(600))
            + json.dumps({"id": "not-a-uuid", "payload": {}, "vector": [0.6, 0.8]})
            + "\n"
            + good_line(600)
            + "\n",
            "line 601",
        ),
        (
            good_line(0)
            + "\n"
            + good_line(1)
            + "\n"
            + json.dumps({"id": point_id("c"), "payload": {}, "vector": [0.6, 0.8, 0.0]})
            + "\n",
            "line 3",
        ),  # mixed sizes
    ]
    results = parallel(
        *[
            (lambda i=i, text=text: cli(work, "import", "--collection", f"target{i}", "--qdrant-path", "q", input=text))
            for i, (text, _) in enumerate(cases)
        ]
    )
    for i, ((text, where), r) in enumerate(zip(cases, results)):
        assert r.returncode == 2, (text[:200], r.returncode, r.stderr)
        assert where in one_error_line(r)
        assert stored(work, collection=f"target{i}") == {}
    # The same from a file (read twice: checked, then imported) as from stdin (spooled).
    (work / "bad.jsonl").write_text(cases[-2][0])
    r = cli(work, "import", "bad.jsonl", "--collection", "fromfile", "--qdrant-path", "q")
    assert r.returncode == 2 and "line 601" in one_error_line(r)
    assert stored(work, collection="fromfile") == {}
    (work / "ok.jsonl").write_text("".join(good_line(i) + "\n" for i in range(300)))
    r = cli(work, "import", "ok.jsonl", "--collection", "fromfile", "--qdrant-path", "q")
    assert r.returncode == 0, r.stderr
    assert len(stored(work, collection="fromfile")) == 300


def test_import_of_a_missing_file_exits_2(work):
    r = cli(work, "import", "no-such-file.jsonl", "--qdrant-path", "q")
    assert r.returncode == 2
    assert "no-such-file.jsonl" in one_error_line(r)
    assert list(work.iterdir()) == []


# -- shared options ------------------------------------------------------------------------------
def test_export_into_a_closed_pipe_ends_quietly(site, work):
    """`pagesync export | head -1`: the reader leaves early. That was 'pagesync: error: [Errno
    32] Broken pipe', twice, and exit 2 (a usage error); now silence and 141, as SIGPIPE gives."""
    cli_build(site)
    assert cli_run(site, work).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "sync", "export", "--qdrant-path", "q", "--state", "s.db", "--with-vectors"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Broken pipe" not in err and "Traceback" not in err, err


def test_status_export_import_accept_the_shared_options(site, work):
    cli_build(site)
    assert cli_run(site, work, "--collection", "docs").returncode == 0
    common = ["--collection", "docs", "--qdrant-path", "q", "--state", "s.db", "--api-key", API_KEY]

    r = cli(work, "status", *common)
    assert r.returncode == 0, r.stderr
    assert "collection docs:" in r.stdout and "pages: 3 tracked" in r.stdout

    r = cli(work, "export", *common, "--with-vectors")
    assert r.returncode == 0, r.stderr
    dump = r.stdout
    assert len(dump.splitlines()) >= 3

    r = cli(
        work,
        "import",
        "--collection",
        "docs2",
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        "--api-key",
        API_KEY,
        input=dump,
    )
    assert r.returncode == 0, r.stderr
    assert stored(work, collection="docs2") == stored(work, collection="docs")

    # --qdrant-url is honoured (the dead server is used instead of the embedded store), and
    # the key given with --api-key is never printed. The three calls run side by side.
    results = parallel(
        *[
            (lambda cmd=cmd, stdin=stdin: cli(work, cmd, *common, "--qdrant-url", DEAD, input=stdin))
            for cmd, stdin in (("status", None), ("export", None), ("import", dump))
        ]
    )
    for cmd, r in zip(("status", "export", "import"), results):
        assert r.returncode == 2, (cmd, r.returncode, r.stderr)  # an unreachable server is exit 2
        assert "No such option" not in r.stderr
        assert "Traceback" not in r.stderr
        assert API_KEY not in r.stderr and API_KEY not in r.stdout
        assert any(ln.startswith("pagesync: error:") and "Qdrant" in ln for ln in r.stderr.splitlines()), r.stderr


def test_audit_accepts_the_shared_options(site, work):
    r = cli(work, "audit", "--help")
    if r.returncode != 0 and "No such command" in r.stderr:
        pytest.skip("pagesync audit is not implemented yet")
    assert r.returncode == 0, r.stderr
    for opt in ("--collection", "--qdrant-url", "--api-key", "--qdrant-path", "--state", "--json", "--fix"):
        assert opt in r.stdout, opt
    cli_build(site)
    assert cli_run(site, work, "--collection", "docs").returncode == 0
    r = cli(work, "audit", "--collection", "docs", "--qdrant-path", "q", "--state", "s.db", "--api-key", API_KEY)
    assert r.returncode == 0, r.stdout + r.stderr  # a fresh pass leaves nothing to find


@pytest.mark.parametrize("dry", [False, True])
def test_the_mass_deletion_guard_says_so_in_one_plain_line(site, work, dry):
    """The guard's refusal is the pass's, not a page's: one line that starts with what it is
    ("mass-deletion guard: ..."), not "error (pass): ...", in a dry run too; exit 1."""
    cli_build(site, n=10)
    assert cli_run(site, work, "--now", T0_ISO).returncode == 0
    for i in range(6):
        site.remove(f"/p{i}.html")
    r = cli_run(site, work, "--now", "2026-01-01T01:00:00Z", *(["--dry-run"] if dry else []))
    assert r.returncode == 1, r.stderr
    guard = [ln for ln in r.stderr.splitlines() if "mass-deletion guard" in ln]
    assert len(guard) == 1, r.stderr
    assert "(pass)" not in guard[0] and "error" not in guard[0].split("mass-deletion guard")[0], guard[0]
    assert "would purge 6 of 10 tracked pages" in guard[0] and "--allow-mass-delete" in guard[0]
    assert len(stored(work)) > 0 and {p["url"] for p in stored(work).values()} == {
        site.server.url(f"/p{i}.html") for i in range(10)
    }


def test_status_reports_from_the_state_while_a_pass_holds_the_store(site, work):
    """Seen in use: `status` during a run waited 10 s and exited 2 ("open in another process").
    README: status always reports; the points are then not counted, and a warning says so."""
    cli_build(site)
    assert cli_run(site, work).returncode == 0
    holder = EdgeStore(work / "q", "pages")  # as a running pass holds it
    try:
        holder.count()
        r = cli(work, "status", "--qdrant-path", "q", "--state", "s.db")
        rj = cli(work, "status", "--qdrant-path", "q", "--state", "s.db", "--json")
    finally:
        holder.close()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("warning: points not counted: embedded store"), r.stdout
    assert "collection pages: points not counted; state records" in r.stdout
    assert "pages: 3 tracked" in r.stdout
    info = json.loads(rj.stdout)
    assert info["points"] is None and info["pages_tracked"] == 3


@pytest.mark.slow
def test_chunk_sizes_the_model_cannot_take_are_exit_2(tmp_path):
    # Checked before anything is fetched or created: the bundled model reads 256 word pieces.
    for args, words in (
        (["--chunk-tokens", "300"], "more than the model reads"),
        (["--max-chunk-tokens", "512"], "reads 256 tokens"),
        (["--chunk-tokens", "100", "--chunk-overlap", "100"], "--chunk-overlap 100"),
    ):
        r = cli(tmp_path, "run", "--url", "https://docs.example.com/a", *args)
        assert r.returncode == 2, r.stderr
        assert words in one_error_line(r)
    assert not (tmp_path / ".pagesync").exists()
