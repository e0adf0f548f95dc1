"""robots.txt: parse with protego, and the rules for when it cannot be read.

2xx: the file's rules. 4xx (no robots.txt): everything allowed. 5xx, 429, timeouts and
connection errors: everything disallowed for now, which keeps what is indexed (nothing is
purged); `unavailable` then says why, and the Fetcher fails the host's pages with it (an
error, retried soon like any failure) rather than skipping them as a Disallow would. Pure: the fetch happens in the Fetcher, which
keeps 2xx and 4xx answers for 24 h across passes (`sync.edges.httpcache`), never failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protego import Protego  # imported at parse time: a 4xx or 5xx needs no parser

__all__ = ["RobotsRules", "rules_from_response", "MAX_ROBOTS_BYTES"]

MAX_ROBOTS_BYTES = 500 * 1024  # Google's limit; the rest of a larger file is ignored


@dataclass
class RobotsRules:
    allow_all: bool = False
    deny_all: bool = False
    reason: str = ""
    unavailable: str | None = None  # robots.txt could not be read (deny_all): why, e.g. "robots.txt answered 503"
    _parser: Protego | None = field(default=None, repr=False)

    def allows(self, url: str, user_agent: str) -> bool:
        if self.deny_all:
            return False
        if self.allow_all or self._parser is None:
            return True
        return bool(self._parser.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        if self._parser is None:
            return None
        d = self._parser.crawl_delay(user_agent)
        return float(d) if d is not None else None

    @property
    def sitemaps(self) -> list[str]:
        return list(self._parser.sitemaps) if self._parser is not None else []


def rules_from_response(status: int | None, body: bytes) -> RobotsRules:
    """Rules for a robots.txt answer (`status` None: no answer at all)."""
    if status is None or status >= 500 or status == 429:
        return RobotsRules(
            deny_all=True,
            reason=f"robots.txt unavailable ({status or 'no answer'}): disallow all for now",
            unavailable=f"robots.txt answered {status}" if status else "robots.txt got no answer",
        )
    if status >= 400:
        return RobotsRules(allow_all=True, reason=f"no robots.txt ({status})")
    if not 200 <= status < 300:
        return RobotsRules(allow_all=True, reason=f"robots.txt answered {status}")
    from protego import Protego

    text = body[:MAX_ROBOTS_BYTES].decode("utf-8", errors="replace")
    return RobotsRules(_parser=Protego.parse(text), reason="robots.txt")
