"""`--config FILE`: the configuration file and the `PAGESYNC_*` environment, at the command edge.

Every command takes `--config` as an eager option: its callback reads the file (given, or
`./pagesync.toml` when it exists) and the environment, merges them (`sync.core.config`) and
hands the result to click as the command's `default_map`, so click applies flags on top
and converts every value as it would a flag's. The keys are the options of the click
commands themselves: a new option is a new key, with nothing to list here. (Typer ships
its own copy of click: its objects are used by their attributes, not their classes.)
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Iterator

import typer

from ..core.config import FLAG, LIST, VALUE, FileConfig, Option, merge, parse_env, parse_file, rule_options, rule_set
from ..errors import ConfigError

__all__ = ["DEFAULT_FILE", "CONFIG_ENV", "load_config", "options_of", "known_keys", "sites_of", "file_of", "rules_of"]

DEFAULT_FILE = "pagesync.toml"  # read from the working directory when no --config is given
CONFIG_ENV = "PAGESYNC_CONFIG"
_NOT_KEYS = frozenset({"config", "help", "version"})  # options that cannot come from the file
# Where the callback leaves them in ctx.meta: the [[site]] tables, the file's path, and the
# site-rule values of the file and the environment (for a command without the rule flags).
_SITES, _FILE, _RULES = "pagesync.sites", "pagesync.config_file", "pagesync.rules"


def _kind(p: Any) -> str:
    if p.multiple:
        return LIST
    return FLAG if getattr(p, "is_flag", False) else VALUE


def options_of(cmd: Any) -> list[Option]:
    """A command's options as file keys: each long option, dashes as underscores."""
    out = []
    for p in cmd.params:
        longs = [o for o in p.opts if o.startswith("--")] if p.param_type_name == "option" else []
        if longs and p.name not in _NOT_KEYS:
            out.append(Option(longs[0][2:].replace("-", "_"), p.name, _kind(p)))
    return out


def _commands(group: Any) -> Iterator[Any]:
    yield group
    for sub in getattr(group, "commands", {}).values():
        yield from _commands(sub)


def known_keys(root: Any) -> dict[str, str]:
    """Every key any command takes (key -> kind): a file shared by all commands may hold them."""
    return {o.key: o.kind for cmd in _commands(root) for o in options_of(cmd)}


MAX_FILE_BYTES = 1 << 20  # 1 MiB: far above any real file; `--config /dev/zero` reads no further
MAX_DEPTH = 16  # tables and arrays within each other; a real file nests 4 deep at most


def _depth(value: Any) -> int:
    """How deep tables and arrays nest in `value` (iterative: a deep one costs no stack)."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d + 1)
            todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _read(path: Path) -> dict[str, Any]:
    """The file's TOML, bounded: at most MAX_FILE_BYTES read, UTF-8, nested at most MAX_DEPTH
    deep; anything else is one ConfigError line, never a traceback."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB: not a configuration file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start})") from None
    too_deep = ConfigError(f"{path}: tables or arrays nested more than {MAX_DEPTH} deep")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # the parser recurses into nested arrays and inline tables
        raise too_deep from None
    if _depth(data) > MAX_DEPTH:
        raise too_deep
    return data


def _check(ctx: typer.Context, params: dict[str, Any], name: str, value: Any, where: str) -> None:
    """A value the file or environment gives, converted as click would convert the flag
    (type, bounds), so a bad one is named by where it came from, not as a flag."""
    try:
        params[name].process_value(ctx, value)
    except typer.BadParameter as exc:
        raise ConfigError(f"{where}: {exc.message}") from None


def load_config(ctx: typer.Context, given: str | os.PathLike | None) -> None:
    """Read the configuration for the command of `ctx` and set it as its `default_map`
    (flags still win). Raises ConfigError for an unreadable file, an unknown key or a
    value of the wrong kind."""
    path = Path(given) if given else (Path(DEFAULT_FILE) if Path(DEFAULT_FILE).is_file() else None)
    file = FileConfig()
    if path is not None:
        file = parse_file(_read(path), known_keys(ctx.find_root().command), str(path))
    options = options_of(ctx.command)
    values = merge(file, parse_env(os.environ, options), options, str(path))
    params = {p.name: p for p in ctx.command.params}
    by_key = {o.key: o.name for o in options}
    defaults = {}
    for key, (value, where) in values.items():
        _check(ctx, params, by_key[key], value, where)
        defaults[by_key[key]] = value
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    ctx.meta[_SITES] = file.sites
    ctx.meta[_FILE] = path
    # The site rules as run would read them (file over environment), kept for audit --fix
    # and reindex, which re-read pages and have no flags of their own for them.
    ctx.meta[_RULES] = {
        k: v for k, (v, _where) in merge(file, parse_env(os.environ, rule_options()), rule_options(), str(path)).items()
    }


def sites_of(ctx: typer.Context) -> list:
    """The `[[site]]` tables of the configuration file the command read (SiteConfig list)."""
    return list(ctx.meta.get(_SITES, []))


def file_of(ctx: typer.Context) -> Path | None:
    return ctx.meta.get(_FILE)


def rules_of(ctx: typer.Context, given: dict[str, Any] | None = None) -> Any:
    """The site rules (`SiteRuleSet`) of the command of `ctx`: the rule values `given` (run's
    flags, which click already merged over the file and the environment), else those the
    configuration file and the `PAGESYNC_*` environment hold (audit --fix, reindex), with the
    file's `[[site]]` tables. ConfigError for a header variable not set."""
    values = given if given is not None else ctx.meta.get(_RULES, {})
    return rule_set(values, sites_of(ctx), os.environ)
