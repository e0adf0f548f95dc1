"""`pagesync` command line: thin. It builds objects, calls one library function, and turns
errors into one clear line and an exit code (0 done; 1 finished with failures; 2 bad usage
or configuration, nothing written)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import signal
import sys
import warnings
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Optional

import typer

from ..errors import ConfigError, PagesyncError, StateUnusableError
from ..core.plural import plural

if TYPE_CHECKING:
    from ..engine import PassConfig

# httpx, when first imported, imports its own command line (httpx._main: rich, click and
# pygments, ~0.1 s) only to offer `httpx.main`, which pagesync never runs. In the pagesync
# command's process it gets the stand-in httpx itself uses when those extras are missing.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: that import fails, as httpx expects

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Keep a Qdrant collection in sync with a website: re-embed only what changed, purge what died.",
)
log = logging.getLogger("pagesync")

# -- shared options ------------------------------------------------------------------------
CollectionOpt = typer.Option("pages", "--collection", help="Qdrant collection.")
# QDRANT_URL and QDRANT_API_KEY are read with the PAGESYNC_* variables (sync.core.config), below
# the configuration file: click's own envvar would rank them above it.
QdrantUrlOpt = typer.Option(None, "--qdrant-url", help="A Qdrant server URL (env QDRANT_URL).")
ApiKeyOpt = typer.Option(None, "--api-key", help="Qdrant API key (env QDRANT_API_KEY).")
QdrantPathOpt = typer.Option(Path(".pagesync/qdrant"), "--qdrant-path", help="Embedded Qdrant directory, used when no server is named.")
StateOpt = typer.Option(
    ".pagesync/state.db", "--state",
    help="The page state: a SQLite file, or the literal 'qdrant' to keep it in Qdrant beside the collection "
         "(<collection>__pagesync_state; needs --qdrant-url). A file named 'qdrant' is ./qdrant.")
WaitLockOpt = typer.Option(0.0, "--wait-lock", min=0.0,
                           help="Seconds to wait for another pass holding the state lock (default 0: exit 2 at once).")
EMBEDDER_HELP = ("Embedder (default: the collection's own model, as the last pass into it or its points name it; "
                 "for a new collection the bundled all-MiniLM-L6-v2): the bundled all-MiniLM-L6-v2 (offline; ONNX "
                 "Runtime when installed, else torch; "
                 "force one with 'minilm-onnx' or 'minilm-torch'), 'st:NAME_OR_PATH' (a sentence-transformers model "
                 "in a folder or the local cache; never downloaded), 'openai:MODEL' (OpenAI's embeddings API or any "
                 "server speaking it, at env OPENAI_BASE_URL, key from env OPENAI_API_KEY) or 'fake' (tests). Another "
                 "model than the collection's is exit 2, --full or not: change models with 'pagesync reindex'.")
def _query_embedder(name: str | None, dimensions: int | None, concurrency: int | None):
    """The embedder `search` was given: its name (the read API picks and checks it), or, with a
    remote embedder's options, the embedder itself, checked to run."""
    if dimensions is None and concurrency is None:
        return name
    from embedders import make_embedder

    from .checks import check_runs

    emb = make_embedder(name, dimensions=dimensions, concurrency=concurrency)
    check_runs(emb)
    return emb


EmbedDimensionsOpt = typer.Option(None, "--embed-dimensions", min=1,
                                  help="Remote embedders: the vector size to ask for (sent as `dimensions`; "
                                       "text-embedding-3 models take it). Part of the model id.")
EmbedConcurrencyOpt = typer.Option(None, "--embed-concurrency", min=1,
                                   help="Remote embedders: embedding requests in flight at once (default 4).")
MaxEmbedTokensOpt = typer.Option(None, "--max-embed-tokens", min=0,
                                 help="Spending guard: send no batch that could take this pass past N tokens "
                                      "(counted offline as an upper bound before sending); the pages not embedded "
                                      "keep their points and are embedded by the next pass (exit 1).")

ChunkTokensOpt = typer.Option(None, "--chunk-tokens", min=8,
                              help="Chunk size in the embedder's own tokens (default: what the model reads, at "
                                   "most 1024; the bundled model 256). Characters for an embedder without a "
                                   "tokenizer. A new size re-chunks every page once.")
ChunkOverlapOpt = typer.Option(None, "--chunk-overlap", min=0,
                               help="Tokens a chunk shares with the one before it when a section is cut by size "
                                    "(default: a tenth of --chunk-tokens).")
MaxChunkTokensOpt = typer.Option(None, "--max-chunk-tokens", min=16,
                                 help="The most tokens one embedded text (heading path and chunk) may take "
                                      "(default: the model's input; needed for an openai: model pagesync does not "
                                      "know; cannot exceed a known model's input).")


def _config_callback(ctx: typer.Context, value: Optional[Path]) -> Optional[Path]:
    """Eager: the configuration file and PAGESYNC_* variables become the command's
    defaults before any other option is read (a bad one: one line, exit 2)."""
    from .config_file import load_config

    try:
        load_config(ctx, value)
    except ConfigError as exc:
        _fail(exc, exc.exit_code)
    return value


ConfigOpt = typer.Option(
    None, "--config", envvar="PAGESYNC_CONFIG", is_eager=True, callback=_config_callback, dir_okay=False,
    # No square brackets in the text: rich reads them as markup.
    help="A TOML file of options (keys: long options, dashes as underscores; per-site ones in 'site' tables). "
         "Default: ./pagesync.toml when it exists. Flags override it; it overrides PAGESYNC_* variables.")
QDRANT_STATE = "qdrant"  # the --state value that selects the Qdrant state
NO_STATE = "no page state {where}: run 'pagesync run' first"


STORE_WAIT_ENV = "PAGESYNC_STORE_WAIT"
STORE_WAIT_S = 10.0


def _store_wait() -> float:
    """Seconds a command waits for an embedded store another process has open (one opener
    at a time): `PAGESYNC_STORE_WAIT`, else 10."""
    raw = os.environ.get(STORE_WAIT_ENV, "").strip()
    if not raw:
        return STORE_WAIT_S
    try:
        wait = float(raw)
    except ValueError:
        wait = math.nan
    if not (math.isfinite(wait) and wait >= 0):
        raise ConfigError(f"{STORE_WAIT_ENV}={raw!r}: expected seconds, a number >= 0")
    return wait


def _open_store(collection: str, qdrant_url: Optional[str], api_key: Optional[str], qdrant_path: Path,
                lock_wait: float | None = None, reading: bool = False):
    """The store the options name. `reading`: the command only reads it, so an embedded
    shard a pass is writing is refused at once (`EdgeStore`), not waited for."""
    from ..edges.store import ClientStore, EdgeStore

    if qdrant_url:
        return ClientStore.connect(qdrant_url, collection, api_key=api_key)
    return EdgeStore(qdrant_path, collection, lock_wait=_store_wait() if lock_wait is None else lock_wait,
                     reading=reading)


