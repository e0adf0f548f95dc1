"""Edges of the command line: Ctrl-C, the pass clock, switching revisit policies, what status
and the run's log lines say about sitemaps and skips, and one-line refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.cli_helpers import ROOT, cli, cli_build, cli_run, one_error_line, sitemap, stored

COMMON = ("--qdrant-path", "q", "--state", "s.db")


def _env() -> dict[str, str]:
    """The environment `tests.commands.test_cli.cli` gives the command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


# -- Ctrl-C ----------------------------------------------------------------------------------------
def test_ctrl_c_during_a_run_is_exit_130_one_line_and_the_next_pass_resumes(site, work):
    urls = cli_build(site, n=4)
    site.slow("/p3.html", 30)  # fetched last (one worker, sorted): the pass is still running then
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sync",
            "run",
            "--sitemap",
            sitemap(site),
            *COMMON,
            "--embedder",
            "fake",
            "--workers",
            "1",
            "--embed-batch",
            "1",
            "--report",
            "R.json",
        ],
        cwd=work,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a test run started in the background (nohup, a CI
        # step's `&`) ignores SIGINT, and Python keeps an inherited SIG_IGN.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 30
        while site.count(path="/p2.html") == 0:  # answered when p3's request starts
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.05)
        time.sleep(1.0)  # p0-p2 on their way to the store, p3 waiting for its answer
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("pagesync: the pass was interrupted") and "consistent" in last, err
    assert "next `pagesync run` resumes" in last
    assert "fetched" not in err  # no summary line: the pass did not finish
    assert not (work / "R.json").exists()
    written = {pl["url"] for pl in stored(work).values()}
    assert urls[3] not in written

    site.slow("/p3.html", 0)
    r = cli_run(site, work)  # the state lock was released; the pass picks up the rest
    assert r.returncode == 0, r.stderr
    assert {pl["url"] for pl in stored(work).values()} == set(urls)
    a = cli(work, "audit", *COMMON)
    assert a.returncode == 0, a.stdout + a.stderr


# -- a --now before the last pass: a warning (backfills are one of its uses) ------------------------
def _pages(work):
    import sqlite3

    with sqlite3.connect(work / "s.db") as db:
        return sorted(db.execute("SELECT * FROM pages ORDER BY url"))


def test_now_before_the_last_pass_warns_and_no_history_goes_negative(site, work):
    """docs/commands/run.md names backfills among --now's uses: an earlier clock is warned about, not
    refused, and the visits it records count as no time elapsed."""
    import sqlite3

    from sync.core.history import history_from_json

    cli_build(site)
    assert cli_run(site, work, "--now", "2025-01-01T00:00:00Z").returncode == 0
    r = cli_run(site, work, "--now", "2024-06-01T00:00:00Z", "--full")
    assert r.returncode == 0, r.stderr
    warned = [ln for ln in r.stderr.splitlines() if "is before the last pass's clock" in ln]
    assert len(warned) == 1 and "--now 2024-06-01T00:00:00Z" in warned[0] and "2025-01-01T00:00:00+00:00" in warned[0]
    with sqlite3.connect(work / "s.db") as db:
        histories = [history_from_json(h) for (h,) in db.execute("SELECT history FROM pages")]
    assert histories and all(v.elapsed_s >= 0 for h in histories for v in h)
    assert any(h and h[-1].elapsed_s == 0 for h in histories)
    # the same clock again and later ones give no warning
    r = cli_run(site, work, "--now", "2025-01-02T00:00:00Z", "--dry-run")
    assert r.returncode == 0 and "before the last pass's clock" not in r.stderr


# -- switching --policy / --revisit-interval reschedules the pages already tracked -------------------
def _due(work) -> set[float]:
    import sqlite3

    with sqlite3.connect(work / "s.db") as db:
        return {row[0] for row in db.execute("SELECT due_at FROM pages")}


def _at(day: float, hours: float = 0) -> str:
    from datetime import datetime, timedelta, timezone

    return (datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=day, hours=hours)).isoformat()


def _ts(day: float, hours: float = 0) -> float:
    from datetime import datetime, timedelta, timezone

    return (datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=day, hours=hours)).timestamp()


def test_switching_to_uniform_caps_every_due_time_at_the_last_visit_plus_the_interval(site, work):
    cli_build(site)
    hd = ("--policy", "halve-double")
    assert cli_run(site, work, "--now", _at(0), *hd).returncode == 0  # first visits: due in 3 d
    assert cli_run(site, work, "--now", _at(3), *hd).returncode == 0  # unchanged: 6 d
    assert cli_run(site, work, "--now", _at(9), *hd).returncode == 0  # unchanged: 12 d
    assert _due(work) == {_ts(21)}
    uni = ("--policy", "uniform", "--revisit-interval", "6h")
    r = cli_run(site, work, "--now", _at(10), *uni, "--dry-run", "--report", "D.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((work / "D.json").read_text())["pages_fetched"] == 3
    assert "(halve-double -> uniform 6 h): would reschedule 3 of 3 visited pages, 3 of them due now" in r.stderr
    assert _due(work) == {_ts(21)}, "a dry run writes nothing"

    r = cli_run(site, work, "--now", _at(10), *uni, "--report", "R.json")
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "R.json").read_text())
    assert (rep["pages_fetched"], rep["pages_rescheduled"]) == (3, 3), r.stderr
    assert (rep["policy"], rep["revisit_interval_s"]) == ("uniform", 6 * 3600)
    assert sum("revisit policy changed" in ln for ln in r.stderr.splitlines()) == 1
    assert _due(work) == {_ts(10, 6)}
    r = cli_run(site, work, "--now", _at(10, 1), *uni, "--report", "R.json")  # no switch: no line, nothing due
    assert "revisit policy changed" not in r.stderr
    assert json.loads((work / "R.json").read_text())["pages_fetched"] == 0
    # a longer interval: nothing is pulled earlier, each page keeps its due time until visited
    r = cli_run(
        site, work, "--now", _at(10, 2), "--policy", "uniform", "--revisit-interval", "3d", "--report", "R.json"
    )
    assert "(uniform 6 h -> uniform 3 d): rescheduled 0 of 3 visited pages" in r.stderr
    assert json.loads((work / "R.json").read_text())["pages_fetched"] == 0
    assert _due(work) == {_ts(10, 6)}


