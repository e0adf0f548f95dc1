"""Every benchmark script answers `--help` (a broken import or argument parser in a
script no test runs otherwise would only show up in `make bench`, minutes in)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_the_scripts_are_found():
    assert {"freshness.py", "replay_policies.py", "scale_passes.py", "summary.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_help(script):
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                          cwd=script.parent.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout


def test_summary_marks_rows_this_run_did_not_measure(tmp_path):
    """`make bench` passes its start time: kept figures must not pass for new ones."""
    import os
    import shutil

    sys.path.insert(0, str(BENCH))
    try:
        import summary
    finally:
        sys.path.remove(str(BENCH))
    names = ("pipeline.json", "scale_passes.json", "store_replace.json", "audit_scale.json")
    for name in names:
        shutil.copy(BENCH / "results" / name, tmp_path / name)
    since = 2_000_000_000.0
    for name in names:  # rows 1-2 and 5a written "before" the run, rows 3-4 and 5b by it
        t = since - 60 if name in ("pipeline.json", "store_replace.json") else since + 60
        os.utime(tmp_path / name, (t, t))
    table = summary.rows(tmp_path, since)
    marked = {line.split("|")[1].strip() for line in table if summary.KEPT in line}
    assert marked == {"1", "2", "5a"}, table
    assert not any(summary.KEPT in line for line in summary.rows(tmp_path))  # no --since: no marks
