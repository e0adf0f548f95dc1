"""The pass's stages as modules: what `sync.engine` still offers, and what a stage may import."""

from __future__ import annotations

import ast
from pathlib import Path

import sync.engine as engine
import sync.stages

STAGES = Path(sync.stages.__file__).parent


def test_the_engine_keeps_its_names():
    for name in ("PassConfig", "arun_pass", "run_pass", "plan_events", "record_sitemap", "within_budget",
                 "build_points", "ChangeEvent", "REASONS", "extract_page", "content_hash", "EXTRACTOR_ID"):
        assert hasattr(engine, name), name
    assert engine.build_points is sync.stages.build_points and engine.plan_events is sync.stages.plan_events


def test_the_pass_keeps_the_methods_callers_wrap():
    # Tests and benchmarks wrap these on the pass class: each stage is a mixin of it.
    for name in ("_within_budget", "_visit", "_handle", "_process", "_flush", "_drain", "_save", "_apply_purges",
                 "_reschedule_on_switch", "_write", "_judge_guard", "_read_sitemaps", "_plan", "_preflight"):
        assert callable(getattr(engine._Pass, name)), name


def test_no_stage_imports_the_engine_or_a_command():
    for path in STAGES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = "." * node.level + (node.module or "")
                assert mod.lstrip(".").split(".")[0] not in ("engine", "cli", "audit", "status", "reindex",
                                                               "transfer"), (path.name, mod)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("sync.engine") for a in node.names), path.name


def test_the_plan_stage_loads_no_fetcher():
    from tests.test_imports import loaded_after

    loaded = loaded_after("import sync.stages.plan")
    assert not loaded["httpx"] and not loaded["sync.engine"] and not loaded["sync.edges.fetcher"]
