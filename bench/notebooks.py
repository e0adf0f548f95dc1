#!/usr/bin/env python3
"""Execute the notebooks in notebooks/ and keep their outputs (the plots) in place.

    .venv/bin/python bench/notebooks.py [--small] [NAME.ipynb ...]

Without --small they plot the figures the benchmarks last wrote to bench/results/ (run
`make bench`, `make bench-freshness`, `make replay-policies` first); with --small they measure
tiny inputs themselves, which is how tests/project/test_notebooks.py runs them (into a copy).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"


def execute(name: str, *, small: bool, out: Path | None = None, timeout: int = 1800):
    """Run notebooks/NAME top to bottom in a fresh kernel started in notebooks/ and write the
    executed notebook to `out` (default: in place). Raises nbclient's CellExecutionError on
    the first failing cell."""
    import nbclient
    import nbformat

    env = {
        "PAGESYNC_NOTEBOOK_SMALL": "1" if small else "0",
        # plots become image outputs whatever backend the caller's environment names
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbclient.NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
        ).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    nbformat.write(nb, out or NOTEBOOKS / name)
    return nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", default=sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
    ap.add_argument("--small", action="store_true", help="measure tiny inputs instead of reading bench/results/")
    args = ap.parse_args(argv)
    for name in args.names:
        execute(name, small=args.small)
        print(f"executed notebooks/{name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
