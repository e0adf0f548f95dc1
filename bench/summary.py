#!/usr/bin/env python3
"""`make bench`'s table: the benchmark rows (pass throughput, reuse, no-op pass, fetch-bound
pass, store replace/audit scale, and against a real embeddings server: throughput and
tokens per week), each a ratio against a baseline measured in
the same run, read from the JSON files the row scripts wrote in bench/results/.

    .venv/bin/python bench/summary.py [--results bench/results] [--since EPOCH]

A row with no results says so. With `--since` (`make bench` passes the time it started),
a row whose results file is older, i.e. the figures kept in the repository because its
script failed or did not run here (pass throughput and reuse without a FastAPI clone), is
marked as not measured by this run, so old figures never pass for new ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


KEPT = " (KEPT: not measured by this run)"


def _kept(path: Path, since: float | None) -> str:
    """The mark of a results file this run did not write."""
    try:
        return KEPT if since is not None and path.stat().st_mtime < since else ""
    except OSError:
        return ""


def rows(results: Path, since: float | None = None) -> list[str]:
    out = ["| # | what | figure | baseline (same run) | ratio | goal |", "|---|---|---|---|---|---|"]
    pipe = _load(results / "pipeline.json")
    kept = {
        name: _kept(results / name, since)
        for name in ("pipeline.json", "scale_passes.json", "store_replace.json", "audit_scale.json")
    }
    if pipe:
        p, raw = pipe["row1"]["pass"], pipe["row1"]["raw"]
        rate, raw_rate = p["chunks_embedded"] / p["seconds"], raw["n"] / raw["embed_s"]
        out.append(
            f"| 1 | initial index, {pipe['pages']} FastAPI pages, {p['chunks_embedded']:,} chunks embedded{kept['pipeline.json']} | "
            f"{rate:.1f} chunks/s, peak {p.get('hwm_mb') or 0:.0f} MB | raw {raw['embedder']}: {raw_rate:.1f} chunks/s "
            f"| {rate / raw_rate:.2f} | >= 0.9 |"
        )
        r2 = pipe["row2"]
        ps, lc = r2["pagesync"], r2["langchain"]["v2"]
        out.append(
            f"| 2 | a day of edits (changelog entry, 3 paragraphs, +1 page, -1 page){kept['pipeline.json']} | pagesync embeds "
            f"{ps['chunks_embedded']:,} ({ps.get('chunks_reused') or 0:,} reused) | page-level {r2['page_level']:,}; "
            f"LangChain index() {lc['embedded']:,} | {ps['chunks_embedded'] / max(1, r2['page_level']):.3f} of "
            f"page-level, {ps['chunks_embedded'] / max(1, lc['embedded']):.3f} of LangChain | fewer |"
        )
    else:
        out.append("| 1-2 | initial index; a day of edits | not run (needs a FastAPI clone: REPLAY_GIT_DIR) | | | |")
    scale = _load(results / "scale_passes.json")
    if scale and scale.get("noop"):
        n = min(scale["noop"], key=lambda r: r["pass"]["wall_s"])  # the best of the runs (a shared machine)
        loaded = [m for m, v in n["pass"]["modules"].items() if v] or ["nothing heavy"]
        out.append(
            f"| 3 | no-op pass, {scale['pages']:,} tracked pages{kept['scale_passes.json']} | best of {len(scale['noop'])}: {n['pass']['wall_s']:.2f} s process "
            f"({n['pass_seconds']:.2f} s pass), {n['pass']['hwm_mb']:.0f} MB; loaded: {', '.join(loaded)} | "
            f"`import sync.commands.cli`: {n['baseline']['wall_s']:.2f} s, {n['baseline']['hwm_mb']:.0f} MB | "
            f"{n['pass']['wall_s'] / n['baseline']['wall_s']:.2f} (time) | <= 1 s, <= 200 MB |"
        )
    elif scale:
        out.append(f"| 3 | no-op pass{kept['scale_passes.json']} | not measured (`--noop-runs 0`) | | | |")
    if scale and scale.get("fetch"):
        # Every round, and the median round by ratio (the rounds alternate which goes first).
        rounds = sorted(
            (
                (f["pages_fetched"] / f["pass_seconds"]) / (scale["pages"] / f["plain_s"]),
                f["pages_fetched"] / f["pass_seconds"],
                scale["pages"] / f["plain_s"],
            )
            for f in scale["fetch"]
        )
        ratio, ps, plain = rounds[(len(rounds) - 1) // 2]
        each = ", ".join(f"{r:.2f}" for r, _, _ in rounds)
        # CPU per page (results from 2026-11-30 on): steadier than pages/s on a shared machine.
        cpu = sorted(
            (f["plain_cpu_s"] / scale["pages"]) / (f["pass"]["cpu_s"] / f["pages_fetched"])
            for f in scale["fetch"]
            if "plain_cpu_s" in f
        )
        cpu_note = f"; CPU per page {cpu[(len(cpu) - 1) // 2]:.2f} (median)" if cpu else ""
        out.append(
            f"| 4 | fetch-bound pass, {scale['pages']:,} x 304 from nginx{kept['scale_passes.json']} | {ps:.0f} pages/s (median of "
            f"{len(rounds)} rounds) | plain httpx loop {plain:.0f} pages/s | {ratio:.2f} (rounds: {each}){cpu_note} | close to 1 |"
        )
    elif scale:
        out.append(f"| 4 | fetch-bound pass{kept['scale_passes.json']} | not measured (`--rounds 0`) | | | |")
    else:
        out.append("| 3-4 | no-op pass; fetch-bound pass | not run | | | |")
    store = _load(results / "store_replace.json")
    audit = _load(results / "audit_scale.json")
    if store:
        edge = [r for r in store if r["backend"] == "edge"]
        first, last = edge[0], edge[-1]
        if "replace" in last:  # mean and median over --replaces pages, sizes measured in turn
            fig = lambda r: f"{r['replace']['median']:.2f} ms median, {r['replace_ms']:.2f} ms mean"  # noqa: E731
            ratio = (
                f"{last['replace']['median'] / first['replace']['median']:.2f} (median), "
                f"{last['replace_ms'] / first['replace_ms']:.2f} (mean)"
            )
        else:
            fig = lambda r: f"{r['replace_ms']:.2f} ms"  # noqa: E731
            ratio = f"{last['replace_ms'] / first['replace_ms']:.2f}"
        out.append(
            f"| 5a | page replace, embedded store{kept['store_replace.json']} | {fig(last)} at {last['points']:,} points | "
            f"{fig(first)} at {first['points']:,} | {ratio} | flat (~1) |"
        )
    if audit:
        first, last = audit[0], audit[-1]
        # Peak RSS counts the shard's mapped files; results since the private peak was
        # recorded show it beside (older ones lack it).
        mem = lambda r: f"{r['peak_rss_mb']} MB" + (f" ({r['peak_anon_mb']} MB private)" if "peak_anon_mb" in r else "")  # noqa: E731
        out.append(
            f"| 5b | audit, embedded store{kept['audit_scale.json']} | {last['seconds']} s, {mem(last)} at {last['points']:,} points "
            f"| {first['seconds']} s, {mem(first)} at {first['points']:,} | "
            f"{(last['seconds'] / last['points']) / (first['seconds'] / first['points']):.2f} (per point) | linear "
            "(~1 per point) |"
        )
    if not (store or audit):
        out.append("| 5 | store replace and audit | not run | | | |")
    out += remote_rows(results, since)
    out += retrieval_rows(results, since)
    return out


def retrieval_rows(results: Path, since: float | None) -> list[str]:
    """Row 8: a first pass with keyword vectors against one without (bench/retrieval.py)."""
    ret = _load(results / "retrieval.json")
    cost = (ret or {}).get("first_pass")
    if not cost:
        return [
            "| 8 | first pass with keyword vectors | not run (bench/retrieval.py: needs Click's docs built) | | | |"
        ]
    w, wo = cost["with"], cost["without"]
    return [
        f"| 8 | first pass with BM25 keyword vectors, Click's Sphinx docs, {w['chunks_written']:,} chunks"
        f"{_kept(results / 'retrieval.json', since)} | {w['seconds']:.1f} s, peak {w['hwm_mb']:.0f} MB | "
        f"without: {wo['seconds']:.1f} s, peak {wo['hwm_mb']:.0f} MB | {cost['time_ratio']:.2f} (time), "
        f"{cost['memory_ratio']:.2f} (memory) | close to 1 |"
    ]


def _ratio(x: float | None) -> str:
    return "n/a (pagesync sent nothing)" if x is None else f"{x:.1f}x"


def remote_rows(results: Path, since: float | None) -> list[str]:
    """Rows 6-7: `--embedder openai:MODEL` against a real server (infinity-emb on 127.0.0.1)."""
    out = []
    thr = _load(results / "embed_throughput.json")
    if thr:
        m, b = thr["median"], thr.get("best")
        p, q = m["pass"], m["plain"]
        if b:  # each side's fastest round (results from 2026-12-02 on)
            fig, base, ratio = b["pass_texts_per_s"], b["plain_texts_per_s"], b["ratio"]
            how = f"best of {len(thr['rounds'])} rounds"
        else:
            fig, base, ratio = p["texts"] / p["seconds"], q["texts"] / q["seconds"], m["ratio"]
            how = f"median of {len(thr['rounds'])} rounds"
        out.append(
            f"| 6 | embedding throughput, `openai:` embedder against infinity-emb, {p['texts']:,} texts, "
            f"concurrency {thr['concurrency']}{_kept(results / 'embed_throughput.json', since)} | "
            f"{fig:.1f} texts/s ({how}) | plain httpx loop, same requests: {base:.1f} texts/s | {ratio:.2f} "
            f"(each round: {', '.join(f'{r:.2f}' for r in thr['ratios'])}) | >= 0.9 |"
        )
    else:
        out.append("| 6 | embedding throughput against a real server | not run (needs `make infinity`) | | | |")
    tok = _load(results / "embed_tokens.json")
    if tok:
        s = tok["summary"]
        w = s["tokens_per_week"]
        price = float(tok["args"]["price"])
        out.append(
            f"| 7 | tokens sent per week, FastAPI docs, {s['days_after_initial']} days after the initial index"
            f"{_kept(results / 'embed_tokens.json', since)} | pagesync {w['pagesync']:,.0f} "
            f"(${s['usd_per_week']['pagesync']:.4f}/week at ${price:g}/M, assumed) | nightly full re-embed "
            f"{w['full']:,.0f} (${s['usd_per_week']['full']:.4f}); LangChain index() {w['langchain']:,.0f} "
            f"(${s['usd_per_week']['langchain']:.4f})"
            + (f", in one batch {w['langchain_one_batch']:,.0f}" if "langchain_one_batch" in w else "")
            + f" | full/pagesync {_ratio(s['ratio_full_to_pagesync'])}, "
            f"LangChain/pagesync {_ratio(s['ratio_langchain_to_pagesync'])} | fewer |"
        )
    else:
        out.append("| 7 | tokens sent per week | not run (needs a FastAPI clone and `make infinity`) | | | |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=REPO / "bench/results")
    ap.add_argument(
        "--since",
        type=float,
        default=None,
        help="epoch seconds: mark rows whose results file is older (not written by this run)",
    )
    args = ap.parse_args(argv)
    table = rows(args.results, args.since)
    (args.results / "bench.md").write_text(
        "# make bench\n\n" + "\n".join(table) + "\n\nDetails: pipeline.md, "
        "scale_passes.md, store_replace.json, audit_scale.json, embed_throughput.md, "
        "embed_tokens.md.\n"
    )
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
