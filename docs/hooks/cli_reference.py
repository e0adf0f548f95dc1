"""MkDocs hook: renders the option reference of a pagesync command from the typer app itself.

A page writes `<!-- options: run -->` (or `<!-- options: state export -->`) where the table
goes; the hook replaces it with a table of that command's arguments and options (names,
type, default, environment variable, help), so the reference can never drift from `--help`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!--\s*options:\s*([a-z -]+?)\s*-->")


def _group():
    """The click group behind `pagesync` (typer ships its own click), imported from this checkout."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import typer.main

    from sync.commands.cli import app

    return typer.main.get_command(app)


def _command(path: str):
    cmd = _group()
    for name in path.split():
        if name not in getattr(cmd, "commands", {}):
            raise ValueError(f"no pagesync command {path!r} (at {name!r})")
        cmd = cmd.commands[name]
    return cmd


def _cell(text: str) -> str:
    """One table cell: one line, with the characters markdown or HTML would read escaped."""
    parts = " ".join(str(text).split()).replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):  # outside `code` spans only
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;").replace("_", "\\_").replace("*", "\\*")
    return "`".join(parts)


def _is_argument(p) -> bool:
    return p.param_type_name == "argument"


def _names(p) -> str:
    if _is_argument(p):
        return f"`{p.name.upper()}`" + ("" if p.required else " (optional)")
    names = [f"`{o}`" for o in p.opts + p.secondary_opts]
    return " / ".join(names)


def _default(p) -> str:
    d = p.default
    if d is None or d is False or d == () or d == [] or callable(d):
        return ""
    return f"`{d}`"


def _type(p) -> str:
    """A word for the value the parameter takes, from its annotation and its bounds."""
    if getattr(p, "is_flag", False):
        return "flag"
    ann = p.type_descriptor.annotation
    inner = getattr(ann, "__args__", None)
    base = inner[0] if inner else ann
    name = {str: "text", int: "integer", float: "number", Path: "path"}.get(base, getattr(base, "__name__", str(base)))
    bounds = [f">= {p.min}" if p.min is not None else "", f"<= {p.max}" if p.max is not None else ""]
    name = " ".join([name, " and ".join(b for b in bounds if b)]).strip()
    return name + (", repeatable" if p.multiple else "")


def render(path: str) -> str:
    """The markdown table of `pagesync PATH`'s parameters (help excluded)."""
    cmd = _command(path)
    rows = ["| option | type | default | description |", "|---|---|---|---|"]
    for p in cmd.params:
        if p.name == "help" or getattr(p, "hidden", False):
            continue
        help_text = getattr(p, "help", None) or ""
        env = getattr(p, "envvar", None)
        if env and env not in help_text:
            help_text += f" Environment variable: `{env}`."
        rows.append(f"| {_names(p)} | {_type(p)} | {_cell(_default(p))} | {_cell(help_text)} |")
    args = [p.name.upper() if p.required else f"[{p.name.upper()}]" for p in cmd.params if _is_argument(p)]
    usage = " ".join(["pagesync", path, "[OPTIONS]", *args])
    return f"```text\n{usage}\n```\n\n" + "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs hook signature)
    return MARKER.sub(lambda m: render(m.group(1)), markdown)


if __name__ == "__main__":  # python docs/hooks/cli_reference.py run
    print(render(" ".join(sys.argv[1:]) or "run"))
