"""The tests' own layout: a test module imports its helpers from tests/helpers.py and the other
helper modules (fixtures from a conftest.py), never from another test module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _test_module_imports(path: Path) -> list[str]:
    """The imports in `path` (at any depth, inside functions too) that name a test module:
    one whose last component starts with `test_`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            # `from <package>.test_y import a`, and `from <package> import test_y` (a module or a test)
            names = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        found += [
            f"{path.relative_to(TESTS.parent)}:{node.lineno}: {n}"
            for n in names
            if n.rsplit(".", 1)[-1].startswith("test_")
        ]
    return found


def test_no_test_module_imports_another_test_module():
    offenders = [hit for path in sorted(TESTS.rglob("*.py")) for hit in _test_module_imports(path)]
    assert offenders == [], (
        "helpers belong in tests/helpers.py (or a conftest.py), not in a test module:\n" + "\n".join(offenders)
    )
