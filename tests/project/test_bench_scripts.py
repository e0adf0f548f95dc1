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
    proc = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120, cwd=script.parent.parent
    )
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
    row = {
        "points": 10000,
        "pages": 1000,
        "ok": True,
        "seconds": 0.3,
        "points_per_s": 33000,
        "peak_rss_mb": 117,
        "rss_before_mb": 22,
    }
    (tmp_path / "audit_scale.json").write_text(
        json.dumps([row, {**row, "points": 1000000, "seconds": 33.0, "peak_rss_mb": 2800, "peak_anon_mb": 410}])
    )
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
    proc = subprocess.run(
        ["make", "-s", "--eval", "print-t0: ; @echo $(BENCH_T0)", "print-t0"],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    t0 = proc.stdout.strip()
    assert "." in t0 and float(t0) % 1 != 0.0, t0


def _bench_module(name: str):
    import importlib

    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def _day(ps: int, full: int, lc: int, report: int | None = None) -> dict:
    return {
        "day": "2024-01-01",
        "commit": "0" * 10,
        "pages": 3,
        "pagesync": {
            "tokens_server": ps,
            "tokens_report": ps if report is None else report,
            "tokens_local": ps,
            "texts_sent": 1,
            "pages_failed": 0,
        },
        "full": {"texts": 9, "tokens": full, "chunks_over_model_input": 0},
        "langchain": {"texts": 2, "tokens": lc},
        "langchain_one_batch": {"texts": 1, "tokens": ps},
    }


def test_embed_tokens_summary_scales_days_after_the_initial_index_to_a_week():
    """Day 1 (the initial index) is left out; the other days scale to 7; money at the given price."""
    embed_tokens = _bench_module("embed_tokens")
    s = embed_tokens.summarise([_day(10_000, 12_000, 10_000)] + [_day(100, 1_000, 400)] * 14, price=0.02)
    assert s["initial_tokens"] == 10_000 and s["days_after_initial"] == 14
    assert s["tokens_per_week"] == {"pagesync": 700, "full": 7_000, "langchain": 2_800, "langchain_one_batch": 700}
    assert s["ratio_langchain_one_batch_to_pagesync"] == 1
    assert s["ratio_full_to_pagesync"] == 10 and s["ratio_langchain_to_pagesync"] == 4
    assert abs(s["usd_per_week"]["full"] - 7_000 * 0.02 / 1e6) < 1e-12
    assert s["report_equals_server"] and s["local_equals_server"]
    quiet = embed_tokens.summarise([_day(10, 10, 10), _day(0, 50, 0, report=1)], price=0.02)
    assert quiet["ratio_full_to_pagesync"] is None and not quiet["report_equals_server"]
    assert "n/a (pagesync sent nothing)" in embed_tokens.render(
        {
            "summary": quiet,
            "records": [_day(10, 10, 10), _day(0, 50, 0)],
            "total_seconds": 1,
            "server": "s",
            "model": "m",
            "server_startup_s": 1,
            "command": "c",
        },
        0.02,
        "assumed",
    )


def test_summary_rows_6_and_7_from_the_real_server_results(tmp_path):
    """The rows against a real embeddings server: figures from the results files, marked
    when this run did not write them, and a "not run" line without them."""
    import json
    import os

    summary = _bench_module("summary")
    assert any(line.startswith("| 6 |") and "not run" in line for line in summary.rows(tmp_path))
    assert any(line.startswith("| 7 |") and "not run" in line for line in summary.rows(tmp_path))
    embed_tokens = _bench_module("embed_tokens")
    thr = {
        "concurrency": 4,
        "ratios": [0.9, 1.0, 1.1],
        "rounds": [{}] * 3,
        "median": {"ratio": 1.0, "pass": {"texts": 140, "seconds": 20.0}, "plain": {"texts": 140, "seconds": 20.0}},
    }
    tok = {
        "args": {"price": "0.02"},
        "summary": embed_tokens.summarise([_day(10_000, 12_000, 10_000)] + [_day(100, 1_000, 400)] * 7, 0.02),
    }
    (tmp_path / "embed_throughput.json").write_text(json.dumps(thr))
    (tmp_path / "embed_tokens.json").write_text(json.dumps(tok))
    table = summary.rows(tmp_path)
    six = next(line for line in table if line.startswith("| 6 |"))
    seven = next(line for line in table if line.startswith("| 7 |"))
    assert "7.0 texts/s (median of 3 rounds)" in six and "| 1.00 (each round: 0.90, 1.00, 1.10) | >= 0.9 |" in six
    thr["best"] = {"pass_texts_per_s": 9.5, "plain_texts_per_s": 10.0, "ratio": 0.95}
    (tmp_path / "embed_throughput.json").write_text(json.dumps(thr))
    six = next(line for line in summary.rows(tmp_path) if line.startswith("| 6 |"))
    assert "9.5 texts/s (best of 3 rounds)" in six and "10.0 texts/s | 0.95 (each round" in six
    assert "pagesync 700" in seven and "full/pagesync 10.0x" in seven and "LangChain/pagesync 4.0x" in seven
    assert "in one batch 700" in seven
    since = 2_000_000_000.0
    os.utime(tmp_path / "embed_tokens.json", (since - 60, since - 60))
    os.utime(tmp_path / "embed_throughput.json", (since + 60, since + 60))
    marked = {line.split("|")[1].strip() for line in summary.rows(tmp_path, since) if summary.KEPT in line}
    assert marked == {"7"}
