#!/usr/bin/env python3
"""Revisit policies on a real docs site's real edit history (does the
learned policy beat halve-double and the nightly recrawl on real edits?).

The site. FastAPI's English docs (`docs/en/docs`, with the `docs_src` code samples they
include) rendered as an mkdocs-like static site at every first-parent commit that touches
them, over a window of days: each commit becomes a site change at its commit time
(text edits, pages added and removed, and nav/prev-next churn on every page when a page
is added, removed or retitled, as mkdocs does). The first commit of the window is the
initial site. The rendering is `replay_docs_history.py`'s.

The run. This history becomes a `freshness.Timeline` and goes through `freshness.py`'s
campaign unchanged: the real engine, fetcher, state and Qdrant Edge store, the fake hash
embedder, a pass every 6 h on a simulated clock, and freshness measured against the live
text's hash at every instant. Strategies, at equal page-request budgets: nightly full
recrawl, halve-double (halve the interval on a change, double it otherwise), uniform revisits and the change-rate default at
halve-double's budget, change-rate uncapped, at half the budget, once a day, and once a
day at 10% of the nightly recrawl's requests.

Two sitemap scenarios:

- git-lastmod: lastmod = time of the last commit touching the page's `.md` file (what
  mkdocs' git-revision-date plugins publish). Mostly honest, but an edit to an included
  code sample changes the page without moving its lastmod, and a typo fix in the
  markdown source can move it without changing the text;
- same-lastmod: every URL carries one stamp (mkdocs' default sitemap, the build date).
  The engine ignores it, so the revisit policy alone decides;
- deploy-date: every commit is a deploy that stamps every URL with its time and rewrites
  every page's bytes (a build stamp: new ETag, same text), as a CI-built site does;
- mkdocs: deploy-date plus `search/search_index.json` (each page's text), as MkDocs serves it.

Run it with `make replay-policies`, or

    .venv/bin/python bench/replay_policies.py [--git-dir DIR --start 2024-06-20 --days 60 --jobs 2]

Writes bench/results/replay_policies.md and .json, and notebooks/replay_policies.png.
The timeline (rendering and hashing every commit's pages, the slow part) is cached in
--work between runs.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import os
import pickle
import re
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import freshness as fr  # noqa: E402
from freshness import D, DEPLOY_DATE, MKDOCS, SAME_LASTMOD, SiteEvent, Timeline  # noqa: E402
from replay_docs_history import DEFAULT_GIT_DIR, Git, Renderer, _INCLUDE, _JINJA, _H1, Page, page_url  # noqa: E402

GIT_LASTMOD = "git-lastmod"
SCENARIOS = (GIT_LASTMOD, SAME_LASTMOD, DEPLOY_DATE, MKDOCS)
SAMPLES_DIR = "docs_src"


# ==========================================================================================
# the history: pages at every commit, as site events
# ==========================================================================================
class TrackingRenderer(Renderer):
    """The replay's renderer, remembering which repo files each page includes, so a
    commit that touches only a code sample re-renders exactly the pages showing it."""

    def __init__(self, git: Git, docs_dir: str):
        super().__init__(git, docs_dir)
        self.deps: dict[str, set[str]] = {}
        self._seen: set[str] = set()

    def expand(self, commit: str, text: str, depth: int = 0) -> str:
        for line in text.splitlines():
            m = _INCLUDE.match(line)
            if m:
                self._seen.add(os.path.normpath(os.path.join(self.docs_dir, m["path"])))
        return super().expand(commit, text, depth)

    def page(self, commit: str, src: str) -> Page | None:
        raw = self.git.blob(commit, src)
        if raw is None:
            return None
        self._seen = set()
        text = _JINJA.sub("", self.expand(commit, raw.decode("utf-8", "replace")))
        self.deps[src] = self._seen
        m = _H1.search(text)
        rel = src[len(self.docs_dir) + 1 :]
        title = re.sub(r"[*`]", "", m.group(1).strip()) if m else Path(rel).stem.replace("-", " ").title()
        return Page(src, page_url(rel), title, text)


def _commits(git: Git, rev: str, start: datetime, end: datetime, paths: list[str]) -> list[tuple[str, int]]:
    out = git(
        "rev-list",
        "--first-parent",
        "--reverse",
        "--format=%ct",
        f"--since={start.isoformat()}",
        f"--until={end.isoformat()}",
        rev,
        "--",
        *paths,
    ).split("\n")
    commits, sha = [], None
    for line in out:
        if line.startswith("commit "):
            sha = line.split()[1]
        elif line.strip() and sha:
            commits.append((sha, int(line)))
            sha = None
    return commits


def _changed(git: Git, a: str, b: str) -> set[str]:
    return set(git("diff", "--name-only", "--no-renames", a, b).split())


def build_history(git: Git, rev: str, docs_dir: str, start: datetime, days: float) -> tuple[list[SiteEvent], dict]:
    """Site events from the first-parent commits in [start, start + days): t = seconds
    from `start`. Returns (events without text hashes, facts about the history)."""
    end = datetime.fromtimestamp(start.timestamp() + days * D, timezone.utc)
    base = git("rev-list", "-1", "--first-parent", f"--before={start.isoformat()}", rev).strip()
    commits = _commits(git, rev, start, end, [docs_dir, SAMPLES_DIR])
    renderer = TrackingRenderer(git, docs_dir)

    def md_files(commit: str) -> list[str]:
        names = git("ls-tree", "-r", "--name-only", commit, "--", docs_dir).splitlines()
        return sorted(n for n in names if n.endswith(".md"))

    pages = {src: p for src in md_files(base) if (p := renderer.page(base, src)) is not None}
    lastmod = _initial_lastmods(git, base, docs_dir, set(pages), start)
    html = renderer.render_site(list(pages.values()), "")
    events = [
        SiteEvent(
            0.0,
            "set",
            url,
            "static",
            html=h,
            new_page=True,
            lastmod={GIT_LASTMOD: lastmod[_src_of(pages, url)], SAME_LASTMOD: 0.0},
        )
        for url, h in html.items()
    ]
    prev, md_edits = base, 0
    for sha, ct in commits:
        t = ct - start.timestamp()
        changed = _changed(git, prev, sha)
        prev = sha
        srcs = set(md_files(sha))
        touched = {s for s in srcs if s in changed or s not in pages or renderer.deps.get(s, set()) & changed}
        for src in set(pages) - srcs:
            del pages[src]
        for src in touched:
            if (p := renderer.page(sha, src)) is not None:
                pages[src] = p
        for src in touched & changed:  # the .md itself changed: lastmod moves
            lastmod[src] = t
            md_edits += 1
        for src in srcs - set(lastmod):
            lastmod[src] = t
        ordered = [pages[s] for s in sorted(pages)]
        new_html = renderer.render_site(ordered, "")
        url_src = {p.url: p.src for p in ordered}
        for url in sorted(set(html) - set(new_html)):
            events.append(SiteEvent(t, "remove", url, "static", lastmod={}))
        for url, h in new_html.items():
            lm = {GIT_LASTMOD: lastmod[url_src[url]], SAME_LASTMOD: 0.0}
            if html.get(url) != h or url_src[url] in touched & changed:
                events.append(SiteEvent(t, "set", url, "static", html=h, new_page=url not in html, lastmod=lm))
        html = new_html
    facts = {
        "base_commit": base,
        "commits": len(commits),
        "md_edits": md_edits,
        "first_commit": commits[0][0] if commits else None,
        "last_commit": commits[-1][0] if commits else None,
        "initial_pages": sum(1 for e in events if e.t == 0),
        "final_pages": len(html),
    }
    return events, facts


def _src_of(pages: dict[str, Page], url: str) -> str:
    return next(src for src, p in pages.items() if p.url == url)


def _initial_lastmods(git: Git, commit: str, docs_dir: str, srcs: set[str], start: datetime) -> dict[str, float]:
    """src -> (time of the last first-parent commit touching it) - start, in seconds."""
    out: dict[str, float] = {}
    when = None
    log = git("log", "--first-parent", "--format=%x00%ct", "--name-only", commit, "--", docs_dir)
    for line in log.splitlines():
        if line.startswith("\x00"):
            when = int(line[1:]) - start.timestamp()
        elif line in srcs and line not in out and when is not None:
            out[line] = when
            if len(out) == len(srcs):
                break
    return {s: out.get(s, -365 * D) for s in srcs}


def text_change_events(events: list[SiteEvent]) -> Iterator[tuple[SiteEvent, bool]]:
    """(event, changed) for every "set" event in order: changed when the page's text hash
    differs from the one it last had (a page removed or moved away starts afresh)."""
    last: dict[str, str | None] = {}
    for e in events:
        if e.op == "set":
            yield e, e.path in last and last[e.path] != e.text_hash
            last[e.path] = e.text_hash
        else:
            last.pop(e.path, None)


def classify(events: list[SiteEvent], horizon: float) -> tuple[list[SiteEvent], dict[str, int], list[float]]:
    """Each page's class by its observed text changes over the window: hot (>= 1 every 2
    days), weekly (>= 1 every 2 weeks), static. Returns the events relabelled, the class
    sizes among the initial pages, and the initial pages' observed change rates (per s)."""
    changes = collections.Counter(e.path for e, changed in text_change_events(events) if changed)

    def kind(path: str) -> str:
        per_day = changes.get(path, 0) / (horizon / D)
        return "hot" if per_day >= 0.5 else "weekly" if per_day >= 1 / 14 else "static"

    initial = [e.path for e in events if e.t == 0]
    sizes = {k: sum(1 for p in initial if kind(p) == k) for k in fr.KINDS}
    rates = [changes.get(p, 0) / horizon for p in initial]
    return [replace(e, kind=kind(e.path)) for e in events], sizes, rates