def _open_state(spec: str, store, *, missing: str | None = None, dry_run: bool = False, optional: bool = False,
                reading: bool = False):
    """The page state --state names: a SQLite file, or (the literal `qdrant`) the Qdrant state
    beside the store's collection, which needs a qdrant-client store (--qdrant-url).

    When none exists yet: `missing` (with `{where}`) is raised as a ConfigError if given; a
    dry run gets a throw-away in-memory state (it writes nothing, not even a state); with
    `optional`, None (a nullcontext, for `with`). `reading` (a command that only reads it):
    a SQLite state this user may read but not write is opened read-only, with a warning."""
    from ..edges.state import StateDB

    if spec == QDRANT_STATE:
        from ..edges.qdrant_state import QdrantState

        qs = QdrantState.for_store(store, create=False)  # ConfigError with the embedded store
        exists, where = qs.exists(), f"in Qdrant (collection {qs.collection!r})"
    else:
        try:
            exists, where = Path(spec).exists(), f"at {spec}"
        except OSError as exc:  # a directory this user may not enter
            from ..edges.state import unusable

            raise unusable(Path(spec), exc) from None
    if not exists:
        if missing:
            raise ConfigError(missing.format(where=where))
        if dry_run:
            return StateDB(":memory:")
        if optional:
            return nullcontext()
    if spec == QDRANT_STATE:
        qs.ensure()
        return qs
    try:
        return StateDB(spec)
    except StateUnusableError:
        from ..edges.state import access_problem

        problem = access_problem(Path(spec)) if reading else None
        if problem is None:
            raise
        st = StateDB(spec, read_only=True)  # raises the same line when it cannot be read either
        log.warning("warning: page state %s opened read-only: %s", spec, problem)
        return st


def _fail(exc: BaseException, code: int) -> None:
    typer.echo(f"pagesync: error: {exc}", err=True)
    raise typer.Exit(code)


EXIT_INTERRUPTED = 130  # 128 + SIGINT: the shell's code for a command stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the shell's code for a writer whose reader left (`export | head`)
RUN_INTERRUPTED = ("the pass was interrupted (no report written); what it wrote is consistent "
                   "and the next `pagesync run` resumes: pages whose write was under way are redone")


# Set by `main`: this process is the command itself, so it may end with `os._exit` (below).
_PROCESS = {"hard_exit": False}


