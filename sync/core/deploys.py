"""Deploy-aware scheduling, pure: is a deploy seen, is a host static, which pages to visit.

A static docs site changes only when it is deployed. A deploy shows in what a pass reads
anyway: the sitemap's validators or bytes change, every `lastmod` moves at once, or the
change feed (`sync.core.feeds`) changes. A host is *static* while every change a visit
found came with a deploy seen since the page's previous visit; one change with no deploy
seen makes it *dynamic* for good (the pass's policy then schedules it alone).

On a static host a pass with no deploy visits nothing for content; at a deploy each page
is visited when its chance of having changed since its last visit, 1 - (1 - p)^k for k
deploys at a learned chance p per deploy, reaches `DEPLOY_THRESHOLD`, and at least every
`DEPLOY_TURN`-th deploy, in turns (a fixed share of the host's pages at each deploy): a
page that changes once in months is otherwise left stale for many deploys, and a lying
`lastmod` says nothing of which page that is. A change found on a page visited only for its
turn, or any page that rarely changes, is a surprise (`surprised`): that deploy touched pages their habits do not predict, so
the pass visits the rest of the host's pages too. `p` comes from the page's visit history
(`sync.core.history.Visit`) laid against the host's deploy times.
Everything takes its inputs, the clock included, as arguments.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from .history import Visit

__all__ = [
    "DEPLOY_PRIOR",
    "DEPLOY_THRESHOLD",
    "DEPLOY_TURN",
    "DEPLOYS_KEPT",
    "DeployCandidate",
    "HostSchedule",
    "SiteSignal",
    "change_chance",
    "chance_per_deploy",
    "choose_at_deploy",
    "deploy_candidate",
    "deploy_seen",
    "deploys_between",
    "feed_urls",
    "on_turn",
    "schedule_lines",
    "schedules_from_json",
    "schedules_to_json",
    "site_signals",
    "surprised",
]

DEPLOYS_KEPT = 256  # deploy times kept per host (older ones: assumed many)
# Beta prior on a page's chance of a change per deploy: (changes, deploys). A new page is
# looked at on its first deploys; a page that never changes drops below the threshold after
# a handful of unchanged deploys and is visited again once enough deploys added up.
DEPLOY_PRIOR = (0.5, 2.0)
DEPLOY_THRESHOLD = 0.25
# Every page is visited at least every this many deploys of its host, its turn fixed by its
# URL, so each deploy visits about 1/DEPLOY_TURN of the pages the chance alone would skip.
# On the replay of FastAPI's docs (deploy date as every lastmod, no feed) 2 keeps the stale
# share under half the nightly full sync's; 3 and more leave a rare edit stale for days.
DEPLOY_TURN = 2


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class SiteSignal:
    """What a pass read of one host that a deploy moves: the digest of its sitemaps'
    validators (ETag, Last-Modified), of its entries (URLs and lastmods), and of its change
    feed's body (None: no feed)."""

    validators: str = ""
    entries: str = ""
    feed: str | None = None

    def to_json(self) -> list:
        return [self.validators, self.entries, self.feed]

    @classmethod
    def from_json(cls, raw: object) -> "SiteSignal | None":
        if isinstance(raw, list) and len(raw) == 3 and all(x is None or isinstance(x, str) for x in raw):
            return cls(raw[0] or "", raw[1] or "", raw[2])
        return None


def _host(url: str) -> str:
    return urlsplit(url).netloc.lower()


def site_signals(
    entries: Mapping[str, str | None],
    validators: Mapping[str, tuple[str | None, str | None]],
    feeds: Mapping[str, str | None] | None = None,
) -> dict[str, SiteSignal]:
    """Per host (netloc): the signal of this pass. `entries` url -> lastmod (the sitemaps'),
    `validators` sitemap URL -> (etag, last-modified) as kept after the pass read it,
    `feeds` host -> digest of its feed body (None or absent: no feed). A host with a feed
    and no entries (a crawled site) has a signal too."""
    by_host: dict[str, list[str]] = {}
    for url in sorted(entries):
        by_host.setdefault(_host(url), []).append(f"{url} {entries[url] or ''}")
    vals: dict[str, list[str]] = {}
    for sm in sorted(validators):
        etag, lm = validators[sm]
        vals.setdefault(_host(sm), []).append(f"{sm} {etag or ''} {lm or ''}")
    feeds = feeds or {}
    # A host with a feed and no sitemap entries (a crawl): its feed alone is its signal.
    hosts = sorted(set(by_host) | {h for h, f in feeds.items() if f is not None})
    return {h: SiteSignal(_digest(vals.get(h, ())), _digest(by_host.get(h, ())), feeds.get(h)) for h in hosts}


