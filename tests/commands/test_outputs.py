"""What `run` writes besides the collection, and what it reads first, through the command line:
`--metrics` and `--report` paths that are no regular file are exit 2 before the pass, a bad or
huge `pagesync.toml` is one line and exit 2, and every metric name passes `promtool`."""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import sys

import pytest

from tests.cli_helpers import ROOT, cli, cli_build, cli_run, one_error_line


def nothing_written(work) -> bool:
    return not (work / "q").exists() and not (work / "s.db").exists()


# -- --metrics and --report: refused before the pass ------------------------------------------------
def test_metrics_into_a_fifo_is_exit_2_before_the_pass_and_the_fifo_stays(site, work):
    cli_build(site, n=2)
    os.mkfifo(work / "m.prom")
    r = cli_run(site, work, "--metrics", "m.prom")
    assert r.returncode == 2 and "is a FIFO" in one_error_line(r), r.stderr
    assert stat.S_ISFIFO(os.lstat(work / "m.prom").st_mode)  # not replaced by a rename
    assert nothing_written(work)


def test_metrics_through_a_symlink_is_exit_2_and_the_link_stays(site, work):
    cli_build(site, n=2)
    (work / "real.prom").write_text("old\n")
    (work / "m.prom").symlink_to("real.prom")
    r = cli_run(site, work, "--metrics", "m.prom")
    assert r.returncode == 2 and "is a symlink" in one_error_line(r), r.stderr
    assert (work / "m.prom").is_symlink() and (work / "real.prom").read_text() == "old\n"
    assert nothing_written(work)


@pytest.mark.parametrize(
    "where, says", [("fifo", "is a FIFO"), ("/dev/full", "is a device"), ("dangling", "is a dangling symlink")]
)
def test_a_report_path_that_takes_no_file_is_exit_2_before_the_pass(site, work, where, says):
    """A FIFO nobody reads would hang after the pass; /dev/full and a dangling symlink would
    fail only after the collection was written."""
    cli_build(site, n=2)
    os.mkfifo(work / "fifo")
    (work / "dangling").symlink_to(work / "no-such-dir" / "r.json")
    r = cli(
        work,
        "run",
        "--sitemap",
        site.server.url("/sitemap.xml"),
        "--qdrant-path",
        "q",
        "--state",
        "s.db",
        "--embedder",
        "fake",
        "--report",
        where,
    )
    line = one_error_line(r)
    assert r.returncode == 2 and line.startswith(f"pagesync: error: --report {where}: {says}"), r.stderr
    assert nothing_written(work)


def test_a_report_through_a_symlink_to_a_file_is_written_there(site, work):
    cli_build(site, n=2)
    (work / "r.json").write_text("")
    (work / "link.json").symlink_to("r.json")
    r = cli_run(site, work, report="link.json")
    assert r.returncode == 0, r.stderr
    assert '"pages_added": 2' in (work / "r.json").read_text()


def test_output_problem_table(tmp_path):
    from sync.edges.output_paths import output_problem

    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to("file")
    (tmp_path / "dangling").symlink_to("nowhere")
    os.mkfifo(tmp_path / "fifo")
    for name, replaced, problem in [
        ("new", True, None),
        ("file", True, None),
        ("file", False, None),
        ("link", False, None),
        ("link", True, "is a symlink"),
        ("dangling", False, "is a dangling symlink"),
        ("dangling", True, "is a symlink"),
        ("fifo", True, "is a FIFO"),
        ("fifo", False, "is a FIFO"),
    ]:
        got = output_problem(tmp_path / name, replaced=replaced)
        assert (got is None) if problem is None else (got or "").startswith(problem), (name, replaced, got)
    assert (output_problem(tmp_path.__class__("/dev/null"), replaced=True) or "").startswith("is a device")


# -- the configuration file: bounded, one line ----------------------------------------------------------
def _limited_memory() -> None:
    # A reader that does not stop at a bound fails here (MemoryError) instead of filling the machine.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize(
    "content, says",
    [
        (b"collection = " + b"[" * 1000 + b"]" * 1000 + b"\n", "nested more than"),
        (b"[" + b".".join([b"a"] * 1000) + b"]\n", "nested more than"),
        (b'collection = "\xff"\n', "not UTF-8 text (byte 0xff"),
        (b"# a comment\n" * 200_000, "larger than 1 MiB"),  # 2.4 MB
    ],
)
def test_a_bad_pagesync_toml_is_one_line_and_exit_2(work, content, says):
    (work / "pagesync.toml").write_bytes(content)
    r = cli(work, "status")
    assert r.returncode == 2 and says in one_error_line(r), r.stderr


def test_config_dev_zero_is_one_line_and_exit_2(work):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QDRANT_", "PAGESYNC_"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    r = subprocess.run(
        [sys.executable, "-m", "sync", "status", "--config", "/dev/zero"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limited_memory,
    )
    assert r.returncode == 2 and "/dev/zero: larger than 1 MiB" in one_error_line(r), r.stderr


# -- metric names --------------------------------------------------------------------------------------
NO_PROMTOOL = "promtool is not installed (Debian: apt install prometheus)"


@pytest.mark.skipif(shutil.which("promtool") is None, reason=NO_PROMTOOL)
def test_every_metric_a_run_writes_passes_promtool(site, work):
    cli_build(site, n=3)
    r = cli_run(site, work, "--metrics", "pagesync.prom", "--policy", "uniform", "--revisit-interval", "1d")
    assert r.returncode == 0, r.stderr
    text = (work / "pagesync.prom").read_text()
    assert "pagesync_revisit_interval_seconds" in text and "pagesync_status_oldest_visit_age_seconds" in text
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert lint.returncode == 0, lint.stdout + lint.stderr


# -- --state on every command that takes a collection --------------------------------------------------
def test_every_command_taking_a_collection_takes_state():
    import typer.main

    from sync.commands.cli import app

    def commands(group, path=()):
        for name, cmd in getattr(group, "commands", {}).items():
            yield from commands(cmd, (*path, name)) if hasattr(cmd, "commands") else [((*path, name), cmd)]

    def longs(cmd):
        return {o for p in cmd.params for o in getattr(p, "opts", ())}

    taking = {path: longs(cmd) for path, cmd in commands(typer.main.get_command(app)) if "--collection" in longs(cmd)}
    assert ("search",) in taking
    assert [path for path, opts in taking.items() if "--state" not in opts] == []


def test_search_accepts_the_state_run_was_given(site, work):
    cli_build(site, n=2)
    assert cli_run(site, work).returncode == 0
    r = cli(work, "search", "p0-s1", "--qdrant-path", "q", "--state", "s.db", "--embedder", "fake", "--json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("[")
