"""The options the commands share (typer `Option`s: the same names, defaults and help on every
command), and the checks and parsing of option values: a bad value is a `ConfigError`, exit 2
with nothing opened."""

from __future__ import annotations

import logging
import os
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import typer

from ..errors import ConfigError
from .exits import fail

__all__ = [
    "CollectionOpt",
    "QdrantUrlOpt",
    "ApiKeyOpt",
    "QdrantPathOpt",
    "StateOpt",
    "WaitLockOpt",
    "EMBEDDER_HELP",
    "EmbedDimensionsOpt",
    "EmbedConcurrencyOpt",
    "MaxEmbedTokensOpt",
    "ChunkTokensOpt",
    "ChunkOverlapOpt",
    "MaxChunkTokensOpt",
    "ConfigOpt",
    "config_callback",
    "query_embedder",
    "NOW_MIN",
    "NOW_MAX",
    "parse_now",
    "check_clock",
    "parse_duration",
    "check_output",
    "check_url",
    "read_changed",
    "check_selectors",
    "file_sites",
]

log = logging.getLogger("pagesync")

# -- shared options ------------------------------------------------------------------------
CollectionOpt = typer.Option("pages", "--collection", help="Qdrant collection.")
# QDRANT_URL and QDRANT_API_KEY are read with the PAGESYNC_* variables (sync.core.config), below
# the configuration file: click's own envvar would rank them above it.
QdrantUrlOpt = typer.Option(None, "--qdrant-url", help="A Qdrant server URL (env QDRANT_URL).")
ApiKeyOpt = typer.Option(None, "--api-key", help="Qdrant API key (env QDRANT_API_KEY).")
QdrantPathOpt = typer.Option(
    Path(".pagesync/qdrant"), "--qdrant-path", help="Embedded Qdrant directory, used when no server is named."
)
StateOpt = typer.Option(
    ".pagesync/state.db",
    "--state",
    help="The page state: a SQLite file, or the literal 'qdrant' to keep it in Qdrant beside the collection "
    "(<collection>__pagesync_state; needs --qdrant-url). A file named 'qdrant' is ./qdrant.",
)
WaitLockOpt = typer.Option(
    0.0,
    "--wait-lock",
    min=0.0,
    help="Seconds to wait for another pass holding the state lock (default 0: exit 2 at once).",
)
EMBEDDER_HELP = (
    "Embedder (default: the collection's own model, as the last pass into it or its points name it; "
    "for a new collection the bundled all-MiniLM-L6-v2): the bundled all-MiniLM-L6-v2 (offline; ONNX "
    "Runtime when installed, else torch; "
    "force one with 'minilm-onnx' or 'minilm-torch'), 'st:NAME_OR_PATH' (a sentence-transformers model "
    "in a folder or the local cache; never downloaded), 'openai:MODEL' (OpenAI's embeddings API or any "
    "server speaking it, at env OPENAI_BASE_URL, key from env OPENAI_API_KEY) or 'fake' (tests). Another "
    "model than the collection's is exit 2, --full or not: change models with 'pagesync reindex'."
)


def query_embedder(name: str | None, dimensions: int | None, concurrency: int | None):
    """The embedder `search` was given: its name (the read API picks and checks it), or, with a
    remote embedder's options, the embedder itself, checked to run."""
    if dimensions is None and concurrency is None:
        return name
    from embedders import make_embedder

    from .checks import check_runs

    emb = make_embedder(name, dimensions=dimensions, concurrency=concurrency)
    check_runs(emb)
    return emb


EmbedDimensionsOpt = typer.Option(
    None,
    "--embed-dimensions",
    min=1,
    help="Remote embedders: the vector size to ask for (sent as `dimensions`; "
    "text-embedding-3 models take it). Part of the model id.",
)
EmbedConcurrencyOpt = typer.Option(
    None, "--embed-concurrency", min=1, help="Remote embedders: embedding requests in flight at once (default 4)."
)
MaxEmbedTokensOpt = typer.Option(
    None,
    "--max-embed-tokens",
    min=0,
    help="Spending guard: send no batch that could take this pass past N tokens "
    "(counted offline as an upper bound before sending); the pages not embedded "
    "keep their points and are embedded by the next pass (exit 1).",
)

