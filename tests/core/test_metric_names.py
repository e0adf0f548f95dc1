"""Metric names: every report and status key becomes a gauge name Prometheus' naming rules
accept, and the pure checker agrees with `promtool check metrics` on a table of names."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.freshness import freshness
from sync.core.metric_names import PREFIX, metric_name, name_problems
from sync.core.report import Report

# (name, whether the naming rules accept it)
NAMES = [
    ("pagesync_pages_fetched", True),
    ("pagesync_seconds", True),
    ("pagesync_finished_at_timestamp_seconds", True),
    ("pagesync_status_oldest_visit_age_seconds", True),
    ("pagesync_bytes_downloaded", True),
    ("pagesync_status_oldest_visit_age_s", False),
    ("pagesync_revisit_interval_s", False),
    ("pagesync_fetch_ms", False),
    ("pagesync_wait_sec", False),
    ("pagesync_size_kb", False),
    ("pagesync_interval_hours", False),
    ("pagesync_fetch_milliseconds", False),
    ("pagesync_body_kilobytes", False),
    ("pagesync_pagesFetched", False),
    ("pagesync_pages_total", False),
    ("pagesync_pages_count", False),
    ("pagesync_latency_bucket", False),
    ("pagesync_pages_gauge", False),
    ("pagesync:pages", False),
    ("9pagesync", False),
]


@pytest.mark.parametrize("name, ok", NAMES)
def test_the_checker_table(name, ok):
    assert (name_problems(name) == []) is ok, name_problems(name)


def _numeric_keys() -> list[str]:
    keys = [f.name for f in dataclasses.fields(Report)]
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    keys += [f"status_{k}" for k in freshness([], 0, now)]
    return keys


@pytest.mark.parametrize("key", _numeric_keys())
def test_every_report_and_status_key_names_a_good_gauge(key):
    assert name_problems(metric_name(key)) == [], (key, metric_name(key))


def test_abbreviated_seconds_are_spelled_out():
    assert metric_name("status_oldest_visit_age_s") == "pagesync_status_oldest_visit_age_seconds"
    assert metric_name("revisit_interval_s") == "pagesync_revisit_interval_seconds"
    assert metric_name("pages_fetched") == "pagesync_pages_fetched"


@given(st.from_regex(r"[a-z]+(_[a-z]+){0,4}", fullmatch=True))
def test_a_name_is_the_prefix_and_the_key_but_for_its_unit(key):
    name = metric_name(key)
    assert name.startswith(PREFIX)
    spelled_out = name.endswith(("_seconds", "_bytes")) and not key.endswith("_seconds")
    assert name == PREFIX + key or spelled_out


NO_PROMTOOL = "promtool is not installed (Debian: apt install prometheus)"


@pytest.mark.skipif(shutil.which("promtool") is None, reason=NO_PROMTOOL)
def test_promtool_agrees_with_the_checker():
    names = [name for name, _ok in NAMES[:-2]]  # promtool cannot parse the last two at all
    text = "".join(f"# HELP {n} a test gauge\n# TYPE {n} gauge\n{n} 1\n" for n in names)
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    flagged = {line.split()[0] for line in (r.stdout + r.stderr).splitlines() if line.strip()}
    assert flagged == {name for name, ok in NAMES[:-2] if not ok}, r.stdout + r.stderr
