"""What a command prints besides its own result: a pass's progress and its dry-run and
error lines, the log levels `-v` sets, and the `--metrics` file of a pass."""

from __future__ import annotations

import logging
import sys
import warnings
from datetime import datetime
from pathlib import Path

__all__ = [
    "DRY_VERBS",
    "SKIPS",
    "DRY_FAILED",
    "action_text",
    "error_line",
    "Progress",
    "EXTRACTION_LOGGERS",
    "configure_logging",
    "set_verbose",
    "write_pass_metrics",
]

log = logging.getLogger("pagesync")

# A dry run's lines say what a pass would do: "would add URL", never "added URL". Not for
# "failed": a dry run fails a page only on what it met itself (the fetch answered 500, timed
# out, the page could not be extracted), never on a write, so that failure happened: "failed".
DRY_VERBS = {
    "added": "add",
    "changed": "change",
    "removed": "remove",
    "skipped": "skip",
    "unchanged": "keep",
    "not_modified": "keep",
}
SKIPS = ("not_modified", "unchanged")
DRY_FAILED = "a pass would keep its points and retry later"  # what a real pass does with it (decision.py)


def action_text(action: str, dry_run: bool) -> str:
    return f"would {DRY_VERBS[action]}" if dry_run and action in DRY_VERBS else action


def error_line(e: dict[str, str], failed_in_dry_run: set[str]) -> str:
    """One run error for stderr. Errors that already name their URL (a sitemap's "sitemap:
    URL: HTTP 500") say it once. A failed page's error in a dry run is a failure the dry run
    met, with nothing written: it reads as such, not as an error of the pass."""
    if e["url"] == "(pass)":  # the pass's own (the mass-deletion guard): its message says it all
        return e["error"]
    text = e["error"] if e["url"] in e["error"] else f"{e['url']}: {e['error']}"
    if e["url"] in failed_in_dry_run:
        return f"failed {text} (dry run: nothing written)"
    return f"error {text}"


class Progress:
    """A rich progress bar on a terminal; plain log lines elsewhere: changes at INFO, skips at
    DEBUG (shown with -v)."""

    def __init__(self, quiet: bool, dry_run: bool = False):
        self.quiet = quiet
        self.dry_run = dry_run
        self.tty = sys.stderr.isatty() and not quiet
        self._bar = None

    def __enter__(self):
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("syncing"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[last]}"),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("pages", total=None, last="")
        return self

    def __call__(self, url: str, action: str) -> None:
        text = action_text(action, self.dry_run)
        if self._bar is not None:
            self._bar.update(self._task, advance=1, last=f"{text}: {url}"[-80:])
        elif not self.quiet:
            # A failure's line comes at the end with its error ("error URL: HTTP 500"): here
            # only with -v, so a failed page is one line, not two.
            quiet_here = action in SKIPS or action == "failed"
            log.log(logging.DEBUG if quiet_here else logging.INFO, "%s %s", text, url)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.stop()


# The extraction libraries log what they make of odd pages ("discarding data", "empty HTML
# tree") at WARNING and ERROR: pagesync reports the page itself, so their lines show with -v only.
EXTRACTION_LOGGERS = ("trafilatura", "htmldate", "courlan", "justext")


def set_verbose(verbose: bool) -> None:
    """`run -v` (as the global -v): pagesync's own loggers log every page, skips included,
    and the extraction libraries' warnings show. Only pagesync's at DEBUG: the root logger
    stays at INFO, so third-party debug lines stay out."""
    if verbose:
        log.setLevel(logging.DEBUG)
        for name in EXTRACTION_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def configure_logging(verbose: bool) -> None:
    """Every command's logging: pagesync's lines on stderr, at DEBUG with -v; other libraries'
    warnings and chatter kept out (errors reach the user as one line of ours)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    # qdrant-client warns through `warnings` (e.g. an API key over plain http); errors reach
    # the user as one line of ours instead.
    warnings.filterwarnings("ignore", module=r"qdrant_client\..*")
    warnings.filterwarnings("ignore", category=UserWarning, module=r"sync\.edges\.(client_|edge_)?store")
    for noisy in ("httpx", "httpcore", "asyncio", "sentence_transformers", "urllib3", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Set either way: the root logger's level is not ours to rely on (an embedding
    # application, or pytest's caplog, may hold it above INFO).
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    for name in EXTRACTION_LOGGERS:  # silent unless -v (`set_verbose`)
        logging.getLogger(name).setLevel(logging.WARNING if verbose else logging.CRITICAL + 1)


def write_pass_metrics(path: Path, data: dict, st, now: datetime, collection: str) -> None:
    """--metrics: the report's numbers and the state's freshness figures, as status has them."""
    from ..core.freshness import freshness
    from ..edges.metrics import write_metrics

    write_metrics(path, data, freshness(st.all_pages(), len(st.due_urls(now)), now), collection)
