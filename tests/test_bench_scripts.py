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