def load_timeline(args: argparse.Namespace, pool: ProcessPoolExecutor) -> tuple[Timeline, dict]:
    start = datetime.fromisoformat(args.start).replace(tzinfo=timezone.utc)
    git = Git(args.git_dir)
    try:
        head = git("rev-parse", args.rev).strip()
        key = hashlib.sha256(f"{head} {args.docs_dir} {start.isoformat()} {args.days} v1".encode()).hexdigest()[:16]
        cache = Path(args.work) / f"timeline-{key}.pickle"
        if cache.exists():
            return pickle.loads(cache.read_bytes())
        t0 = time.monotonic()
        events, facts = build_history(git, args.rev, args.docs_dir, start, args.days)
    finally:
        git.close()
    fr.log(f"history: {facts['commits']} commits, {len(events)} site events ({time.monotonic() - t0:.0f} s); hashing")
    events = fr.hash_timeline(events, pool)
    events, sizes, rates = classify(events, args.days * D)
    facts.update(classes=sizes, text_changes=_text_changes(events), events=len(events), build_s=time.monotonic() - t0)
    out = (Timeline(events, rates), facts)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(out))
    return out


def _text_changes(events: list[SiteEvent]) -> int:
    return sum(changed for _, changed in text_change_events(events))


# ==========================================================================================
# verdicts and report
# ==========================================================================================
def verdicts(results: list[dict]) -> list[str]:
    """Does the default beat both references on this history? Checked, not asserted.
    `results` includes the references (halve-double, nightly), run or taken from
    --refs-from."""
    out = deploy_verdicts(results)
    for sc in SCENARIOS:
        by = {r["strategy"]["key"]: r for r in results if r["scenario"] == sc}
        if not {"hd", "nightly"} <= set(by) or not any(k.startswith("cr") for k in by):
            continue
        hd, night, crhd = by["hd"], by["nightly"], by.get("cr@hd")
        ratio = (crhd["stale_share"] / hd["stale_share"] if hd["stale_share"] else math.inf) if crhd else None
        if crhd:
            out.append(
                f"- **{sc}, vs halve-double at its budget**: change-rate {crhd['freshness']:.4f} fresh "
                f"(stale {crhd['stale_share']:.4f}) with {crhd['page_requests']:,} requests; halve-double "
                f"{hd['freshness']:.4f} (stale {hd['stale_share']:.4f}) with {hd['page_requests']:,}: stale share "
                f"ratio {ratio:.2f}, {'BEATS' if ratio < 1 else 'DOES NOT BEAT'} it"
                f"{' (stale-share goal <= 0.5: met)' if ratio <= 0.5 else ' (stale-share goal <= 0.5: missed)'}."
            )
        cheaper = [
            r
            for k, r in by.items()
            if k.startswith("cr") and r["freshness"] >= hd["freshness"] and r["page_requests"] < hd["page_requests"]
        ]
        if cheaper:
            c = min(cheaper, key=lambda r: r["page_requests"])
            out.append(
                f"- **{sc}, vs halve-double on requests**: the cheapest change-rate run at least as fresh, "
                f"{c['strategy']['label']}, {c['freshness']:.4f} with {c['page_requests']:,} requests "
                f"({c['page_requests'] / hd['page_requests']:.0%} of halve-double's): BEATS it."
            )
        fresher = [r for k, r in by.items() if k.startswith("cr") and r["freshness"] >= night["freshness"]]
        if fresher:
            c = min(fresher, key=lambda r: r["page_requests"])
            share = c["page_requests"] / night["page_requests"]
            out.append(
                f"- **{sc}, vs the nightly full recrawl**: nightly {night['freshness']:.4f} fresh with "
                f"{night['page_requests']:,} requests; the cheapest change-rate run at least as fresh, "
                f"{c['strategy']['label']}, {c['freshness']:.4f} with {c['page_requests']:,} "
                f"({share:.1%} of nightly): BEATS it (tenth-of-nightly goal <= 10%: "
                f"{'met' if share <= 0.1 else 'missed'})."
            )
        else:
            out.append(
                f"- **{sc}, vs the nightly full recrawl**: no change-rate run reached its freshness "
                f"{night['freshness']:.4f}: DOES NOT BEAT it."
            )
    return out