def deploy_seen(before: SiteSignal | None, now: SiteSignal | None) -> bool:
    """Pure: did the host deploy between the two reads? A first read is no deploy; a feed
    that appears or goes is one; validators count only when both reads had some."""
    if before is None or now is None:
        return False
    if before.entries != now.entries or before.feed != now.feed:
        return True
    empty = _digest(())
    return before.validators != now.validators and empty not in (before.validators, now.validators)


@dataclass(frozen=True)
class HostSchedule:
    """What a host has shown over the passes: its last signal, the deploys seen (times in
    s), whether it is static (None: no deploy seen yet; False: a change came with no
    deploy), and its change feed: kind and URL (None: none found), when it was last looked
    for, and whether it is trusted (False after it missed a change, for good)."""

    signal: SiteSignal | None = None
    deploys: tuple[float, ...] = ()
    static: bool | None = None
    feed_kind: str | None = None
    feed_url: str | None = None
    feed_checked_s: float | None = None
    feed_trusted: bool = True
    reason: str | None = None  # why the host is dynamic, or its feed untrusted: said in `status`
    deploy_count: int = 0  # deploys seen in all (not capped like `deploys`): the pages' turns
    watched_since_s: float | None = None  # the first pass that read a signal (a change before it says nothing)
    generator: str | None = None  # the feed kind a visited page's <meta name="generator"> names

    def with_deploy(self, now_s: float) -> "HostSchedule":
        deploys = (*self.deploys, now_s)[-DEPLOYS_KEPT:]
        return replace(
            self,
            deploys=deploys,
            static=True if self.static is None else self.static,
            deploy_count=max(self.deploy_count, len(self.deploys)) + 1,
        )

    @property
    def deploy_mode(self) -> bool:
        """Pages are scheduled by deploys: a deploy was seen and no change came without one."""
        return self.static is True

    def to_json(self) -> dict:
        return {
            "signal": self.signal.to_json() if self.signal else None,
            "deploys": list(self.deploys),
            "static": self.static,
            "feed_kind": self.feed_kind,
            "feed_url": self.feed_url,
            "feed_checked_s": self.feed_checked_s,
            "feed_trusted": self.feed_trusted,
            "reason": self.reason,
            "watched_since_s": self.watched_since_s,
            "generator": self.generator,
            "deploy_count": self.deploy_count,
        }

    @classmethod
    def from_json(cls, raw: object) -> "HostSchedule":
        if not isinstance(raw, dict):
            return cls()
        deploys = tuple(float(x) for x in raw.get("deploys") or () if isinstance(x, (int, float)))
        static = raw.get("static")
        checked = raw.get("feed_checked_s")
        watched = raw.get("watched_since_s")
        count = raw.get("deploy_count")
        return cls(
            signal=SiteSignal.from_json(raw.get("signal")),
            deploys=deploys[-DEPLOYS_KEPT:],
            static=static if isinstance(static, bool) else None,
            feed_kind=raw.get("feed_kind") if isinstance(raw.get("feed_kind"), str) else None,
            feed_url=raw.get("feed_url") if isinstance(raw.get("feed_url"), str) else None,
            feed_checked_s=float(checked) if isinstance(checked, (int, float)) else None,
            feed_trusted=raw.get("feed_trusted") is not False,
            reason=raw.get("reason") if isinstance(raw.get("reason"), str) else None,
            watched_since_s=float(watched) if isinstance(watched, (int, float)) else None,
            generator=raw.get("generator") if isinstance(raw.get("generator"), str) else None,
            deploy_count=count if isinstance(count, int) and count >= len(deploys) else len(deploys),
        )


def schedules_to_json(schedules: Mapping[str, HostSchedule]) -> dict:
    return {h: s.to_json() for h, s in sorted(schedules.items())}


def schedules_from_json(raw: object) -> dict[str, HostSchedule]:
    if not isinstance(raw, dict):
        return {}
    return {str(h): HostSchedule.from_json(v) for h, v in raw.items()}


def feed_urls(raw: object) -> list[str]:
    """The change feeds the last pass found and still trusts (a run report's `host_schedule`),
    one URL per host, sorted: what `pagesync watch` re-reads between passes."""
    return sorted({hs.feed_url for hs in schedules_from_json(raw).values() if hs.feed_url and hs.feed_trusted})


def deploys_between(deploys: Sequence[float], after_s: float, until_s: float) -> int:
    """Deploys in (after_s, until_s]; `deploys` sorted. When the kept list starts after
    `after_s` and is full, the older ones are gone: counted as at least one more."""
    n = bisect.bisect_right(deploys, until_s) - bisect.bisect_right(deploys, after_s)
    if len(deploys) >= DEPLOYS_KEPT and deploys and deploys[0] > after_s:
        n += 1
    return n


