"""`--metrics`: the run's numbers as Prometheus gauges, read back with prometheus_client's parser."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client", reason="prometheus-client is a dependency: pip install -e .")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from sync.core.report import Report  # noqa: E402
from sync.edges.metrics import write_metrics  # noqa: E402


def samples(text: str) -> dict[str, tuple[dict, float]]:
    return {s.name: (s.labels, s.value) for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_every_numeric_report_key_is_a_gauge(tmp_path):
    rep = Report(
        finished_at="2026-01-01T00:00:00+00:00",
        pages_fetched=7,
        pages_failed=1,
        pages_visited=8,
        chunks_written=40,
        dry_run=False,
        collection_lost=True,
        collection="docs",
    )
    data = rep.to_dict()
    status = {
        "pages_tracked": 9,
        "pages_due": 2,
        "oldest_visit_at": "2025-12-31T00:00:00+00:00",
        "oldest_visit_age_s": 86400.0,
    }
    path = tmp_path / "textfile" / "pagesync.prom"
    write_metrics(path, data, status, "docs")
    got = samples(path.read_text())
    numeric = {k for k, v in data.items() if isinstance(v, (int, float)) and v is not None}
    assert {f"pagesync_{k}" for k in numeric} <= set(got)
    assert got["pagesync_pages_fetched"] == ({"collection": "docs"}, 7.0)
    assert got["pagesync_pages_failed_share"][1] == pytest.approx(1 / 8)
    assert got["pagesync_collection_lost"][1] == 1.0 and got["pagesync_dry_run"][1] == 0.0
    assert got["pagesync_finished_at_timestamp_seconds"][1] == 1767225600.0
    assert got["pagesync_status_pages_due"][1] == 2.0
    assert got["pagesync_status_oldest_visit_age_seconds"][1] == 86400.0
    assert not any(name.startswith("pagesync_errors") or name == "pagesync_collection" for name in got)
    assert [p.name for p in path.parent.iterdir()] == ["pagesync.prom"]  # no temporary file left


def test_the_file_is_replaced_whole(tmp_path, monkeypatch):
    """The new file is written beside the old one and renamed over it: a reader sees the
    old figures or the new ones, never a mix (a rename is the only write to the path)."""
    import os

    path = tmp_path / "m.prom"
    path.write_text("old\n")
    renames = []
    real = os.rename
    monkeypatch.setattr(os, "rename", lambda a, b: (renames.append((str(a), str(b))), real(a, b)))
    write_metrics(path, Report(pages_fetched=1).to_dict(), {}, "pages")
    assert len(renames) == 1 and renames[0][1] == str(path) and renames[0][0] != str(path)
    assert not renames[0][0].endswith(".prom")  # the textfile collector skips the temporary file
    assert samples(path.read_text())["pagesync_pages_fetched"][1] == 1.0
