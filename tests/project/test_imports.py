"""What importing pagesync costs: `sync` exports its names lazily, and the CLI alone loads
neither the engine nor httpx, the stores or the model (a pass that fetches nothing stays fast)."""

from __future__ import annotations

import importlib

import pytest

import sync
from tests.helpers import loaded_after


def test_import_sync_cli_loads_nothing_heavy():
    assert [m for m, v in loaded_after("import sync.commands.cli").items() if v] == []


def test_cli_help_loads_nothing_heavy():
    code = "from sync.commands.cli import app\ntry:\n    app(['run', '--help'])\nexcept SystemExit:\n    pass"
    # (typer formats help with rich: that is the help's cost, not a pass's)
    assert [m for m, v in loaded_after(code).items() if v and m not in ("rich", "pygments")] == []


def test_a_kept_parse_needs_no_xml_parser():
    code = (
        "from sync.core.sitemaps import ParsedSitemap, SitemapEntry, pack_parsed, unpack_parsed\n"
        "assert unpack_parsed(pack_parsed(ParsedSitemap([SitemapEntry('https://e.com/a', None)]))).entries"
    )
    assert not loaded_after(code)["lxml"]


def test_httpx_after_the_cli_works_without_its_command_line():
    loaded = loaded_after("import sync.commands.cli, httpx\nassert httpx.AsyncClient and httpx.Limits")
    assert loaded["httpx"] and not loaded["rich"] and not loaded["pygments"]


@pytest.mark.parametrize("name", sync.__all__)
def test_every_exported_name_resolves_to_its_module_object(name):
    value = getattr(sync, name)
    module = importlib.import_module(f"sync.{sync._EXPORTS[name]}")
    assert value is getattr(module, name)
    assert name in dir(sync)


def test_type_checking_imports_match_the_lazy_table():
    # sync/__init__.py names each export twice: static imports for type checkers, and the
    # table __getattr__ reads. They must not drift apart.
    import ast
    from pathlib import Path

    tree = ast.parse(Path(sync.__file__).read_text())
    guard = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    static = {alias.name: node.module for node in guard.body for alias in node.names}
    assert static == sync._EXPORTS


def test_from_sync_import_and_unknown_names():
    from sync import PassConfig, StateDB, run_pass  # noqa: F401

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sync.nope  # noqa: B018
    with pytest.raises(ImportError):
        from sync import nope  # noqa: F401