ChunkTokensOpt = typer.Option(
    None,
    "--chunk-tokens",
    min=8,
    help="Chunk size in the embedder's own tokens (default: what the model reads, at "
    "most 1024; the bundled model 256). Characters for an embedder without a "
    "tokenizer. A new size re-chunks every page once.",
)
ChunkOverlapOpt = typer.Option(
    None,
    "--chunk-overlap",
    min=0,
    help="Tokens a chunk shares with the one before it when a section is cut by size "
    "(default: a tenth of --chunk-tokens).",
)
MaxChunkTokensOpt = typer.Option(
    None,
    "--max-chunk-tokens",
    min=16,
    help="The most tokens one embedded text (heading path and chunk) may take "
    "(default: the model's input; needed for an openai: model pagesync does not "
    "know; cannot exceed a known model's input).",
)


def config_callback(ctx: typer.Context, value: Path | None) -> Path | None:
    """Eager: the configuration file and PAGESYNC_* variables become the command's
    defaults before any other option is read (a bad one: one line, exit 2)."""
    from .config_file import load_config

    try:
        load_config(ctx, value)
    except ConfigError as exc:
        fail(exc, exc.exit_code)
    return value


ConfigOpt = typer.Option(
    None,
    "--config",
    envvar="PAGESYNC_CONFIG",
    is_eager=True,
    callback=config_callback,
    dir_okay=False,
    # No square brackets in the text: rich reads them as markup.
    help="A TOML file of options (keys: long options, dashes as underscores; per-site ones in 'site' tables). "
    "Default: ./pagesync.toml when it exists. Flags override it; it overrides PAGESYNC_* variables.",
)


# The clocks a --now may give: replays and backfills reach back to the web's early years;
# forward, far enough for any test, and far from datetime's year 9999, where due times
# (a pass's clock plus intervals of up to 60 days and backoffs) would overflow.
NOW_MIN = datetime(1990, 1, 1, tzinfo=timezone.utc)
NOW_MAX = datetime(3000, 1, 1, tzinfo=timezone.utc)


def parse_now(value: str | None) -> datetime:
    if not value:
        return datetime.now(timezone.utc)
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--now {value!r} is not ISO 8601 (e.g. 2026-11-30T06:00:00Z)") from None
    dt = dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    if not NOW_MIN <= dt < NOW_MAX:
        raise ConfigError(
            f"--now {value!r} is out of range: a pass's clock is from {NOW_MIN:%Y-%m-%d} to before {NOW_MAX:%Y-%m-%d}"
        )
    return dt


def check_clock(st, clock: datetime, given: str) -> None:
    """A --now before the last pass's clock: a warning, not a refusal (docs/commands/run.md names
    backfills among --now's uses). The engine records such a visit as no time elapsed, so
    no history goes negative, but due times and intervals are computed from that clock."""
    last = st.last_run()
    stamp = last.get("now") if isinstance(last, dict) else None
    if not stamp:
        return
    try:
        before = parse_now(str(stamp))
    except ConfigError:
        return
    if clock < before:
        log.warning(
            "warning: --now %s is before the last pass's clock %s: visits count as no time elapsed "
            "since the last one, and due times start from this earlier clock",
            given,
            before.isoformat(),
        )


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([wdhm])")
_DURATION_UNIT_S = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60}


def parse_duration(value: str, flag: str) -> timedelta:
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


def check_output(path: Path | None, flag: str) -> None:
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


def check_url(u: str, flag: str) -> str:
    from ..core.ids import url_problem

    problem = url_problem(u)
    if problem:
        raise ConfigError(f"{flag} {u!r} {problem}")
    return u


def read_changed(path: str | None) -> list[str]:
    """The URLs of --changed-from: one a line, blank lines and # comments left out; - is stdin."""
    if path is None:
        return []
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--changed-from {path}: cannot read it ({exc})") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def check_selectors(rules) -> None:
    """ConfigError (exit 2, nothing opened) for a configured selector that is no CSS selector."""
    from ..engine import PassConfig

    PassConfig(site_rules=rules).check_rules()


def file_sites(ctx: typer.Context) -> list:
    """The configuration file's [[site]] tables, unless --sitemap, --url or --crawl is on the
    command line (flags override the file: then its sites are not synced)."""
    from .config_file import sites_of

    sources = [ctx.get_parameter_source(n) for n in ("sitemap", "url", "crawl")]  # by name: typer's own click
    given = any(s is not None and s.name == "COMMANDLINE" for s in sources)
    return [] if given else sites_of(ctx)