def deploy_verdicts(results: list[dict]) -> list[str]:
    """`--policy deploys` against the nightly full sync, halve-double and visiting every page
    after each deploy, per scenario: the goals are at most half the nightly's stale share
    with fewer requests (deploy date), and the honest-lastmod freshness at a few hundred
    requests (MkDocs feed). Checked, not asserted."""
    out = []
    for sc in SCENARIOS:
        by = {r["strategy"]["key"]: r for r in results if r.get("scenario") == sc}
        dep, night = by.get("dep"), by.get("nightly")
        if dep is None or night is None:
            continue
        ratio = dep["stale_share"] / night["stale_share"] if night["stale_share"] else math.inf
        line = (
            f"- **{sc}, deploys vs the nightly full sync**: stale {dep['stale_share']:.4f} with "
            f"{dep['page_requests']:,} requests against {night['stale_share']:.4f} with "
            f"{night['page_requests']:,}: stale share ratio {ratio:.2f} ("
            f"{'at most half: met' if ratio <= 0.5 else 'at most half: missed'}), "
            f"{dep['page_requests'] / night['page_requests']:.1%} of its requests"
        )
        for key, name in (("hd", "halve-double"), ("dep-full", "every page after each deploy")):
            if key in by:
                r = by[key]
                line += f"; {name}: stale {r['stale_share']:.4f} with {r['page_requests']:,}"
        out.append(line + ".")
    return out


