"""Edges of the command line: Ctrl-C, the pass clock, switching revisit policies, what status
and the run's log lines say about sitemaps and skips, and one-line refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.test_cli import ROOT, build, cli, one_error_line, run, sitemap, stored, work  # noqa: F401

COMMON = ("--qdrant-path", "q", "--state", "s.db")


def _env() -> dict[str, str]:
    """The environment `tests.test_cli.cli` gives the command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


# -- Ctrl-C ----------------------------------------------------------------------------------------
def test_ctrl_c_during_a_run_is_exit_130_one_line_and_the_next_pass_resumes(site, work):
    urls = build(site, n=4)
    site.slow("/p3.html", 30)  # fetched last (one worker, sorted): the pass is still running then
    p = subprocess.Popen([sys.executable, "-m", "sync", "run", "--sitemap", sitemap(site), *COMMON,
                          "--embedder", "fake", "--workers", "1", "--embed-batch", "1", "--report", "R.json"],
                         cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while site.count(path="/p2.html") == 0:  # answered when p3's request starts
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.05)
        time.sleep(1.0)  # p0-p2 on their way to the store, p3 waiting for its answer
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("pagesync: the pass was interrupted") and "consistent" in last, err
    assert "next `pagesync run` resumes" in last
    assert "fetched" not in err  # no summary line: the pass did not finish
    assert not (work / "R.json").exists()
    written = {pl["url"] for pl in stored(work).values()}
    assert urls[3] not in written

    site.slow("/p3.html", 0)
    r = run(site, work)  # the state lock was released; the pass picks up the rest
    assert r.returncode == 0, r.stderr
    assert {pl["url"] for pl in stored(work).values()} == set(urls)
    a = cli(work, "audit", *COMMON)
    assert a.returncode == 0, a.stdout + a.stderr
