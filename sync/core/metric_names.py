"""Prometheus metric names for the run report's keys, and the naming rules they must pass.

Pure: `metric_name` turns a report or status key into a gauge name (an abbreviated unit
suffix spelled out: `_s` -> `_seconds`), and `name_problems` checks a name against the rules
`promtool check metrics` applies to names (valid characters, no colons, no camelCase, base
units spelled out, no reserved suffixes or type names), so a new key that would break them is
caught by a test, not by a user's lint.
"""

from __future__ import annotations

import re

__all__ = ["PREFIX", "metric_name", "name_problems"]

PREFIX = "pagesync_"

# Key suffixes that abbreviate a unit, and the base unit spelled out.
_SPELLED_OUT = {"_s": "_seconds", "_b": "_bytes"}  # a value in another unit needs converting, not renaming
_VALID = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_CAMEL = re.compile(r"[a-z][A-Z]")
_ABBREVIATIONS = frozenset({"s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"})
# Units whose base unit is another: time in seconds, sizes in bytes, and no SI prefix on a base unit.
_NON_BASE = {"minutes": "seconds", "hours": "seconds", "days": "seconds", "weeks": "seconds", "bits": "bytes"}
_BASE_UNITS = ("seconds", "bytes", "meters", "metres", "grams", "joules", "volts", "amperes", "celsius")
_PREFIXES = (
    "pico",
    "nano",
    "micro",
    "milli",
    "centi",
    "deci",
    "deca",
    "hecto",
    "kilo",
    "kibi",
    "mega",
    "mebi",
    "mibi",
    "giga",
    "gibi",
    "tera",
    "tebi",
    "peta",
    "pebi",
)
# A gauge's name must not look like another type's series, nor name a type.
_RESERVED_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")
_TYPE_WORDS = frozenset({"gauge", "counter", "histogram", "summary"})


def metric_name(key: str) -> str:
    """The gauge name of a report or status key: `pagesync_<key>`, an abbreviated unit
    suffix spelled out (`oldest_visit_age_s` -> `pagesync_oldest_visit_age_seconds`)."""
    for short, long in _SPELLED_OUT.items():
        if key.endswith(short):
            key = key[: -len(short)] + long
            break
    return PREFIX + key


def _non_base(word: str) -> str | None:
    if word in _NON_BASE:
        return _NON_BASE[word]
    for prefix in _PREFIXES:
        rest = word[len(prefix) :]
        if word.startswith(prefix) and (rest in _BASE_UNITS or rest in _NON_BASE):
            return _NON_BASE.get(rest, rest)
    return None


def name_problems(name: str) -> list[str]:
    """What is wrong with `name` as a gauge's name under Prometheus' naming rules (empty: nothing)."""
    if not _VALID.fullmatch(name):
        return [
            "not a valid metric name (letters, digits and underscores, not starting with a digit)"
            + ("; colons are for recording rules" if ":" in name else "")
        ]
    problems = []
    if _CAMEL.search(name):
        problems.append("camelCase: use snake_case")
    words = name.lower().split("_")
    for word in words:
        if word in _ABBREVIATIONS:
            problems.append(f"abbreviated unit {word!r}: spell the unit out")
        if (base := _non_base(word)) is not None:
            problems.append(f"use the base unit {base!r} instead of {word!r}")
        if word in _TYPE_WORDS:
            problems.append(f"names its type {word!r}")
    for suffix in _RESERVED_SUFFIXES:
        if name.endswith(suffix):
            problems.append(f"a gauge ending {suffix!r} (another type's series)")
    return problems