def chance_per_deploy(
    visits: Sequence[Visit], last_visit_s: float, deploys: Sequence[float], prior: tuple[float, float] = DEPLOY_PRIOR
) -> float:
    """A page's chance of a change per deploy: changes found over the deploys its visits
    spanned, under a Beta prior (`DEPLOY_PRIOR`). `visits` oldest first, the last ending at
    `last_visit_s`; a visit spanning k deploys that found a change counts 1 change in k
    (the change is somewhere among them), one that found none counts 0 in k."""
    changes, exposure = prior
    end = last_visit_s
    for v in reversed(visits):
        start = end - v.elapsed_s
        k = deploys_between(deploys, start, end)
        if k:
            changes += 1.0 if v.changed else 0.0
            exposure += k
        end = start
    return min(1.0, changes / exposure)


def change_chance(p: float, k: int) -> float:
    """The chance that at least one of k deploys changed a page that changes with chance p at each."""
    return 1.0 - (1.0 - p) ** max(0, k)


def on_turn(url: str, deploy_number: int, turn: int = DEPLOY_TURN) -> bool:
    """Pure: is the host's deploy number `deploy_number` the page's turn? Each page has a
    fixed place (from the hash of its URL's path and query: the same on a staging host or
    another port) in a cycle of `turn` deploys, so the host's pages come up in even shares,
    one share at each deploy, not all at once."""
    if turn <= 1:
        return True
    parts = urlsplit(url)
    key = parts.path + (f"?{parts.query}" if parts.query else "")
    place = int(hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16) % turn
    return (deploy_number + place) % turn == 0


@dataclass(frozen=True, order=True)
class DeployCandidate:
    """A page at a deploy: its chance of having changed since its last visit, its URL,
    whether it is due whatever its chance (its turn, or `DEPLOY_TURN` deploys unvisited),
    and its learned chance of a change per deploy."""

    chance: float
    url: str = field(compare=False)
    due: bool = field(default=False, compare=False)
    per_deploy: float = field(default=1.0, compare=False)


def deploy_candidate(
    url: str,
    visits: Sequence[Visit],
    last_visit_s: float,
    deploys: Sequence[float],
    deploy_number: int,
    now_s: float,
    turn: int = DEPLOY_TURN,
) -> DeployCandidate | None:
    """Pure: a page at its host's deploy number `deploy_number` (at `now_s`): None when no
    deploy came since its last visit, else its chance of a change since then and whether
    its turn (`on_turn`) or `turn` deploys without a visit make it due."""
    k = deploys_between(deploys, last_visit_s, now_s)
    if not k:
        return None
    p = chance_per_deploy(visits, last_visit_s, deploys)
    return DeployCandidate(change_chance(p, k), url, due=k >= turn or on_turn(url, deploy_number, turn), per_deploy=p)


def choose_at_deploy(
    cands: Sequence[DeployCandidate], budget: int | None = None, threshold: float = DEPLOY_THRESHOLD
) -> list[str]:
    """Pure: the pages to visit at a deploy, likeliest changed first: those whose chance
    reaches `threshold` or that are due, at most `budget` of them (None: no cap)."""
    chosen = sorted((c for c in cands if c.due or c.chance >= threshold), key=lambda c: (-c.chance, c.url))
    if budget is not None:
        chosen = chosen[: max(0, budget)]
    return [c.url for c in chosen]


def surprised(cand: DeployCandidate, changed: bool | None, threshold: float = DEPLOY_THRESHOLD) -> bool:
    """Pure: does this visit at a deploy say the deploy reached further than the pages'
    habits predict? A page that changes at fewer than one deploy in 1/`threshold` (its
    chance per deploy below it) turned out changed. On the replay of FastAPI's docs (the
    deploy date as every lastmod, no feed) the one-off edits came several to a deploy: the
    first one found sends the pass to the rest, and the stale share drops to the floor a
    pass every 6 h sets."""
    return bool(changed) and cand.per_deploy < threshold


def schedule_lines(raw: object) -> list[str]:
    """`status`'s lines for the last pass's host schedules (`host_schedule` of its report):
    static or dynamic (and why), deploys seen, and the change feed with its trust."""
    lines = []
    for host, hs in sorted(schedules_from_json(raw).items()):
        kind = {
            True: "static (pages visited at its deploys)",
            False: "dynamic (change-rate schedules it)",
            None: "no deploy seen yet (change-rate schedules it)",
        }[hs.static]
        feed = (
            f"change feed {hs.feed_kind} {'trusted' if hs.feed_trusted else 'NOT trusted'}"
            if hs.feed_kind
            else "no change feed"
            if hs.feed_trusted
            else "change feed NOT trusted"
        )
        why = f": {hs.reason}" if hs.reason else ""
        lines.append(f"host {host}: {kind}, {len(hs.deploys)} deploys seen, {feed}{why}")
    return lines
