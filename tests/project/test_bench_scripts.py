"""Every benchmark script answers `--help` (a broken import or argument parser in a
script no test runs otherwise would only show up in `make bench`, minutes in)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
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
    for name in names:  # the pass-throughput, reuse and store-replace results written "before" the run, the no-op, fetch-bound and audit-scale ones by it
        t = since - 60 if name in ("pipeline.json", "store_replace.json") else since + 60
        os.utime(tmp_path / name, (t, t))
    table = summary.rows(tmp_path, since)
    marked = {line.split("|")[1].strip() for line in table if summary.KEPT in line}
    assert marked == {"1", "2", "5a"}, table
    assert not any(summary.KEPT in line for line in summary.rows(tmp_path))  # no --since: no marks


def test_summary_row_5b_shows_the_private_peak_when_recorded(tmp_path):
    """Peak RSS counts the shard's mapped files; the private peak, when the results carry
    it, is printed beside it, and older results without it still summarise."""
    import json

    sys.path.insert(0, str(BENCH))
    try:
        import summary
    finally:
        sys.path.remove(str(BENCH))
    row = {"points": 10000, "pages": 1000, "ok": True, "seconds": 0.3, "points_per_s": 33000,
           "peak_rss_mb": 117, "rss_before_mb": 22}
    (tmp_path / "audit_scale.json").write_text(json.dumps([row, {**row, "points": 1000000, "seconds": 33.0,
                                                                 "peak_rss_mb": 2800, "peak_anon_mb": 410}]))
    line = next(x for x in summary.rows(tmp_path) if x.startswith("| 5b"))
    assert "2800 MB (410 MB private) at 1,000,000 points" in line
    assert "117 MB at 10,000" in line and "117 MB (" not in line
    assert "1.10 (per point)" in line


@pytest.mark.parametrize("drop", ["noop", "fetch"])
def test_scale_passes_results_without_a_section_still_write_and_summarise(tmp_path, drop):
    """`scale_passes.py --noop-runs 0` (or `--rounds 0`) measures only one of the no-op and fetch-bound passes:
    its results file and `make bench`'s table say the other was not measured."""
    import json

    sys.path.insert(0, str(BENCH))
    try:
        import scale_passes
        import summary
    finally:
        sys.path.remove(str(BENCH))
    out = json.loads((BENCH / "results" / "scale_passes.json").read_text())
    out[drop] = []
    scale_passes.write(out, tmp_path / "scale_passes.md")
    text = (tmp_path / "scale_passes.md").read_text()
    flag = "--noop-runs 0" if drop == "noop" else "--rounds 0"
    assert f"Not measured in this run (`{flag}`)." in text
    table = summary.rows(tmp_path)
    row = "| 3 |" if drop == "noop" else "| 4 |"
    other = "| 4 |" if drop == "noop" else "| 3 |"
    assert any(line.startswith(row) and f"not measured (`{flag}`)" in line for line in table), table
    assert any(line.startswith(other) and "not measured" not in line for line in table), table


def test_make_bench_start_time_is_finer_than_a_second():
    """`git clone ... && make bench` starts within the second the clone wrote the kept
    results: with whole seconds, `summary.py --since` took them for this run's figures."""
    import shutil

    if not shutil.which("make"):
        pytest.skip("no make")
    proc = subprocess.run(["make", "-s", "--eval", "print-t0: ; @echo $(BENCH_T0)", "print-t0"],
                          cwd=BENCH.parent, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    t0 = proc.stdout.strip()
    assert "." in t0 and float(t0) % 1 != 0.0, t0