def write_markdown(data: dict, command: str, path: Path) -> None:
    f = data["facts"]
    cl = f["classes"]
    lines = [
        "# Revisit policies on a real docs site's edit history",
        "",
        f"Command: `{command}` (wall time {data['wall_s'] / 60:.1f} min on {data['jobs']} worker processes, "
        f"timeline {f['build_s'] / 60:.1f} min of it when not cached).",
        "",
        f"FastAPI's `docs/en/docs` (with its `docs_src` samples) at every first-parent commit from {data['start']} for "
        f"{data['days']:g} days: {f['commits']} commits, {f['initial_pages']} pages at the start and {f['final_pages']} "
        f"at the end, {f['text_changes']} page text changes ({f['md_edits']} .md edits). Classes by observed text "
        f"changes in the window (initial pages): {cl['static']} static (< 1 / 2 weeks), {cl['weekly']} weekly, "
        f"{cl['hot']} hot (>= 1 / 2 days). A pass every {data['pass_hours']:g} h ({data['n_passes']} passes; "
        "nightly: one `--full` pass a day at 00:00) with the real engine, fetcher, state and Qdrant Edge store on "
        "127.0.0.1 and the fake hash embedder. Scenarios: git-lastmod (lastmod = last commit touching the page's "
        ".md; included code samples do not move it), same-lastmod (one stamp on every URL: ignored by the engine, "
        "so the policy alone decides). Columns as in `freshness.md`.",
        "",
        *fr.main_table(data, SCENARIOS),
        "",
        *fr.detail_table(data, SCENARIOS),
        "",
        "## Verdicts (checked, not asserted)",
        "",
        *verdicts(data["results"] + data.get("references", [])),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", default=os.environ.get("REPLAY_GIT_DIR") or DEFAULT_GIT_DIR)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--docs-dir", default="docs/en/docs")
    ap.add_argument("--start", default="2024-06-20", help="start of the window (UTC date)")
    ap.add_argument("--days", type=float, default=60.0)
    ap.add_argument("--pass-hours", type=float, default=6.0)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), type=lambda s: [x for x in s.split(",") if x])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--calibrate", type=int, default=4, help="budget corrections per capped run, at most")
    ap.add_argument("--work", default="/tmp/pagesync-replay-policies", help="cache of the built timeline")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/replay_policies.md")
    ap.add_argument("--plot", type=Path, default=REPO / "notebooks/replay_policies.png")
    fr.add_partial_args(ap)
    args = ap.parse_args(argv)
    if bad := set(args.scenarios) - set(SCENARIOS):
        ap.error(f"unknown scenario(s) {', '.join(sorted(bad))}")
    if bad := set(args.strategies) - set(fr.ORDER):
        ap.error(f"unknown strategy key(s) {', '.join(sorted(bad))}")
    if not Path(args.git_dir).exists():
        ap.error(f"no git repo at {args.git_dir}: clone https://github.com/fastapi/fastapi and pass --git-dir")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([".venv/bin/python", "bench/replay_policies.py", *(sys.argv[1:] if argv is None else argv)])
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        timeline, facts = load_timeline(args, pool)
        args.pages = facts["initial_pages"]  # the campaign sizes uniform intervals by it
        fr.log(f"timeline: {facts['events']} events, {facts['text_changes']} text changes, classes {facts['classes']}")
        campaign = fr.Campaign(pool, timeline, args)
        results = campaign.run()
    data = {
        "facts": facts,
        "start": args.start,
        "days": args.days,
        "pass_hours": args.pass_hours,
        "n_passes": campaign.n_passes,
        "jobs": args.jobs,
        "wall_s": time.monotonic() - started,
        "results": results,
        # reference runs taken from --refs-from (the verdicts need them), not re-run here
        "references": [r for r in campaign.refs.values() if r and r not in results],
    }
    write_markdown(data, command, args.out)
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=1))
    fr.write_plot(data, args.plot, SCENARIOS, title="(FastAPI history)")
    print("\n".join(fr.main_table(data, SCENARIOS) + [""] + verdicts(results + data["references"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