def _exit_now(code: int) -> NoReturn:
    """End the process with `code` at once, after flushing what it printed, without the
    interpreter's finalisation: a model call abandoned in a daemon thread (ONNX Runtime's,
    mid-batch) would otherwise be torn down by it and abort the process (SIGABRT). Only
    ever called with the state and the store closed, or never opened: nothing is lost."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone, a stream closed: nothing more to say
            pass
    os._exit(code)


def _interrupted_outside_a_body(signum: int, frame: Any) -> None:
    """SIGINT while options are read or after a command's body: nothing is open, so exit
    130 at once (click would print "Aborted!" and exit 1)."""
    typer.echo("pagesync: interrupted", err=True)
    _exit_now(EXIT_INTERRUPTED)


def _guarded(fn: Callable[[], int], interrupted: str = "interrupted") -> None:
    """Run a command body: PagesyncError -> one line and its exit code (the error class
    decides: configuration and environment errors, sync.errors.ConfigError and its kin, are
    2); an OSError that reached this far (a path pagesync cannot use) is 2 as well. Ctrl-C
    (SIGINT) is one line, `interrupted`, and exit 130 (the shell's convention), never 1,
    which means "finished, but pages failed". A reader of stdout that went away (`export |
    head`) ends the command quietly with 141, as SIGPIPE would, not as a usage error."""
    # Within the body Ctrl-C is a KeyboardInterrupt (asyncio.run turns it into a cancelled
    # pass), so that the state and the store are closed on the way out before the exit.
    outside = signal.getsignal(signal.SIGINT) is _interrupted_outside_a_body
    if outside:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = fn()
    except PagesyncError as exc:
        _fail(exc, exc.exit_code)
    except BrokenPipeError:
        # Before OSError, its base. stdout goes to /dev/null so that the interpreter's last
        # flush at exit does not raise (and print) the same error again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except OSError as exc:
        _fail(exc, 2)
    except KeyboardInterrupt:
        typer.echo(f"pagesync: {interrupted}", err=True)
        if _PROCESS["hard_exit"]:  # a model call may still run in a thread of its own
            _exit_now(EXIT_INTERRUPTED)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        if outside:
            signal.signal(signal.SIGINT, _interrupted_outside_a_body)
    raise typer.Exit(code)


# The clocks a --now may give: replays and backfills reach back to the web's early years;
# forward, far enough for any test, and far from datetime's year 9999, where due times
# (a pass's clock plus intervals of up to 60 days and backoffs) would overflow.
NOW_MIN = datetime(1990, 1, 1, tzinfo=timezone.utc)
NOW_MAX = datetime(3000, 1, 1, tzinfo=timezone.utc)


def _parse_now(value: Optional[str]) -> datetime:
    if not value:
        return datetime.now(timezone.utc)
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--now {value!r} is not ISO 8601 (e.g. 2026-11-30T06:00:00Z)") from None
    dt = dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    if not NOW_MIN <= dt < NOW_MAX:
        raise ConfigError(f"--now {value!r} is out of range: a pass's clock is from {NOW_MIN:%Y-%m-%d} "
                          f"to before {NOW_MAX:%Y-%m-%d}")
    return dt


def _check_clock(st, clock: datetime, given: str) -> None:
    """A --now before the last pass's clock: a warning, not a refusal (CONTRACT.md names
    backfills among --now's uses). The engine records such a visit as no time elapsed, so
    no history goes negative, but due times and intervals are computed from that clock."""
    last = st.last_run()
    stamp = last.get("now") if isinstance(last, dict) else None
    if not stamp:
        return
    try:
        before = _parse_now(str(stamp))
    except ConfigError:
        return
    if clock < before:
        log.warning("warning: --now %s is before the last pass's clock %s: visits count as no time elapsed "
                    "since the last one, and due times start from this earlier clock", given, before.isoformat())


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([wdhm])")
_DURATION_UNIT_S = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60}


def _parse_duration(value: str, flag: str) -> timedelta:
    """`12h`, `3d`, `1w`, `90m`, `1d12h` (weeks, days, hours, minutes) as a timedelta;
    `ConfigError` naming `flag` for anything else."""
    text = value.strip().lower()
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ConfigError(f"{flag} {value!r} is not a duration (e.g. 12h, 3d, 1w, 1d12h)")
    try:
        return timedelta(seconds=sum(float(n) * _DURATION_UNIT_S[u] for n, u in parts))
    except OverflowError:  # past timedelta's 999,999,999 days
        raise ConfigError(f"{flag} {value!r} is too long a duration") from None


def _check_output(path: Optional[Path], flag: str) -> None:
    """A --report or --metrics path that cannot become a file is exit 2 before the pass
    opens anything, not an error after it wrote the collection: a directory, under a
    file, in a directory this process may not write, or anything but a regular file
    (`sync.edges.output_paths`)."""
    if path is None:
        return
    try:
        if path.is_dir():
            raise ConfigError(f"{flag} {path}: is a directory")
        from ..edges.output_paths import output_problem

        if problem := output_problem(path, replaced=flag == "--metrics"):  # --metrics is renamed into place
            raise ConfigError(f"{flag} {path}: {problem}")
        existing = path.parent
        while not existing.exists():  # the nearest ancestor there is (the pass creates the rest)
            existing = existing.parent
        if not existing.is_dir():
            raise ConfigError(f"{flag} {path}: {existing} is not a directory")
        target = path if path.exists() else existing
        if not os.access(target, os.W_OK):
            raise ConfigError(f"{flag} {path}: {target} is not writable")
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: {exc.strerror or exc}") from None


def _check_url(u: str, flag: str) -> str:
    from ..core.ids import url_problem

    problem = url_problem(u)
    if problem:
        raise ConfigError(f"{flag} {u!r} {problem}")
    return u


# A dry run's lines say what a pass would do: "would add URL", never "added URL". Not for
# "failed": a dry run fails a page only on what it met itself (the fetch answered 500, timed
# out, the page could not be extracted), never on a write, so that failure happened: "failed".
_DRY_VERBS = {"added": "add", "changed": "change", "removed": "remove", "skipped": "skip",
              "unchanged": "keep", "not_modified": "keep"}
_SKIPS = ("not_modified", "unchanged")
_DRY_FAILED = "a pass would keep its points and retry later"  # what a real pass does with it (decision.py)


def _action_text(action: str, dry_run: bool) -> str:
    return f"would {_DRY_VERBS[action]}" if dry_run and action in _DRY_VERBS else action


def _error_line(e: dict[str, str], failed_in_dry_run: set[str]) -> str:
    """One run error for stderr. Errors that already name their URL (a sitemap's "sitemap:
    URL: HTTP 500") say it once. A failed page's error in a dry run is a failure the dry run
    met, with nothing written: it reads as such, not as an error of the pass."""
    if e["url"] == "(pass)":  # the pass's own (the mass-deletion guard): its message says it all
        return e["error"]
    text = e["error"] if e["url"] in e["error"] else f"{e['url']}: {e['error']}"
    if e["url"] in failed_in_dry_run:
        return f"failed {text} (dry run: nothing written)"
    return f"error {text}"


class _Progress:
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

            self._bar = Progress(TextColumn("syncing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.fields[last]}"), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("pages", total=None, last="")
        return self

    def __call__(self, url: str, action: str) -> None:
        text = _action_text(action, self.dry_run)
        if self._bar is not None:
            self._bar.update(self._task, advance=1, last=f"{text}: {url}"[-80:])
        elif not self.quiet:
            # A failure's line comes at the end with its error ("error URL: HTTP 500"): here
            # only with -v, so a failed page is one line, not two.
            quiet_here = action in _SKIPS or action == "failed"
            log.log(logging.DEBUG if quiet_here else logging.INFO, "%s %s", text, url)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.stop()


# The extraction libraries log what they make of odd pages ("discarding data", "empty HTML
# tree") at WARNING and ERROR: pagesync reports the page itself, so their lines show with -v only.
_EXTRACTION_LOGGERS = ("trafilatura", "htmldate", "courlan", "justext")


def _set_verbose(verbose: bool) -> None:
    """`run -v` (as the global -v): pagesync's own loggers log every page, skips included,
    and the extraction libraries' warnings show. Only pagesync's at DEBUG: the root logger
    stays at INFO, so third-party debug lines stay out."""
    if verbose:
        log.setLevel(logging.DEBUG)
        for name in _EXTRACTION_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def version() -> str:
    """The installed distribution's version (the wheel's metadata), else "unknown"."""
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version("pagesync")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"pagesync {version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every page, skips included (also accepted after the command, e.g. run -v)."),
    show_version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version, help="Print pagesync's version and exit."),
) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    # qdrant-client warns through `warnings` (e.g. an API key over plain http); errors reach
    # the user as one line of ours instead.
    warnings.filterwarnings("ignore", module=r"qdrant_client\..*")
    warnings.filterwarnings("ignore", category=UserWarning, module=r"sync\.edges\.store")
    for noisy in ("httpx", "httpcore", "asyncio", "sentence_transformers", "urllib3", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Set either way: the root logger's level is not ours to rely on (an embedding
    # application, or pytest's caplog, may hold it above INFO).
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    for name in _EXTRACTION_LOGGERS:  # silent unless -v (`_set_verbose`)
        logging.getLogger(name).setLevel(logging.WARNING if verbose else logging.CRITICAL + 1)


@app.command()
def run(
    ctx: typer.Context,
    sitemap: list[str] = typer.Option([], "--sitemap", help="A sitemap or sitemap index (.xml or .xml.gz); repeatable."),
    url: list[str] = typer.Option([], "--url", help="An extra page to track that no sitemap lists; repeatable."),
    crawl: list[str] = typer.Option([], "--crawl", help="A start page of a link crawl within scope (its directory, robots.txt, nofollow, noindex and rel=canonical honoured; no sitemap needed); repeatable."),
    max_pages: int = typer.Option(10000, "--max-pages", min=1, help="Bound of a crawl: the pages it reaches at most (past it the crawl is incomplete and purges nothing for not being linked)."),
    collection: str = CollectionOpt,
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    state: str = StateOpt,
    wait_lock: float = WaitLockOpt,
    embedder: Optional[str] = typer.Option(None, "--embedder", help=EMBEDDER_HELP),
    embed_dimensions: Optional[int] = EmbedDimensionsOpt,
    embed_concurrency: Optional[int] = EmbedConcurrencyOpt,
    max_embed_tokens: Optional[int] = MaxEmbedTokensOpt,
    chunk_tokens: Optional[int] = ChunkTokensOpt,
    chunk_overlap: Optional[int] = ChunkOverlapOpt,
    max_chunk_tokens: Optional[int] = MaxChunkTokensOpt,
    full: bool = typer.Option(False, "--full", help="Visit every known page this pass (conditional GET still applies)."),
    rebuild: bool = typer.Option(False, "--rebuild", help="The collection is missing or empty while the state records pages: rebuild it (without this flag such a run exits 2 and writes nothing)."),
    now: Optional[str] = typer.Option(None, "--now", help="The pass's clock, ISO 8601 (replays, backfills)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the run report as JSON to this path."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Fetch and diff, print what would change, write nothing."),
    workers: int = typer.Option(8, "--workers", min=1, help="Concurrent fetches in all (at most --per-host of them to one host)."),
    per_host: int = typer.Option(4, "--per-host", min=1, help="Concurrent fetches per host."),
    embed_batch: int = typer.Option(64, "--embed-batch", min=1, help="Texts per model call (batches span pages; reused chunks are not model inputs)."),
    no_reuse: bool = typer.Option(False, "--no-reuse", help="Embed every chunk of a changed page, even where a stored vector for the same text and embedder exists."),
    user_agent: Optional[str] = typer.Option(None, "--user-agent", help="User-Agent header for every request."),
    timeout: float = typer.Option(30.0, "--timeout", min=1.0, help="Seconds before a request is abandoned."),
    allow_host: list[str] = typer.Option([], "--allow-host", help="Another site pages may live on, HOST or HOST:PORT (repeatable); by default only the sites (host and port) of --sitemap/--url."),
    allow_mass_delete: bool = typer.Option(False, "--allow-mass-delete", help="Purge even when a pass would remove more than --max-delete-share of the tracked pages, or the sitemap came back empty."),
    max_delete_share: float = typer.Option(0.2, "--max-delete-share", min=0.0, max=1.0, help="The mass-deletion guard's threshold (share of tracked pages)."),
    ignore_robots: bool = typer.Option(False, "--ignore-robots", help="Do not read robots.txt (only for sites you run yourself)."),
    max_crawl_delay: float = typer.Option(10.0, "--max-crawl-delay", min=0.0, help="Cap on a robots.txt Crawl-delay, in seconds."),
    policy: str = typer.Option("deploys", "--policy", help="Revisit policy: deploys (the default: a static site's pages at its deploys, by their chance of a change per deploy and at least every second deploy, and what its MkDocs/Sphinx/Docusaurus search index says changed; a site that changes between deploys, and one before its first deploy is seen, is scheduled by change-rate), change-rate (learned per page), halve-double (halve a page's interval when it changed, double it when not) or uniform (one fixed interval, --revisit-interval; the better choice measured for a sitemap without a usable lastmod)."),
    revisit_interval: Optional[str] = typer.Option(None, "--revisit-interval", help="With --policy uniform: visit every page this often (12h, 3d, 1w; within [6h, 60d]; default 3d)."),
    max_fetches: Optional[int] = typer.Option(None, "--max-fetches", min=0, help="Visit at most this many pages this pass: repairs, then new pages, then the stalest (repairs, trusted lastmod advances and pages unvisited for 60 d may exceed it)."),
    max_chunks_per_page: int = typer.Option(2000, "--max-chunks-per-page", min=1, help="Skip a page cut into more chunks than this (its old points are kept; the report lists it under skipped)."),
    bulk_edits: bool = typer.Option(False, "--bulk-edits/--no-bulk-edits", help="Notice bulk edits (a pass finding far more pages changed than their rates predict) and look at the pages not visited since sooner, within --max-fetches."),
    include: list[str] = typer.Option([], "--include", help="Track only pages whose canonical URL matches this shell-style glob (repeatable; e.g. 'https://docs.example.com/guide/*')."),
    exclude: list[str] = typer.Option([], "--exclude", help="Never fetch pages whose canonical URL matches this shell-style glob (repeatable; e.g. '*/changelog/*'); a tracked page that becomes excluded is purged."),
    no_default_excludes: bool = typer.Option(False, "--no-default-excludes", help="Fetch the index, search and 404 pages of Sphinx, MkDocs and Docusaurus too (excluded by default)."),
    select: Optional[str] = typer.Option(None, "--select", help="A CSS selector: only the element(s) it matches are a page's content (e.g. 'div.document'); a page where it matches nothing fails."),
    header: list[str] = typer.Option([], "--header", help="'Name: value' sent with every request to this run's sites, never to other hosts (repeatable); a value 'env:VAR' is read from the environment variable VAR and never shown."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the summary line."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every page, skips included (as the global -v)."),
    max_failed_share: float = typer.Option(0.0, "--max-failed-share", min=0.0, max=1.0, help="Exit 1 only when more than this share of the visited pages failed (default 0: any failed page); the summary names them either way. A sitemap error, a purge held back by the guard or pages left by --max-embed-tokens are exit 1 regardless."),
    metrics: Optional[Path] = typer.Option(None, "--metrics", dir_okay=False, help="Write the run's numbers to this file in the Prometheus text format (pagesync_<report key> gauges and the status figures), atomically: for node_exporter's textfile collector or a Pushgateway."),
    changed: list[str] = typer.Option([], "--changed", help="A page a deploy changed: visited this pass, unconditionally (repeatable); nothing else is fetched unless due. A URL outside the run's scope is exit 2."),
    changed_from: Optional[str] = typer.Option(None, "--changed-from", help="A file of changed pages, one URL a line (- for stdin), as --changed."),
) -> None:
    """One sync pass: diff the sitemap(s), visit what is due, write changes, exit."""
    _set_verbose(verbose)

    def body() -> int:
        setup = _prepare_run(ctx, **ctx.params)
        return _execute_run(setup, setup.cfg.now).code

    _guarded(body, "dry run interrupted; nothing was written" if dry_run else RUN_INTERRUPTED)


@dataclass
class _RunSetup:
    """What `run`'s options build, checked, before anything is opened: `run` runs one pass
    with it and `watch` one per wake-up (each with its own clock)."""

    cfg: "PassConfig"
    embedder: object | None  # None: the collection's own model, resolved once the store is open
    embed_dimensions: Optional[int]
    embed_concurrency: Optional[int]
    chunking: dict[str, Optional[int]]  # --chunk-tokens, --chunk-overlap, --max-chunk-tokens
    collection: str
    qdrant_url: Optional[str]
    api_key: Optional[str]
    qdrant_path: Path
    state: str
    now_given: Optional[str]
    report: Optional[Path]
    metrics: Optional[Path]
    user_agent: Optional[str]
    timeout: float
    per_host: int
    ignore_robots: bool
    max_crawl_delay: float
    quiet: bool
    max_failed_share: float


@dataclass
class _RunOutcome:
    code: int
    report: dict
    summary: str
    next_due: Optional[datetime] = None
    still_due: int = 0
    status: dict = field(default_factory=dict)


def _prepare_run(ctx: typer.Context, *, sitemap: list[str], url: list[str], crawl: list[str], max_pages: int,
                 collection: str, qdrant_url: Optional[str], api_key: Optional[str], qdrant_path: Path, state: str,
                 wait_lock: float, embedder: Optional[str], embed_dimensions: Optional[int],
                 embed_concurrency: Optional[int], max_embed_tokens: Optional[int], chunk_tokens: Optional[int],
                 chunk_overlap: Optional[int], max_chunk_tokens: Optional[int], full: bool, rebuild: bool,
                 now: Optional[str], report: Optional[Path], dry_run: bool, workers: int, per_host: int,
                 embed_batch: int, no_reuse: bool, user_agent: Optional[str], timeout: float, allow_host: list[str],
                 allow_mass_delete: bool, max_delete_share: float, ignore_robots: bool, max_crawl_delay: float,
                 policy: str, revisit_interval: Optional[str], max_fetches: Optional[int],
                 max_chunks_per_page: int, bulk_edits: bool, include: list[str], exclude: list[str],
                 no_default_excludes: bool, select: Optional[str], header: list[str], quiet: bool,
                 max_failed_share: float, metrics: Optional[Path], changed: list[str], changed_from: Optional[str],
                 **_: object) -> _RunSetup:
    """`run`'s options (as `ctx.params` holds them; `watch` has the same and more) checked and
    built into a pass configuration and an embedder: a bad one is exit 2, nothing opened."""
    from embedders import make_embedder

    from ..engine import PassConfig

    from ..core.config import rule_set, sources

    sites = _file_sites(ctx)
    src = sources(sitemap=sitemap, url=url, crawl=crawl, allow_host=allow_host, sites=sites)
    for s in src.sitemaps:
        _check_url(s, "--sitemap")
    for u in src.urls:
        _check_url(u, "--url")
    for u in src.crawl:
        _check_url(u, "--crawl")
    # Flags over the file over the environment: click merged them (`load_config`).
    rules = rule_set({"include": include, "exclude": exclude, "select": select, "header": header,
                      "no_default_excludes": no_default_excludes}, sites, os.environ)
    cfg = PassConfig(sitemaps=src.sitemaps, urls=src.urls, crawl=src.crawl, max_pages=max_pages,
                     now=_parse_now(now), full=full, dry_run=dry_run, rebuild=rebuild,
                     embed_batch=embed_batch, workers=workers, allow_hosts=src.allow_hosts,
                     allow_mass_delete=allow_mass_delete, max_delete_share=max_delete_share,
                     policy=policy, max_fetches=max_fetches, bulk_edits=bulk_edits, wait_lock=wait_lock,
                     reuse_vectors=not no_reuse, max_chunks_per_page=max_chunks_per_page, site_rules=rules,
                     max_embed_tokens=max_embed_tokens, changed=[*changed, *_read_changed(changed_from)],
                     revisit_interval=_parse_duration(revisit_interval, "--revisit-interval") if revisit_interval else None)
    from ..core.policy import make_policy

    make_policy(policy, interval=cfg.revisit_interval)  # a bad policy or interval is exit 2 before anything opens
    cfg.check_rules()  # a --select that is no CSS selector: exit 2 too
    cfg.check_changed()  # a --changed URL outside the run's scope: exit 2, naming it
    _check_output(report, "--report")
    _check_output(metrics, "--metrics")
    # Without --embedder (nor the file's key) the collection's own model, once the store is open.
    emb = make_embedder(embedder, dimensions=embed_dimensions, concurrency=embed_concurrency) if embedder is not None else None
    if not (src.sitemaps or src.urls or src.crawl):
        # The state does not keep them, and the scope (which hosts may be fetched) is
        # theirs: without one, every due page would be skipped as out of scope.
        raise ConfigError("nothing to sync: give --sitemap or --url (or --crawl, or a [[site]] in "
                          "pagesync.toml; the page state does not keep them)")
    from .checks import check_runs

    chunking = {"chunk_tokens": chunk_tokens, "chunk_overlap": chunk_overlap, "max_chunk_tokens": max_chunk_tokens}
    if emb is not None:
        from ..stages.chunks import splitter_for

        check_runs(emb)  # a model not installed, a remote key refused: exit 2 before the state is created
        splitter_for(emb, **chunking)  # sizes that cannot hold: exit 2 before anything opens
    return _RunSetup(cfg=cfg, embedder=emb, embed_dimensions=embed_dimensions,
                     embed_concurrency=embed_concurrency, chunking=chunking, collection=collection, qdrant_url=qdrant_url, api_key=api_key,
                     qdrant_path=qdrant_path, state=state, now_given=now, report=report, metrics=metrics,
                     user_agent=user_agent, timeout=timeout, per_host=per_host, ignore_robots=ignore_robots,
                     max_crawl_delay=max_crawl_delay, quiet=quiet, max_failed_share=max_failed_share)


def _execute_run(setup: _RunSetup, now: datetime, *, watching: bool = False) -> _RunOutcome:
    """One pass of `setup` at `now`: the store and the state are opened for it and closed
    after it. `watching`: --metrics is left to the watcher (which adds its own figures), and
    the state's due times and freshness figures are read before it is closed."""
    from ..engine import arun_pass
    from ..stages.chunks import splitter_for
    from ..edges.fetcher import DEFAULT_USER_AGENT, Fetcher, make_client
    from .checks import collection_embedder

    cfg = replace(setup.cfg, now=now)
    dry_run, metrics, report = cfg.dry_run, setup.metrics, setup.report
    outcome = _RunOutcome(code=0, report={}, summary="")
    with ExitStack() as stack:
        store = _open_store(setup.collection, setup.qdrant_url, setup.api_key, setup.qdrant_path)
        stack.callback(store.close)
        emb = setup.embedder
        dims, conc = setup.embed_dimensions, setup.embed_concurrency
        if emb is None and _fresh(setup.state, store):  # the default, checked before the state is created
            emb = collection_embedder(store, None, dimensions=dims, concurrency=conc)
        # Chunk sizes the model cannot take: exit 2, before the state is created when it can be.
        splitter = splitter_for(emb, **setup.chunking) if emb is not None else None
        # A dry run on a fresh setup must not even create the state (file or collection).
        st = stack.enter_context(_open_state(setup.state, store, dry_run=dry_run))
        if emb is None:  # the last pass's model into this collection, else its points'
            emb = collection_embedder(store, st.last_run(), dimensions=dims, concurrency=conc)
        if splitter is None:
            splitter = splitter_for(emb, **setup.chunking)
        if watching:  # the watcher's next passes use the model this one resolved
            setup.embedder = emb
        if setup.now_given:
            _check_clock(st, cfg.now, setup.now_given)
        progress = stack.enter_context(_Progress(setup.quiet, dry_run))

        async def go():
            # The client lives and dies inside the pass's event loop.
            async with make_client(user_agent=setup.user_agent or DEFAULT_USER_AGENT, timeout=setup.timeout) as client:
                fetcher = Fetcher(client, per_host=setup.per_host, respect_robots=not setup.ignore_robots,
                                  max_crawl_delay=setup.max_crawl_delay)
                return await arun_pass(cfg, fetcher=fetcher, store=store, state=st,
                                       embedder=emb, splitter=splitter, on_progress=progress)

        rep = asyncio.run(go())
        data = rep.to_dict()
        if watching:  # the watcher's wake-up time and its --metrics figures, from the state as it is now
            from ..core.freshness import freshness

            pages = st.all_pages()
            still_due = st.due_urls(cfg.now)
            outcome.next_due = min((p.due_at for p in pages if p.due_at is not None and p.due_at > cfg.now),
                                   default=None)
            outcome.still_due = len(still_due)
            outcome.status = freshness(pages, len(still_due), cfg.now)
        elif metrics:  # while the state is open: the freshness figures are read from it
            _write_metrics(metrics, data, st, cfg.now, setup.collection)
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(data, indent=2) + "\n")
    if dry_run:
        for c in rep.changes:
            chunks = f"; {plural(c['chunks'], 'chunk')}, {c['reused']} reused" if "reused" in c else ""
            after = f"; {_DRY_FAILED}" if c["action"] == "failed" else ""
            typer.echo(f"{_action_text(c['action'], True):<12}  {c['url']}  ({c['reason']}{chunks}{after})")
    failed = {c["url"] for c in rep.changes if c["action"] == "failed"} if dry_run else set()
    for e in rep.errors:
        log.warning("%s", _error_line(e, failed))
    ok = rep.ok_within(setup.max_failed_share)
    budget = (f" (within --max-failed-share {setup.max_failed_share:g}: {rep.pages_failed_share:.1%} of "
              f"{plural(rep.pages_visited, 'visited page')})") if ok and rep.pages_failed else ""
    outcome.summary = ("dry run: " if dry_run else "") + rep.summary() + budget
    if not watching:  # the watcher says it in its own line
        typer.echo(outcome.summary, err=True)
    outcome.code, outcome.report = (0 if ok else 1), data
    return outcome


