"""The change decision: what to do with one page given what the fetch saw and what we knew.

Pure: no I/O, every input an argument. The engine carries the decision out.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from .plural import plural

__all__ = [
    "Outcome",
    "Action",
    "Decision",
    "decide",
    "needs_unconditional_fetch",
    "may_be_broken",
    "shrank",
    "broken_deploy",
    "held_reason",
]


class Outcome(enum.Enum):
    """What an HTTP visit produced, reduced to what the decision needs."""

    OK = "ok"  # 200 with a body we could extract
    NOT_MODIFIED = "not_modified"  # 304
    GONE = "gone"  # 404 / 410: the page is dead
    ERROR = "error"  # timeout, connection error, 5xx, a refused redirect: keep what we have
    SKIPPED = "skipped"  # not to be read (robots.txt, out of scope, too large, not text): keep what we have


class Action(enum.Enum):
    """What a pass does with one page; the value is the word the report and events use."""

    SKIP_NOT_MODIFIED = "not_modified"
    SKIP_UNCHANGED = "unchanged"
    ADD = "added"
    REPLACE = "changed"
    PURGE = "removed"
    FAIL = "failed"
    SKIP_POLICY = "skipped"


@dataclass(frozen=True)
class Decision:
    """One page's action and the reason for it, decided from what the visit found."""

    action: Action
    reason: str

    @property
    def writes(self) -> bool:
        return self.action in (Action.ADD, Action.REPLACE, Action.PURGE)


def needs_unconditional_fetch(stored_fingerprint: str | None, fingerprint: str) -> bool:
    """A page indexed by another pipeline must be re-read even if the server says 304."""
    return stored_fingerprint is not None and stored_fingerprint != fingerprint


def decide(
    outcome: Outcome,
    *,
    new_hash: str | None,
    stored_hash: str | None,
    stored_fingerprint: str | None,
    fingerprint: str,
    indexed: bool,
    text_empty: bool = False,
) -> Decision:
    """Decide one page.

    `indexed` says whether the page currently has points (live in the state with a hash).
    `text_empty`: the page answered but its main content extracted to nothing. For an
    indexed page whose text was not empty before, that is a purge, not a change: a deploy
    that breaks extraction (a page rendered by JavaScript, a new template) looks the same
    on every page, and as a purge it passes the mass-deletion guard like a 404 would.
    A 304 or an equal hash under the same pipeline is a skip: no chunking, no embedding,
    no writes. Under another pipeline a page is rewritten as "pipeline changed", whatever its
    hash: the stored one may come from another extractor or hash rule, so a different hash
    is no sign of an edit (nor is it held as a possible broken deploy). Errors never purge.
    """
    if outcome is Outcome.ERROR:
        return Decision(Action.FAIL, "fetch failed")
    if outcome is Outcome.SKIPPED:
        return Decision(Action.SKIP_POLICY, "not to be read (robots.txt, scope, size or type)")
    if outcome is Outcome.GONE:
        return Decision(Action.PURGE, "gone (404/410)")
    if outcome is Outcome.NOT_MODIFIED:
        if indexed and not needs_unconditional_fetch(stored_fingerprint, fingerprint):
            return Decision(Action.SKIP_NOT_MODIFIED, "304 not modified")
        # A 304 for a page we hold no text for: the validators were stale. Treat as error
        # so the page is retried (the engine drops validators on retry).
        return Decision(Action.FAIL, "304 for a page with no indexed text")
    if new_hash is None:
        raise ValueError("an OK outcome needs the new content hash")
    if not indexed:
        return Decision(Action.ADD, "new page")
    if new_hash != stored_hash and text_empty:
        return Decision(Action.PURGE, "no text extracted")
    if stored_fingerprint != fingerprint:
        # Whether the text changed is not known: the stored hash may be another pipeline's
        # (an extractor or hash rule change makes every hash new).
        return Decision(Action.REPLACE, "pipeline changed")
    if new_hash != stored_hash:
        return Decision(Action.REPLACE, "content changed")
    return Decision(Action.SKIP_UNCHANGED, "same content hash")


# A changed page whose text fell to a quarter of its chunks or fewer, or whose new text is
# this short, may be a broken deploy rather than an edit (a JavaScript shell's <noscript>
# line, an error template answered with 200): such changes wait for the end of the pass.
COLLAPSE_RATIO = 4
STUB_CHARS = 500
# A short text that this many pages changed to in one pass is a template, not their content,
# when they shrank to it: lost a chunk, or kept at most 1/SHRINK_RATIO of their characters.
SAME_STUB_PAGES = 3
SHRINK_RATIO = 2


def may_be_broken(old_chunks: int, new_chunks: int, new_chars: int) -> bool:
    """Whether a content change must wait for `broken_deploy` at the end of the pass."""
    return old_chunks > 0 and (new_chunks * COLLAPSE_RATIO <= old_chunks or new_chars < STUB_CHARS)


def shrank(old_chunks: int, new_chunks: int, old_chars: int | None, new_chars: int) -> bool:
    """Whether a page's text shrank: it lost a chunk, or fell to 1/`SHRINK_RATIO` of its
    characters or fewer. Chunks alone miss a one-section page turned into a one-section
    stub; `old_chars` is None for a page written before its length was kept."""
    return new_chunks < old_chunks or (old_chars is not None and new_chars * SHRINK_RATIO <= old_chars)


def broken_deploy(changes: Mapping[str, tuple[int, int, int | None, int, str]]) -> set[str]:
    """The changes that look like a broken deploy: url -> (old chunks, new chunks, old
    characters or None, new characters, new content hash) of the pass's `may_be_broken` changes.

    A page's text collapsed (a quarter of its chunks or fewer, from 4 or more), or shrank
    (`shrank`) to a short text that `SAME_STUB_PAGES` or more pages changed to at once
    (short pages of a site whose every page became the same shell; tiny pages edited alike
    without shrinking are edits). These count toward the mass-deletion guard as
    purges do: a few are edits and are written; past the guard's share, none is.
    """
    stubs = Counter(h for _, _, _, chars, h in changes.values() if chars < STUB_CHARS)
    return {
        url
        for url, (old, new, old_chars, chars, h) in changes.items()
        if (old >= COLLAPSE_RATIO and new * COLLAPSE_RATIO <= old)
        or (chars < STUB_CHARS and stubs[h] >= SAME_STUB_PAGES and shrank(old, new, old_chars, chars))
    }


def held_reason(old_chunks: int, new_chunks: int, old_chars: int | None, new_chars: int) -> str:
    """The `last_error` of a change the guard held as a broken deploy: how its text shrank."""
    if new_chunks < old_chunks or old_chars is None:
        return (
            f"change held by the mass-deletion guard (text shrank from {plural(old_chunks, 'chunk')} to {new_chunks})"
        )
    return f"change held by the mass-deletion guard (text shrank from {plural(old_chars, 'character')} to {new_chars})"
