"""`--metrics PATH`: a pass's numbers in the Prometheus text format.

For node_exporter's textfile collector (point `--collector.textfile.directory` at the
file's directory) or a Pushgateway (`curl --data-binary @PATH URL/metrics/job/pagesync`).
Every numeric key of the run report is a gauge `pagesync_<key>` (booleans as 0 or 1), and
the freshness figures `status` reports after the pass are `pagesync_status_<key>`; a key's
abbreviated unit is spelled out in its name (`oldest_visit_age_s` -> `..._age_seconds`,
`sync.core.metric_names`), as Prometheus' naming rules want. Each
gauge has a `collection` label. The file is written whole to a temporary name and renamed
(prometheus_client's `write_to_textfile`), so a scrape never reads half of it.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

from ..core.metric_names import PREFIX, metric_name

__all__ = ["registry_for", "write_metrics", "PREFIX"]


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _timestamp(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def registry_for(
    report: Mapping[str, Any],
    status: Mapping[str, Any],
    collection: str,
    extra: Mapping[str, tuple[str, float]] | None = None,
):
    """A registry holding one gauge per numeric figure of `report` and `status`, and the
    `extra` figures (name -> (help, value); a name ending in `_total` is a counter)."""
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry()

    def gauge(key: str, doc: str, value: float) -> None:
        Gauge(metric_name(key), doc, ["collection"], registry=registry).labels(collection=collection).set(value)

    for key, value in report.items():
        if (number := _numeric(value)) is not None:
            gauge(key, f"run report: {key}", number)
    finished = _timestamp(report.get("finished_at"))
    if finished is not None:
        gauge("finished_at_timestamp_seconds", "when the pass finished (Unix time)", finished)
    for key, value in status.items():
        if (number := _numeric(value)) is not None:
            gauge(f"status_{key}", f"after the pass, as `pagesync status` reports it: {key}", number)
    for name, (doc, value) in (extra or {}).items():
        if name.endswith("_total"):
            registry.register(_Counter(PREFIX + name, doc, collection, value))
        else:
            gauge(name, doc, value)
    return registry


class _Counter:
    """One counter sample, as a custom collector: prometheus_client's own `Counter` would add a
    `_created` gauge the file's readers do not need (and cannot rely on: the process restarts)."""

    def __init__(self, name: str, doc: str, collection: str, value: float):
        self.name, self.doc, self.collection, self.value = name, doc, collection, value

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.doc, labels=["collection"])
        family.add_metric([self.collection], self.value)
        yield family


def write_metrics(
    path: Path,
    report: Mapping[str, Any],
    status: Mapping[str, Any],
    collection: str,
    extra: Mapping[str, tuple[str, float]] | None = None,
) -> None:
    """Write the figures to `path` atomically (a temporary file beside it, then a rename).
    ConfigError when `path` is anything but a regular file or absent (checked before the
    pass too): the rename would replace a symlink, a FIFO or a device node itself."""
    from prometheus_client import write_to_textfile

    from ..errors import ConfigError
    from .output_paths import output_problem

    if problem := output_problem(path, replaced=True):
        raise ConfigError(f"--metrics {path}: {problem}")

    path.parent.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(path), registry_for(report, status, collection, extra))
