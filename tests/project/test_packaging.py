"""The distribution: `pagesync --version`, and a wheel and sdist that carry every package."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from setuptools import find_namespace_packages
from typer.testing import CliRunner

from sync.commands.cli import app

ROOT = Path(__file__).resolve().parents[2]
TOP = ("sync", "chunking", "embedders")


def source_packages() -> set[str]:
    """Every directory of the three top-level packages that holds Python code."""
    return {
        ".".join(d.relative_to(ROOT).parts)
        for top in TOP
        for d in [ROOT / top, *(ROOT / top).rglob("*")]
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
    }


def test_version_is_the_distributions():
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout == f"pagesync {version('pagesync')}\n"


def test_the_package_list_finds_every_package():
    """pyproject's packages.find, as setuptools applies it, finds every package of the tree."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    found = set(find_namespace_packages(str(ROOT), include=find["include"]))
    assert source_packages() <= found
    assert all(p.split(".")[0] in TOP for p in found)


def test_no_data_files_are_needed_at_run_time():
    """The packages hold only Python files (no package data to declare)."""
    others = [
        p
        for top in TOP
        for p in (ROOT / top).rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert others == []


@pytest.mark.slow
def test_wheel_and_sdist_hold_every_package(tmp_path):
    """`python -m build` (without an isolated build environment: nothing is downloaded)."""
    pytest.importorskip("build", reason="pip install build")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("pagesync-*.whl"))
    sdist = next(tmp_path.glob("pagesync-*.tar.gz"))
    in_wheel = {n.rsplit("/", 1)[0].replace("/", ".") for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".py")}
    with tarfile.open(sdist) as tf:
        in_sdist = {n.split("/", 1)[1].rsplit("/", 1)[0].replace("/", ".") for n in tf.getnames() if n.endswith(".py")}
    assert source_packages() <= in_wheel
    assert source_packages() <= in_sdist
    entry = zipfile.ZipFile(wheel).read(
        f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info/entry_points.txt"
    )
    assert b"pagesync = sync.commands.cli:main" in entry