POLL_S = 300.0  # watch's default poll


def watch(ctx: typer.Context, **params: object) -> None:
    """Keep the collection in sync until stopped: read the sitemap(s) every --poll seconds
    (conditional GETs), run a pass when a deploy is seen or a page is due, sleep between.
    Takes every option of `run`. SIGTERM or SIGINT: exit 0 within seconds."""
    _set_verbose(bool(ctx.params["verbose"]))

    def body() -> int:
        from .watch import PassOutcome, WatchCounters, next_due_after, run_watch
        from ..core.site_rules import headers_in_scope
        from ..edges.fetcher import DEFAULT_USER_AGENT

        for name, flag, why in (("dry_run", "--dry-run", "a dry run of one pass is `pagesync run --dry-run`"),
                                ("now", "--now", "the watcher follows the real clock; replays are `pagesync run --now`"),
                                ("changed", "--changed", "a deploy job's list is for one `pagesync run --changed`"),
                                ("changed_from", "--changed-from", "a deploy job's list is for one `pagesync run`")):
            if ctx.params[name]:
                raise ConfigError(f"watch takes no {flag}: {why}")
        setup = _prepare_run(ctx, **ctx.params)
        poll = timedelta(seconds=float(ctx.params["poll"]))

        def one_pass(now: datetime) -> PassOutcome:
            out = _execute_run(setup, now, watching=True)
            return PassOutcome(next_due=next_due_after(out.next_due, out.still_due, now, poll),
                               report=out.report, status=out.status, summary=out.summary)

        def write(last: PassOutcome | None, counters: WatchCounters) -> None:
            from ..edges.metrics import write_metrics

            if setup.metrics is not None:
                write_metrics(setup.metrics, last.report if last else {}, last.status if last else {},
                              setup.collection, counters.metrics())

        rules = setup.cfg.site_rules
        return run_watch(poll=poll, run_pass=one_pass, sitemaps=list(setup.cfg.sitemaps),
                         headers=lambda u: headers_in_scope(rules, u, lambda _u: None),
                         user_agent=setup.user_agent or DEFAULT_USER_AGENT, timeout=setup.timeout,
                         write_metrics=write)

    _guarded(body, "watch stopped")