def test_switching_to_change_rate_recomputes_due_times_from_each_pages_history(site, work):
    cli_build(site)
    assert cli_run(site, work, "--now", _at(0), "--policy", "uniform", "--revisit-interval", "30d").returncode == 0
    assert _due(work) == {_ts(30)}
    r = cli_run(site, work, "--now", _at(5), "--report", "R.json", "--policy", "change-rate")  # a first visit gives 3 d
    assert r.returncode == 0, r.stderr
    assert "(uniform 30 d -> change-rate): rescheduled 3 of 3 visited pages, 3 of them due now" in r.stderr
    rep = json.loads((work / "R.json").read_text())
    assert (rep["pages_fetched"], rep["policy"], rep["revisit_interval_s"]) == (3, "change-rate", None)


# -- status: no lastmod is not "one stamp on every URL" ----------------------------------------------
def test_status_tells_a_sitemap_without_lastmod_from_one_stamp_on_every_url(site, work):
    urls = cli_build(site)
    locs = "".join(f"<url><loc>{u}</loc></url>" for u in urls)
    site.set(
        "/sitemap-plain.xml",
        '<?xml version="1.0" encoding="UTF-8"?><urlset '
        f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>',
        content_type="application/xml",
    )
    r = cli(
        work,
        "run",
        "--sitemap",
        site.server.url("/sitemap-plain.xml"),
        *COMMON,
        "--embedder",
        "fake",
        "--report",
        "R.json",
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads((work / "R.json").read_text())
    assert (rep["lastmod_state"], rep["lastmod_trusted"]) == ("none", False)
    st = cli(work, "status", *COMMON)
    assert st.returncode == 0, st.stderr
    assert "sitemap lastmod: no URL has one at the last pass" in st.stdout and "--policy uniform" in st.stdout
    assert "same stamp" not in st.stdout

    site.sitemap_mode = "same-lastmod"
    assert cli_run(site, work, "--report", "R.json").returncode == 0
    assert json.loads((work / "R.json").read_text())["lastmod_state"] == "same"
    st = cli(work, "status", *COMMON)
    assert "sitemap lastmod: the same stamp on every URL (ignored) at the last pass" in st.stdout
    site.sitemap_mode = "plain"
    for i in range(3):  # distinct stamps: a usable lastmod
        site.touch(f"/p{i}.html", 1_700_000_000 + 3600 * i)
    assert cli_run(site, work, "--report", "R.json").returncode == 0
    assert json.loads((work / "R.json").read_text())["lastmod_state"] == "varied"
    assert "sitemap lastmod:" not in cli(work, "status", *COMMON).stdout


# -- import: a vector size that does not fit names the file's size, not an embedder's ---------------
def test_import_of_vectors_of_another_size_names_the_files_size(site, work):
    cli_build(site)
    assert cli_run(site, work).returncode == 0  # 16-d fake vectors
    line = json.dumps(
        {
            "id": "00000000-0000-0000-0000-000000000001",
            "payload": {"url": "https://x.example/a"},
            "vector": [0.6, 0.8, 0.0],
        }
    )
    before = stored(work)
    r = cli(work, "import", "--qdrant-path", "q", input=line + "\n")
    assert r.returncode == 2, r.stderr
    msg = one_error_line(r)
    assert "embedder" not in msg, msg
    assert "3-dimensional vectors" in msg and "holds 16-dimensional vectors" in msg, msg
    assert stored(work) == before


# -- a skipped child sitemap is said in the run's log and summary ----------------------------------
def test_a_skipped_child_sitemap_is_logged_and_counted_in_the_summary(site, work):
    cli_build(site)
    index = (
        '<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{sitemap(site)}</loc></sitemap>"
        "<sitemap><loc>https://elsewhere.example/sitemap.xml</loc></sitemap></sitemapindex>"
    )
    site.set("/sitemap-index-mixed.xml", index, content_type="application/xml")
    r = cli(
        work,
        "run",
        "--sitemap",
        site.server.url("/sitemap-index-mixed.xml"),
        *COMMON,
        "--embedder",
        "fake",
        "--report",
        "R.json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((work / "R.json").read_text())["sitemaps_skipped"] == 1
    # an out-of-scope child sitemap is said in the one out-of-scope warning line, with its host
    (line,) = [ln for ln in r.stderr.splitlines() if "out of scope" in ln]
    assert line.startswith("warning: skipped 1 sitemap URL out of scope (1 on elsewhere.example"), line
    assert ", 0 skipped (and 1 sitemap), 0 failed" in r.stderr.splitlines()[-1]


# -- search: an empty query is bad usage ----------------------------------------------------------------
def test_an_empty_or_blank_search_query_is_exit_2_with_one_line(work):
    for q in ("", "   \t"):
        r = cli(work, "search", q, "--qdrant-path", "q")
        assert r.returncode == 2, (q, r.stdout, r.stderr)
        assert "query is empty" in one_error_line(r)
    assert list(work.iterdir()) == []
