"""The GitHub Actions workflows: valid against the workflow schema, and doing what they say."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import typer.main

from sync.commands.cli import app
from sync.commands.config_file import known_keys
from sync.core.config import parse_file

yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflow files")

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / ".github" / "workflows" / "ci.yml"
NIGHTLY = ROOT / "examples" / "nightly-sync.yml"


def check_jsonschema() -> str:
    exe = shutil.which("check-jsonschema") or str(Path(__import__("sys").executable).parent / "check-jsonschema")
    if not Path(exe).exists():
        pytest.skip("check-jsonschema is not installed (pip install check-jsonschema): the workflow schema is its")
    return exe


def validate(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [check_jsonschema(), "--builtin-schema", "vendor.github-workflows", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_workflows_match_the_github_workflow_schema():
    r = validate(CI, NIGHTLY)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(CI.read_text().replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest"))
    assert validate(broken).returncode == 1


def test_ci_runs_make_test_with_a_qdrant_service():
    wf = yaml.safe_load(CI.read_text())
    job = wf["jobs"]["test"]
    assert job["services"]["qdrant"]["image"].startswith("qdrant/qdrant")
    assert "6333:6333" in job["services"]["qdrant"]["ports"]
    assert job["env"]["QDRANT_URL"] == "http://localhost:6333"
    runs = [s.get("run", "") for s in job["steps"]]
    assert any(r.startswith("make test") for r in runs)
    assert any("download.pytorch.org/whl/cpu" in r for r in runs)  # never the CUDA build


def test_nightly_example_installs_from_the_repository_and_uses_the_config_file():
    wf = yaml.safe_load(NIGHTLY.read_text())
    steps = wf["jobs"]["sync"]["steps"]
    install = next(s["run"] for s in steps if s.get("name", "").startswith("Install"))
    assert "--index-url https://download.pytorch.org/whl/cpu" in install
    assert '"pagesync[model] @ git+https://github.com/' in install
    cached = next(s["with"]["path"] for s in steps if s.get("uses", "").startswith("actions/cache"))
    assert "~/.cache/pip" in cached and "~/.cache/pagesync" in cached  # pip's cache and the ONNX file
    runs = " ".join(s.get("run", "") for s in steps)
    assert "pagesync run" in runs and "pagesync audit" in runs and "--sitemap" not in runs  # pagesync.toml has it


def test_the_example_config_file_holds_only_known_keys():
    doc = tomllib.loads((ROOT / "examples" / "pagesync.toml").read_text())
    cfg = parse_file(doc, known_keys(typer.main.get_command(app)), "examples/pagesync.toml")
    assert cfg.values["state"] == "qdrant" and cfg.sites and cfg.sites[0].sitemap