def _watch_signature() -> None:
    """`watch` takes `run`'s parameters and --poll: the same names, types, defaults and help,
    so the two commands cannot drift apart (and `_prepare_run` reads both alike)."""
    import inspect

    sig = inspect.signature(run, eval_str=True)
    poll = inspect.Parameter("poll", inspect.Parameter.KEYWORD_ONLY, annotation=float, default=typer.Option(
        POLL_S, "--poll", min=1.0, help="Seconds between reads of the sitemap(s) (conditional GETs): the longest "
                                        "a deploy waits to be seen, and the longest sleep."))
    ctx, *rest = sig.parameters.values()
    params = [ctx, poll.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD), *rest]
    watch.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    watch.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}


_watch_signature()
app.command(short_help="A long-running sync: a pass whenever a deploy is seen or a page is due (SIGTERM ends it).")(watch)


def _fresh(state: str, store) -> bool:
    """No collection and no SQLite state yet: nothing can name a model but the default."""
    try:
        return state != QDRANT_STATE and not store.exists() and not Path(state).exists()
    except OSError:  # a state path this user may not look at: `_open_state` says so
        return False


def _read_changed(path: Optional[str]) -> list[str]:
    """The URLs of --changed-from: one a line, blank lines and # comments left out; - is stdin."""
    if path is None:
        return []
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--changed-from {path}: cannot read it ({exc})") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _check_selectors(rules) -> None:
    """ConfigError (exit 2, nothing opened) for a configured selector that is no CSS selector."""
    from ..engine import PassConfig

    PassConfig(site_rules=rules).check_rules()


