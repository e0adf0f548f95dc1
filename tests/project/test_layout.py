"""The layout as a contract: what `sync.engine` still offers, the pass's stages as modules, and which layer may import which."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sync.engine as engine
import sync.stages
from tests.helpers import loaded_after

STAGES = Path(sync.stages.__file__).parent


def test_the_engine_exports_only_the_pass():
    # Stage names are imported from the stage that defines them, not through the conductor.
    assert engine.__all__ == ["Checkpoint", "PassConfig", "run_pass", "arun_pass"]
    assert sync.build_points is sync.stages.build_points


def _own_bases(tree: ast.Module, own: set[str]) -> dict[str, list[str]]:
    return {
        node.name: [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in own]
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }


def test_no_class_is_built_from_three_of_the_projects_own_classes():
    # The pass is a conductor calling stage objects, not one object cut into mixins.
    files = [p for p in SYNC.rglob("*.py")]
    trees = {p: ast.parse(p.read_text()) for p in files}
    own = {n.name for t in trees.values() for n in ast.walk(t) if isinstance(n, ast.ClassDef)}
    for path, tree in trees.items():
        for name, bases in _own_bases(tree, own).items():
            assert len(bases) < 3, (path.name, name, bases)


def test_no_stage_imports_the_engine_or_a_command():
    for path in STAGES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = "." * node.level + (node.module or "")
                assert mod.lstrip(".").split(".")[0] not in (
                    "engine",
                    "cli",
                    "audit",
                    "status",
                    "reindex",
                    "transfer",
                ), (path.name, mod)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("sync.engine") for a in node.names), path.name


def test_the_pure_planning_loads_no_fetcher():
    loaded = loaded_after("import sync.core.planning")
    assert not loaded["httpx"] and not loaded["sync.engine"] and not loaded["sync.edges.fetcher"]


SYNC = Path(sync.stages.__file__).parent.parent
# package -> the sync packages (first component under sync) its modules may import
ALLOWED = {
    "core": {"core", "errors"},
    "edges": {"core", "edges", "errors"},
    "stages": {"core", "edges", "stages", "errors"},
}


def _sync_imports(path: Path) -> set[str]:
    """The first component under `sync` of every module the file imports (relative or absolute)."""
    package = path.parent.relative_to(SYNC).parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package[: len(package) - (node.level - 1)])
            target = base + (node.module.split(".") if node.module else [])
            found.update([target[0]] if target else [alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sync."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("sync."))
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(layer):
    for path in sorted((SYNC / layer).glob("*.py")):
        wrong = _sync_imports(path) - ALLOWED[layer]
        assert not wrong, f"sync/{layer}/{path.name} imports {sorted(wrong)}"


def test_nothing_outside_the_commands_imports_a_command():
    for path in sorted(SYNC.rglob("*.py")):
        rel = path.relative_to(SYNC)
        if (
            rel.parts[0] in ("commands", "integrations")
            or rel.name in ("__init__.py", "__main__.py")
            and len(rel.parts) == 1
        ):
            continue  # (the framework adapters sit on the read API, above the commands)
        assert "commands" not in _sync_imports(path), str(rel)


def test_every_package_says_what_it_holds_and_may_import():
    for init in sorted(SYNC.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc and len(doc.splitlines()) >= 3, init.parent.name


def test_the_former_flat_paths_are_gone():
    import importlib

    for old in ("state", "cli", "policy", "store", "fetcher", "audit"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"sync.{old}")


def test_nothing_in_sync_imports_a_framework_adapter():
    for path in sorted(SYNC.rglob("*.py")):
        rel = path.relative_to(SYNC)
        if rel.parts[0] != "integrations":
            assert "integrations" not in _sync_imports(path), str(rel)


MAX_CLASS_LINES = 400


def test_no_class_in_the_packages_is_over_400_lines():
    # A class past this holds several responsibilities: split it into helpers it composes.
    long = []
    for package in (SYNC, SYNC.parent / "chunking", SYNC.parent / "embedders"):
        for path in sorted(package.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                    long.append(
                        f"{path.relative_to(SYNC.parent)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
                    )
    assert not long, long


# the modules a split left, each holding one idea, that must not grow back together
SPLIT_MODULES = {
    "core": ("history", "change_rate", "policies", "visit_selection", "lastmod_trust", "bulk_edits"),
    "edges": (
        "store",
        "edge_store",
        "client_store",
        "point_records",
        "store_errors",
        "shard_lock",
        "edge_config",
        "edge_queries",
        "fetcher",
        "host_pacing",
        "deadlines",
    ),
    "commands": ("cli", "options", "opening", "exits", "output", "pass_runner"),
}


@pytest.mark.parametrize("package", sorted(SPLIT_MODULES))
def test_each_module_is_named_in_its_package_docstring(package):
    doc = ast.get_docstring(ast.parse((SYNC / package / "__init__.py").read_text())) or ""
    for name in SPLIT_MODULES[package]:
        assert (SYNC / package / f"{name}.py").exists(), name
        assert f"`{name}`" in doc, f"sync/{package}/__init__.py does not say what `{name}` holds"


def test_the_store_protocol_module_loads_no_backend():
    loaded = loaded_after("import sync.edges.store")
    assert not loaded["qdrant_client"] and not loaded["qdrant_edge"] and not loaded["sync.edges.edge_store"]
