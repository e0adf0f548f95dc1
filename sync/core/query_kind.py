"""What a search query is: an identifier names code, a question asks in words.

A hybrid search ranks an identifier by its keyword matches alone: BM25 matches a name exactly
(`CliRunner`, `--max-failed-share`, `auto_envvar_prefix`), while the embedding of a bare name
matches whatever merely reads like it. A question keeps the fused ranking.
"""

from __future__ import annotations

import re

__all__ = ["looks_like_identifier", "IDENTIFIER_WORDS"]

# The most words an identifier query has: a name, or a name with a word or two ("click.Choice
# values", "--rebuild flag").
IDENTIFIER_WORDS = 3
# Code inside a word: a dot, underscore or double colon between word characters
# (`ParamType.convert`, `auto_envvar_prefix`), call or index brackets, `=`, a flag (`-v`,
# `--full`), or a case change within a word (`CliRunner`, `HTTPException`).
_CODE = re.compile(r"\w(?:[._]|::)\w|[=()\[\]{}<>]|(?:^|\s)--?\w|[a-z][A-Z]|[A-Z]{2}[a-z]")


def looks_like_identifier(query: str) -> bool:
    """True for a query that names code rather than asks: one word, or at most
    `IDENTIFIER_WORDS` words with code in them (`_CODE`)."""
    words = query.split()
    if not words:
        return False
    return len(words) == 1 or (len(words) <= IDENTIFIER_WORDS and _CODE.search(query) is not None)