def _file_sites(ctx: typer.Context) -> list:
    """The configuration file's [[site]] tables, unless --sitemap, --url or --crawl is on the
    command line (flags override the file: then its sites are not synced)."""
    from .config_file import sites_of

    sources = [ctx.get_parameter_source(n) for n in ("sitemap", "url", "crawl")]  # by name: typer's own click
    given = any(s is not None and s.name == "COMMANDLINE" for s in sources)
    return [] if given else sites_of(ctx)


def _write_metrics(path: Path, data: dict, st, now: datetime, collection: str) -> None:
    """--metrics: the report's numbers and the state's freshness figures, as status has them."""
    from ..core.freshness import freshness
    from ..edges.metrics import write_metrics

    write_metrics(path, data, freshness(st.all_pages(), len(st.due_urls(now)), now), collection)


@app.command(short_help="Compare the collection with the page state (--fix repairs); exit 1 when anything is found.")
def audit(
    ctx: typer.Context,
    collection: str = CollectionOpt,
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    state: str = StateOpt,
    wait_lock: float = WaitLockOpt,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    fix: bool = typer.Option(False, "--fix", help="Delete orphans and stale generations, re-index broken and missing pages, then audit again."),
    include_foreign: bool = typer.Option(False, "--include-foreign", help="With --fix, also delete points that have no url payload."),
    embedder: Optional[str] = typer.Option(None, "--embedder", help="With --fix: the embedder the collection was built with (default: the one its points name, when pagesync has it; else the bundled all-MiniLM-L6-v2). Checked before anything is written."),
    embed_dimensions: Optional[int] = EmbedDimensionsOpt,
    embed_concurrency: Optional[int] = EmbedConcurrencyOpt,
    max_embed_tokens: Optional[int] = MaxEmbedTokensOpt,
    examples: int = typer.Option(5, "--examples", min=0, help="Examples listed per category."),
    timeout: float = typer.Option(30.0, "--timeout", min=1.0, help="With --fix: seconds before a request is abandoned."),
    now: Optional[str] = typer.Option(None, "--now", help="With --fix: the repair pass's clock, ISO 8601, as run's --now (replays, backfills); default the wall clock."),
) -> None:
    """Compare the collection with the page state: orphans, stale generations, broken and
    missing pages, foreign points. Exit 1 when anything is found (after --fix: still found)."""

    def body() -> int:
        from .audit import run_audit
        from .checks import require_collection
        from .config_file import rules_of

        # A repair re-reads pages as run does: the site rules of the configuration file and
        # the environment (selector, headers, [[site]] tables). Only --fix fetches anything.
        rules = rules_of(ctx) if fix else None
        if rules is not None:
            _check_selectors(rules)
        store = _open_store(collection, qdrant_url, api_key, qdrant_path, reading=not fix)
        try:
            with _open_state(state, store, missing=NO_STATE) as st:
                require_collection(store, st)
                clock = _parse_now(now)  # a bad --now is exit 2 before anything is read
                if fix and now:
                    _check_clock(st, clock, now)
                out, ok, text = run_audit(store, st, fix=fix, include_foreign=include_foreign,
                                          embedder_name=embedder, timeout=timeout, examples=examples,
                                          wait_lock=wait_lock, now=clock, embed_dimensions=embed_dimensions,
                                          embed_concurrency=embed_concurrency, max_embed_tokens=max_embed_tokens,
                                          site_rules=rules)
        finally:
            store.close()
        typer.echo(json.dumps(out, indent=2) if as_json else text)
        return 0 if ok else 1

    _guarded(body)


