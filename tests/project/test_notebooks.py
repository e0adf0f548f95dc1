"""The notebooks in notebooks/ execute top to bottom on small inputs.

Each runs with PAGESYNC_NOTEBOOK_SMALL=1, which makes it measure the benchmarks itself on a
few thousand points / a dozen pages instead of reading bench/results/, so the plotting code
and the benchmark functions it calls are exercised on every `make test`.
"""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _execute(name: str, tmp_path: Path):
    # bench/ is scripts, not a package: load its notebook runner by path
    spec = importlib.util.spec_from_file_location("bench_notebooks", REPO / "bench" / "notebooks.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    # outputs go to a copy, never back into the committed notebook
    return runner.execute(name, small=True, out=tmp_path / name, timeout=300)


def _outputs(nb: nbformat.NotebookNode) -> tuple[str, list[bytes]]:
    text, images = [], []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text.append(out["text"])
            data = out.get("data", {})
            if "text/plain" in data:
                text.append(data["text/plain"])
            if "image/png" in data:
                images.append(base64.b64decode(data["image/png"]))
    return "".join(text), images


def test_bench_notebook_measures_small_inputs_and_plots(tmp_path):
    nb = _execute("bench.ipynb", tmp_path)
    text, images = _outputs(nb)
    assert "mode: small inputs, measured now" in text
    # the replace curve was measured at the three small sizes, the audit at two
    assert "16,000 points" in text and "ratio largest/smallest" in text
    assert "5,000 points:" in text
    assert "| 5a |" in text  # bench.summary's table rendered
    assert len(images) >= 2 and all(img.startswith(b"\x89PNG") for img in images)


def test_freshness_notebook_runs_the_simulation_and_plots(tmp_path):
    nb = _execute("freshness.ipynb", tmp_path)
    text, images = _outputs(nb)
    assert "mode: small inputs, measured now" in text
    # freshness.main_table of the run it just made: the reference strategies are in it
    assert "nightly full" in text and "halve-double" in text
    assert len(images) >= 1 and all(img.startswith(b"\x89PNG") for img in images)
