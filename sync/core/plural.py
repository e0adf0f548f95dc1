"""Counts in words for what users read: "1 point", "2 points" (never "1 points")."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`n` and `noun`, the noun in the plural unless n is 1; `many` for irregular plurals
    ("entry", "entries"); a plain "s" otherwise."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"