@app.command()
def status(
    collection: str = CollectionOpt,
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    state: str = StateOpt,
    now: Optional[str] = typer.Option(None, "--now", help="Clock for 'due' (ISO 8601)."),
    pages: bool = typer.Option(False, "--pages", help="List every tracked page with its interval and due time."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """What is tracked, what is due, intervals, last pass."""

    def body() -> int:
        from .status import collect_status, render_status

        clock = _parse_now(now)
        # A shard a running pass holds is not waited for: status reports from the state.
        store = _open_store(collection, qdrant_url, api_key, qdrant_path, lock_wait=0.5, reading=True)
        try:
            # No require_collection: a missing collection is status's first warning line.
            with _open_state(state, store, missing=NO_STATE, reading=True) as st:
                info = collect_status(st, store, clock, with_pages=pages)
        finally:
            store.close()
        typer.echo(json.dumps(info, indent=2) if as_json else render_status(info))
        return 0

    _guarded(body)


@app.command()
def export(
    collection: str = CollectionOpt,
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    state: str = StateOpt,
    with_vectors: bool = typer.Option(False, "--with-vectors", help="Include each point's vector."),
) -> None:
    """Every point as JSON lines on stdout: {"id", "payload"} (+ "vector" with --with-vectors)."""

    def body() -> int:
        from .checks import require_collection
        from .transfer import export_points

        store = _open_store(collection, qdrant_url, api_key, qdrant_path, reading=True)
        try:
            with _open_state(state, store, optional=True, reading=True) as st:
                require_collection(store, st)
            n = export_points(store, sys.stdout, with_vectors=with_vectors)
        finally:
            store.close()
        log.info("exported %s", plural(n, "point"))
        return 0

    _guarded(body)


@app.command("import")
def import_(
    source: str = typer.Argument("-", help="A JSON-lines file as `export` writes it, or - for stdin."),
    collection: str = CollectionOpt,
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    state: str = StateOpt,
) -> None:
    """Upsert JSON-lines points, as export writes them, from a file or stdin, as given."""

    def body() -> int:
        from .transfer import import_points

        if source != "-" and not os.path.exists(source):
            raise ConfigError(f"no such file: {source}")
        store = _open_store(collection, qdrant_url, api_key, qdrant_path)
        try:
            with (open(source, encoding="utf-8") if source != "-" else sys.stdin) as fh:
                n = import_points(store, fh)
        finally:
            store.close()
        log.info("imported %s into %s", plural(n, "point"), collection)
        return 0

    _guarded(body)


@app.command()
def search(
    query: str = typer.Argument(..., help="Text to search for."),
    limit: int = typer.Option(3, "--limit", min=1, help="How many chunks to show."),
    collection: str = CollectionOpt,
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    # Taken, and unused, so that the options naming a collection and its state work with every command.
    state: str = typer.Option(".pagesync/state.db", "--state", help="Accepted as every command that takes a collection accepts it; search reads no page state."),
    embedder: Optional[str] = typer.Option(None, "--embedder", help="The embedder the collection was built with (default: the one its points name, when pagesync has it; else the bundled all-MiniLM-L6-v2)."),
    embed_dimensions: Optional[int] = EmbedDimensionsOpt,
    embed_concurrency: Optional[int] = EmbedConcurrencyOpt,
    mode: str = typer.Option("hybrid", "--mode", help="hybrid (dense and BM25 keyword results fused), dense (the embedding alone) or keyword (BM25 alone)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Best-matching chunks for a query: a quick check of what a RAG system would retrieve."""

    def body() -> int:
        from .read import check_mode, open_collection

        if not query.strip():
            raise ConfigError("the search query is empty: give some text to search for")
        check_mode(mode)
        # A --qdrant-url without a scheme is http, as qdrant-client reads it.
        where = qdrant_path if not qdrant_url else qdrant_url if "://" in qdrant_url else f"http://{qdrant_url}"
        emb = _query_embedder(embedder, embed_dimensions, embed_concurrency)
        with open_collection(where, collection, api_key=api_key, embedder=emb, lock_wait=_store_wait()) as coll:
            hits = [(h.score, h.payload) for h in coll.search(query, limit=limit, mode=mode)]
        if as_json:
            typer.echo(json.dumps([{"score": s, "payload": p} for s, p in hits], indent=2))
        for score, p in [] if as_json else hits:
            text = " ".join(str(p.get("text", "")).split())
            typer.echo(f"{score:.3f}  {p.get('url')}  [{p.get('title', '')}]\n       {text[:300]}")
        return 0

    _guarded(body)


# -- pagesync state export / import ------------------------------------------------------------
state_app = typer.Typer(
    no_args_is_help=True,
    help="Move the whole page state (every page field, host lastmod trust, run history) between SQLite "
         "(--state PATH) and Qdrant (--state qdrant --qdrant-url URL) as JSON lines.",
)
app.add_typer(state_app, name="state")


@state_app.command("export")
def state_export(
    collection: str = CollectionOpt,
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    state: str = StateOpt,
    file: Optional[Path] = typer.Option(None, "--file", help="Write here instead of stdout."),
) -> None:
    """Write the whole page state as JSON lines, to stdout or --file.

    A header line, then one line per page (every field), per host and per run (oldest
    first). Export between passes for a consistent copy.

    \b
    SQLite -> Qdrant:
      pagesync state export --state .pagesync/state.db --file state.jsonl
      pagesync state import --state qdrant --qdrant-url URL --file state.jsonl
    """

    def body() -> int:
        from .transfer import export_state

        store = _open_store(collection, qdrant_url, api_key, qdrant_path)
        try:
            with _open_state(state, store, missing=NO_STATE, reading=True) as st, ExitStack() as stack:
                out = stack.enter_context(open(file, "w", encoding="utf-8")) if file else sys.stdout
                n = export_state(st, out)
        finally:
            store.close()
        log.info("exported %s, %s, %s", plural(n["pages"], "page"), plural(n["hosts"], "host"), plural(n["runs"], "run"))
        return 0

    _guarded(body)


@state_app.command("import")
def state_import(
    collection: str = CollectionOpt,
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    state: str = StateOpt,
    file: Optional[Path] = typer.Option(None, "--file", help="Read from here instead of stdin."),
    replace: bool = typer.Option(False, "--replace", help="Forget the target state's pages, hosts and runs first (else it must be empty)."),
    wait_lock: float = WaitLockOpt,
) -> None:
    """Load a 'state export' dump (stdin or --file) into the page state --state names.

    The target (created if missing) is written under its pass lock; every line is
    checked before anything is written; the target must be empty unless --replace.

    \b
    Qdrant -> SQLite:
      pagesync state export --state qdrant --qdrant-url URL > state.jsonl
      pagesync state import --state .pagesync/state.db < state.jsonl
    """

    def body() -> int:
        from .transfer import load_state, read_state_dump

        if file is not None and not file.exists():
            raise ConfigError(f"no such file: {file}")
        with open(file, encoding="utf-8") if file else sys.stdin as src:
            dump = read_state_dump(src)  # every line checked before anything is opened or written
        store = _open_store(collection, qdrant_url, api_key, qdrant_path)
        try:
            with _open_state(state, store) as st:
                n = load_state(st, dump, replace=replace, wait_lock=wait_lock)
        finally:
            store.close()
        log.info("imported %s, %s, %s", plural(n["pages"], "page"), plural(n["hosts"], "host"), plural(n["runs"], "run"))
        return 0

    _guarded(body)


@app.command(short_help="Rebuild the collection beside the live one (e.g. a new embedder) and switch an alias to it.")
def reindex(
    ctx: typer.Context,
    collection: str = typer.Option("pages", "--collection", help="The alias readers query (or, the first time, the plain collection to replace)."),
    qdrant_url: Optional[str] = QdrantUrlOpt,
    api_key: Optional[str] = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Optional[Path] = ConfigOpt,
    state: str = StateOpt,
    wait_lock: float = WaitLockOpt,
    embedder: Optional[str] = typer.Option(None, "--embedder", help="The embedder of the new collection (default: the bundled all-MiniLM-L6-v2; any --embedder name `run` takes, e.g. st:NAME_OR_PATH or openai:MODEL)."),
    embed_dimensions: Optional[int] = EmbedDimensionsOpt,
    embed_concurrency: Optional[int] = EmbedConcurrencyOpt,
    chunk_tokens: Optional[int] = ChunkTokensOpt,
    chunk_overlap: Optional[int] = ChunkOverlapOpt,
    max_chunk_tokens: Optional[int] = MaxChunkTokensOpt,
    alias: Optional[str] = typer.Option(None, "--alias", help="The alias to create or switch, when not --collection (e.g. the first time on a server, where --collection is a plain collection that is to stay)."),
    drop_old: bool = typer.Option(False, "--drop-old", help="Delete the previous collection after a successful switch (on a server the first time: right before the alias is created)."),
    drop_failed: bool = typer.Option(False, "--drop-failed", help="Delete the new collection when it fails to build or verify (default: keep it for inspection)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be done (pages, chunks, where each text comes from); write nothing, fetch nothing."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    embed_batch: int = typer.Option(64, "--embed-batch", min=1, help="Chunks per model call (batches span pages)."),
    workers: int = typer.Option(8, "--workers", min=1, help="Concurrent re-fetches of pages whose text is not at hand."),
    user_agent: Optional[str] = typer.Option(None, "--user-agent", help="User-Agent header for re-fetches."),
    timeout: float = typer.Option(30.0, "--timeout", min=1.0, help="Seconds before a request is abandoned."),
) -> None:
    """Rebuild the collection with the current embedder and chunker beside the live one,
    verify it, and switch an alias to it: readers of the alias never see a half-built
    index. Texts come from the page state, else the old points, else a re-fetch. The old
    collection is kept until --drop-old. This is how a collection changes models."""

    def body() -> int:
        from embedders import make_embedder

        from ..stages.chunks import splitter_for
        from ..edges.catalog import ClientCatalog, EdgeCatalog
        from ..edges.fetcher import DEFAULT_USER_AGENT, make_client
        from .reindex import ReindexConfig, ReindexFailed, run_reindex
        from ..edges.store import ClientStore

        from .checks import check_runs
        from .config_file import rules_of

        # Re-fetched pages are read as run reads them: the configuration's site rules.
        rules = rules_of(ctx)
        _check_selectors(rules)
        emb = make_embedder(embedder, dimensions=embed_dimensions, concurrency=embed_concurrency)
        check_runs(emb)  # a remote server's key and the model's size, before anything is opened
        splitter = splitter_for(emb, chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap,
                                max_chunk_tokens=max_chunk_tokens)
        cfg = ReindexConfig(alias=alias, drop_old=drop_old, drop_failed=drop_failed, dry_run=dry_run,
                            embed_batch=embed_batch, workers=workers, wait_lock=wait_lock, site_rules=rules)
        store = _open_store(collection, qdrant_url, api_key, qdrant_path)  # where the page state may live
        catalog = (ClientCatalog.of(store) if isinstance(store, ClientStore)
                   else EdgeCatalog(qdrant_path, lock_wait=_store_wait()))
        try:
            with _open_state(state, store, missing=NO_STATE) as st:
                rep = run_reindex(catalog, collection, state=st, embedder=emb, splitter=splitter, cfg=cfg,
                                  client_factory=lambda: make_client(user_agent=user_agent or DEFAULT_USER_AGENT,
                                                                     timeout=timeout))
        except ReindexFailed as exc:
            if as_json:
                typer.echo(json.dumps(exc.report.to_dict(), indent=2))
            raise
        finally:
            store.close()
        if as_json:
            typer.echo(json.dumps(rep.to_dict(), indent=2))
        else:
            for entry in rep.plan:
                typer.echo(f"would reindex {entry['url']}  ({plural(entry['chunks'], 'chunk')}, text: {entry['source']})")
            typer.echo(rep.summary())
        for e in rep.errors:
            log.warning("warning: %s", e["error"])
        return 0

    _guarded(body)


def main() -> None:
    """The `pagesync` command. Ctrl-C is exit 130 at any moment; an exit while a model call
    still runs in a thread of its own skips the interpreter's finalisation (`_exit_now`)."""
    from ..edges.threads import running

    _PROCESS["hard_exit"] = True
    # An inherited SIG_IGN (a job started in the background) is kept: such a job ignores Ctrl-C.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_outside_a_body)
    try:
        app()
    except SystemExit as exc:
        if running():
            code = exc.code
            _exit_now(code if isinstance(code, int) else (0 if code is None else 1))
        raise
