"""Stress: `pagesync run` killed (kill -9) mid-pass while `status`, `audit`, `export` and
another `run` hit the same embedded store, then a clean `run --full`; after every
iteration the collection must equal a fresh full index of the site as it is now (point
ids, payloads but `fetched_at`, vectors).

Each iteration, at random: edit the site (pages edited, shrunk, added, removed), start
`run` (directly, or under a parent shell that is the process killed), kill -9 the parent
only or the whole process group at a random moment (or not at all), start concurrent
commands at random moments, sometimes open the shard in-process with another search pool
size (`EdgeStore(search_threads=...)`), then wait for everything, run the recovery pass and
compare. The first difference stops the loop and keeps the work directory.

    python bench/kill_stress.py --iterations 200 --seed 1

Everything runs on 127.0.0.1 with the fake embedder; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo.site_server import Site, SiteServer  # noqa: E402
from tests.helpers import group_alive, page_html, para  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
PY = sys.executable


def pagesync_cmd(work: Path, *args: str) -> list[str]:
    return [PY, "-m", "sync", *args, "--qdrant-path", str(work / "q"), "--state", str(work / "state.db")]


def build_site(site: Site, n: int, rng: random.Random) -> None:
    for i in range(n):
        site.set(
            f"/docs/p{i}.html", page_html(f"Page {i}", [para(f"p{i}-s{j}-v0", 80) for j in range(rng.randint(6, 12))])
        )


def edit_site(site: Site, rng: random.Random, it: int) -> list[str]:
    """A few random edits; returns what was done (for the log)."""
    done = []
    paths = site.pages()
    for p in rng.sample(paths, k=min(len(paths), rng.randint(1, 4))):
        k = rng.randint(2, 12)
        site.set(p, page_html(p, [para(f"{p}-s{j}-v{it}" if j % 2 else f"{p}-s{j}-v0", 80) for j in range(k)]))
        done.append(f"edit {p} ({k} sections)")
    if rng.random() < 0.3 and len(paths) > 8:
        victim = rng.choice(paths)
        site.remove(victim)
        done.append(f"remove {victim}")
    if rng.random() < 0.3:
        new = f"/docs/n{it}.html"
        site.set(new, page_html(f"New {it}", [para(f"n{it}-s{j}", 80) for j in range(rng.randint(3, 9))]))
        done.append(f"add {new}")
    return done


def exported(work: Path) -> dict[str, dict]:
    out = subprocess.run(
        pagesync_cmd(work, "export", "--with-vectors"), capture_output=True, text=True, env=ENV, cwd=work, timeout=120
    )
    if out.returncode != 0:
        raise RuntimeError(f"export failed: {out.stderr.strip()}")
    points = {}
    for line in out.stdout.splitlines():
        p = json.loads(line)
        p["payload"].pop("fetched_at", None)
        points[p["id"]] = p
    return points


def difference(incremental: dict[str, dict], fresh: dict[str, dict]) -> str | None:
    if incremental.keys() != fresh.keys():
        return (
            f"point ids differ: {len(incremental)} points against {len(fresh)}; "
            f"{len(incremental.keys() - fresh.keys())} extra, {len(fresh.keys() - incremental.keys())} missing"
        )
    for pid, p in incremental.items():
        q = fresh[pid]
        if p["payload"] != q["payload"]:
            return f"payload of {p['payload'].get('chunk_id')} differs"
        if max((abs(a - b) for a, b in zip(p["vector"], q["vector"])), default=0.0) > 1e-4:
            return f"vector of {p['payload'].get('chunk_id')} differs"
    return None


def open_with_threads(work: Path, threads: int | None) -> str:
    """Open the shard in a child process with another search pool size, count, close."""
    code = (
        "import sys; from sync.edges.edge_store import EdgeStore\n"
        f"s = EdgeStore({str(work / 'q')!r}, 'pages', search_threads={threads!r}, lock_wait=2)\n"
        "try:\n    print(s.count())\nexcept Exception as e:\n    print('error', e)\nfinally:\n    s.close()\n"
    )
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=ENV, timeout=60)
    return (r.stdout + r.stderr).strip().splitlines()[-1] if (r.stdout + r.stderr).strip() else ""


def iteration(it: int, site: Site, work: Path, rng: random.Random, log) -> str | None:
    sitemap = site.server.url("/sitemap.xml")  # type: ignore[attr-defined]
    run = ["run", "--sitemap", sitemap, "--embedder", "fake", "-q"]
    if rng.random() < 0.7:
        log(f"[{it}] edits: {'; '.join(edit_site(site, rng, it))}")
    for p in site.pages():
        site.slow(p, rng.choice([0.0, 0.05, 0.1, 0.2, 0.3]))
    first = pagesync_cmd(
        work, *run, "--full", "--embed-batch", str(rng.choice([1, 2, 8, 64])), "--workers", str(rng.choice([1, 2, 8]))
    )
    via_shell = rng.random() < 0.5
    cmd = ["sh", "-c", " ".join(f"'{a}'" for a in first) + "; true"] if via_shell else first
    main = subprocess.Popen(
        cmd, env=ENV, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, text=True
    )
    t0 = time.monotonic()
    kill_at = rng.uniform(0.1, 3.0)
    kill_how = rng.choice(["parent", "group", "none"])
    others: list[tuple[str, subprocess.Popen]] = []
    plan = sorted(
        (rng.uniform(0.0, 3.0), rng.choice(["status", "audit", "run", "export", "threads"]))
        for _ in range(rng.randint(1, 4))
    )
    killed = False
    while plan or not killed:
        now = time.monotonic() - t0
        if not killed and now >= kill_at:
            killed = True
            if kill_how == "parent":
                with_ok = main.poll() is None
                if with_ok:
                    os.kill(main.pid, signal.SIGKILL)
            elif kill_how == "group":
                try:
                    os.killpg(main.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if plan and now >= plan[0][0]:
            _, what = plan.pop(0)
            if what == "threads":
                others.append(
                    (
                        what,
                        subprocess.Popen(
                            [
                                PY,
                                "-c",
                                "import sys; from sync.edges.edge_store import EdgeStore\n"
                                f"s = EdgeStore({str(work / 'q')!r}, 'pages', search_threads={rng.choice([None, 2, 4])!r})\n"
                                "try:\n    print(s.count())\nexcept Exception as e:\n    print('error', e)\nfinally:\n    s.close()\n",
                            ],
                            env=ENV,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            text=True,
                        ),
                    )
                )
            else:
                args = {
                    "status": ["status"],
                    "audit": ["audit"],
                    "export": ["export"],
                    "run": run + ["--wait-lock", str(rng.choice([0, 0, 3]))],
                }[what]
                others.append(
                    (
                        what,
                        subprocess.Popen(
                            pagesync_cmd(work, *args),
                            env=ENV,
                            cwd=work,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE,
                            text=True,
                        ),
                    )
                )
        time.sleep(0.01)
    main.wait()
    deadline = time.monotonic() + 120
    while group_alive(main.pid) and time.monotonic() < deadline:  # an orphaned child of a killed shell
        time.sleep(0.05)
    codes = []
    for what, p in others:
        out, err = p.communicate(timeout=120)
        codes.append(f"{what}={p.returncode}")
    log(
        f"[{it}] run {'via sh ' if via_shell else ''}kill={kill_how}@{kill_at:.2f}s rc={main.returncode}; "
        f"concurrent: {' '.join(codes)}"
    )
    if rng.random() < 0.2:
        log(f"[{it}] reopened with other search pool: {open_with_threads(work, rng.choice([None, 2, 1]))}")
    for p in site.pages():
        site.slow(p, 0.0)
    rec = subprocess.run(
        pagesync_cmd(work, *run, "--full", "--allow-mass-delete"),
        env=ENV,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if rec.returncode != 0:
        return f"recovery run exit {rec.returncode}: {rec.stderr.strip()[-500:]}"
    fresh_dir = work.parent / "fresh"
    shutil.rmtree(fresh_dir, ignore_errors=True)
    fresh_dir.mkdir()
    fr = subprocess.run(
        pagesync_cmd(fresh_dir, *run), env=ENV, cwd=fresh_dir, capture_output=True, text=True, timeout=300
    )
    if fr.returncode != 0:
        return f"fresh run exit {fr.returncode}: {fr.stderr.strip()[-500:]}"
    diff = difference(exported(work), exported(fresh_dir))
    if diff:
        return diff
    return None


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pages", type=int, default=12)
    ap.add_argument("--reset-every", type=int, default=5, help="start from an empty store every N iterations")
    ap.add_argument("--keep", type=Path, default=None, help="where to keep the work directory of a failure")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="kill-stress-"))
    log_lines: list[str] = []

    def log(msg: str) -> None:
        log_lines.append(msg)
        print(msg, flush=True)

    site = Site()
    with SiteServer(site) as server:
        site.server = server  # type: ignore[attr-defined]
        work = base / "work"
        try:
            for it in range(args.iterations):
                if it % args.reset_every == 0:
                    shutil.rmtree(work, ignore_errors=True)
                    work.mkdir(parents=True)
                    site.resources.clear()
                    build_site(site, args.pages, rng)
                    r = subprocess.run(
                        pagesync_cmd(work, "run", "--sitemap", server.url("/sitemap.xml"), "--embedder", "fake", "-q"),
                        env=ENV,
                        cwd=work,
                        capture_output=True,
                        text=True,
                    )
                    assert r.returncode == 0, r.stderr
                diff = iteration(it, site, work, rng, log)
                if diff:
                    log(f"[{it}] LOSS/DIFFERENCE: {diff}")
                    keep = args.keep or Path(f"/tmp/kill-stress-failure-{args.seed}-{it}")
                    shutil.rmtree(keep, ignore_errors=True)
                    shutil.copytree(base, keep, symlinks=True)
                    log(f"work directory kept at {keep}")
                    return 1
                log(f"[{it}] same as a fresh index")
        finally:
            shutil.rmtree(base, ignore_errors=True)
    log(f"{args.iterations} iterations, no difference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
