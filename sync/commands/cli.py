"""`pagesync` command line: thin. It builds objects, calls one library function, and turns
errors into one clear line and an exit code (0 done; 1 finished with failures; 2 bad usage
or configuration, nothing written)."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import typer

from ..errors import ConfigError
from ..core.plural import plural
from .exits import PROCESS, exit_now, guarded, interrupted_outside_a_body
from .opening import NO_STATE, open_state, open_store, store_and_state, store_wait
from .options import (
    ApiKeyOpt,
    ChunkOverlapOpt,
    ChunkTokensOpt,
    CollectionOpt,
    ConfigOpt,
    EMBEDDER_HELP,
    EmbedConcurrencyOpt,
    EmbedDimensionsOpt,
    MaxChunkTokensOpt,
    MaxEmbedTokensOpt,
    QdrantPathOpt,
    QdrantUrlOpt,
    StateOpt,
    WaitLockOpt,
    check_clock,
    check_selectors,
    parse_now,
    query_embedder,
)
from .output import configure_logging, set_verbose
from .pass_runner import execute_run, prepare_run

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

RUN_INTERRUPTED = (
    "the pass was interrupted (no report written); what it wrote is consistent "
    "and the next `pagesync run` resumes: pages whose write was under way are redone"
)


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
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Log every page, skips included (also accepted after the command, e.g. run -v)."
    ),
    show_version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_show_version, help="Print pagesync's version and exit."
    ),
) -> None:
    configure_logging(verbose)


@app.command()
def run(
    ctx: typer.Context,
    sitemap: list[str] = typer.Option(
        [], "--sitemap", help="A sitemap or sitemap index (.xml or .xml.gz); repeatable."
    ),
    url: list[str] = typer.Option([], "--url", help="An extra page to track that no sitemap lists; repeatable."),
    crawl: list[str] = typer.Option(
        [],
        "--crawl",
        help="A start page of a link crawl within scope (its directory, robots.txt, nofollow, noindex and rel=canonical honoured; no sitemap needed); repeatable.",
    ),
    max_pages: int = typer.Option(
        10000,
        "--max-pages",
        min=1,
        help="Bound of a crawl: the pages it reaches at most (past it the crawl is incomplete and purges nothing for not being linked).",
    ),
    collection: str = CollectionOpt,
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    state: str = StateOpt,
    wait_lock: float = WaitLockOpt,
    embedder: str | None = typer.Option(None, "--embedder", help=EMBEDDER_HELP),
    embed_dimensions: int | None = EmbedDimensionsOpt,
    embed_concurrency: int | None = EmbedConcurrencyOpt,
    max_embed_tokens: int | None = MaxEmbedTokensOpt,
    chunk_tokens: int | None = ChunkTokensOpt,
    chunk_overlap: int | None = ChunkOverlapOpt,
    max_chunk_tokens: int | None = MaxChunkTokensOpt,
    full: bool = typer.Option(
        False, "--full", help="Visit every known page this pass (conditional GET still applies)."
    ),
    rebuild: bool = typer.Option(
        False,
        "--rebuild",
        help="The collection is missing or empty while the state records pages: rebuild it (without this flag such a run exits 2 and writes nothing).",
    ),
    now: str | None = typer.Option(None, "--now", help="The pass's clock, ISO 8601 (replays, backfills)."),
    report: Path | None = typer.Option(None, "--report", help="Write the run report as JSON to this path."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Fetch and diff, print what would change, write nothing."),
    workers: int = typer.Option(
        8, "--workers", min=1, help="Concurrent fetches in all (at most --per-host of them to one host)."
    ),
    per_host: int = typer.Option(4, "--per-host", min=1, help="Concurrent fetches per host."),
    embed_batch: int = typer.Option(
        64,
        "--embed-batch",
        min=1,
        help="Texts per model call (batches span pages; reused chunks are not model inputs).",
    ),
    no_reuse: bool = typer.Option(
        False,
        "--no-reuse",
        help="Embed every chunk of a changed page, even where a stored vector for the same text and embedder exists.",
    ),
    user_agent: str | None = typer.Option(None, "--user-agent", help="User-Agent header for every request."),
    timeout: float = typer.Option(30.0, "--timeout", min=1.0, help="Seconds before a request is abandoned."),
    allow_host: list[str] = typer.Option(
        [],
        "--allow-host",
        help="Another site pages may live on, HOST or HOST:PORT (repeatable); by default only the sites (host and port) of --sitemap/--url.",
    ),
    allow_mass_delete: bool = typer.Option(
        False,
        "--allow-mass-delete",
        help="Purge even when a pass would remove more than --max-delete-share of the tracked pages, or the sitemap came back empty.",
    ),
    max_delete_share: float = typer.Option(
        0.2,
        "--max-delete-share",
        min=0.0,
        max=1.0,
        help="The mass-deletion guard's threshold (share of tracked pages).",
    ),
    ignore_robots: bool = typer.Option(
        False, "--ignore-robots", help="Do not read robots.txt (only for sites you run yourself)."
    ),
    max_crawl_delay: float = typer.Option(
        10.0, "--max-crawl-delay", min=0.0, help="Cap on a robots.txt Crawl-delay, in seconds."
    ),
    policy: str = typer.Option(
        "deploys",
        "--policy",
        help="Revisit policy: deploys (the default: a static site's pages at its deploys, by their chance of a change per deploy and at least every second deploy, and what its MkDocs/Sphinx/Docusaurus search index says changed; a site that changes between deploys, and one before its first deploy is seen, is scheduled by change-rate), change-rate (learned per page), halve-double (halve a page's interval when it changed, double it when not) or uniform (one fixed interval, --revisit-interval; the better choice measured for a sitemap without a usable lastmod).",
    ),
    revisit_interval: str | None = typer.Option(
        None,
        "--revisit-interval",
        help="With --policy uniform: visit every page this often (12h, 3d, 1w; within [6h, 60d]; default 3d).",
    ),
    max_fetches: int | None = typer.Option(
        None,
        "--max-fetches",
        min=0,
        help="Visit at most this many pages this pass: repairs, then new pages, then the stalest (repairs, trusted lastmod advances and pages unvisited for 60 d may exceed it).",
    ),
    max_chunks_per_page: int = typer.Option(
        2000,
        "--max-chunks-per-page",
        min=1,
        help="Skip a page cut into more chunks than this (its old points are kept; the report lists it under skipped).",
    ),
    bulk_edits: bool = typer.Option(
        False,
        "--bulk-edits/--no-bulk-edits",
        help="Notice bulk edits (a pass finding far more pages changed than their rates predict) and look at the pages not visited since sooner, within --max-fetches.",
    ),
    include: list[str] = typer.Option(
        [],
        "--include",
        help="Track only pages whose canonical URL matches this shell-style glob (repeatable; e.g. 'https://docs.example.com/guide/*').",
    ),
    exclude: list[str] = typer.Option(
        [],
        "--exclude",
        help="Never fetch pages whose canonical URL matches this shell-style glob (repeatable; e.g. '*/changelog/*'); a tracked page that becomes excluded is purged.",
    ),
    no_default_excludes: bool = typer.Option(
        False,
        "--no-default-excludes",
        help="Fetch the index, search and 404 pages of Sphinx, MkDocs and Docusaurus too (excluded by default).",
    ),
    select: str | None = typer.Option(
        None,
        "--select",
        help="A CSS selector: only the element(s) it matches are a page's content (e.g. 'div.document'); a page where it matches nothing fails.",
    ),
    header: list[str] = typer.Option(
        [],
        "--header",
        help="'Name: value' sent with every request to this run's sites, never to other hosts (repeatable); a value 'env:VAR' is read from the environment variable VAR and never shown.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the summary line."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every page, skips included (as the global -v)."),
    max_failed_share: float = typer.Option(
        0.0,
        "--max-failed-share",
        min=0.0,
        max=1.0,
        help="Exit 1 only when more than this share of the visited pages failed (default 0: any failed page); the summary names them either way. A sitemap error, a purge held back by the guard or pages left by --max-embed-tokens are exit 1 regardless.",
    ),
    metrics: Path | None = typer.Option(
        None,
        "--metrics",
        dir_okay=False,
        help="Write the run's numbers to this file in the Prometheus text format (pagesync_<report key> gauges and the status figures), atomically: for node_exporter's textfile collector or a Pushgateway.",
    ),
    changed: list[str] = typer.Option(
        [],
        "--changed",
        help="A page a deploy changed: visited this pass, unconditionally (repeatable); nothing else is fetched unless due. A URL outside the run's scope is exit 2.",
    ),
    changed_from: str | None = typer.Option(
        None, "--changed-from", help="A file of changed pages, one URL a line (- for stdin), as --changed."
    ),
) -> None:
    """One sync pass: diff the sitemap(s), visit what is due, write changes, exit."""
    set_verbose(verbose)

    def body() -> int:
        setup = prepare_run(ctx, **ctx.params)
        return execute_run(setup, setup.cfg.now).code

    guarded(body, "dry run interrupted; nothing was written" if dry_run else RUN_INTERRUPTED)


POLL_S = 300.0  # watch's default poll


def watch(ctx: typer.Context, **params: object) -> None:
    """Keep the collection in sync until stopped: read the sitemap(s) every --poll seconds
    (conditional GETs), run a pass when a deploy is seen or a page is due, sleep between.
    Takes every option of `run`. SIGTERM or SIGINT: exit 0 within seconds."""
    set_verbose(bool(ctx.params["verbose"]))

    def body() -> int:
        from .watch import PassOutcome, WatchCounters, next_due_after, run_watch
        from ..core.site_rules import headers_in_scope
        from ..edges.fetcher import DEFAULT_USER_AGENT

        for name, flag, why in (
            ("dry_run", "--dry-run", "a dry run of one pass is `pagesync run --dry-run`"),
            ("now", "--now", "the watcher follows the real clock; replays are `pagesync run --now`"),
            ("changed", "--changed", "a deploy job's list is for one `pagesync run --changed`"),
            ("changed_from", "--changed-from", "a deploy job's list is for one `pagesync run`"),
        ):
            if ctx.params[name]:
                raise ConfigError(f"watch takes no {flag}: {why}")
        setup = prepare_run(ctx, **ctx.params)
        poll = timedelta(seconds=float(ctx.params["poll"]))

        def one_pass(now: datetime) -> PassOutcome:
            out = execute_run(setup, now, watching=True)
            return PassOutcome(
                next_due=next_due_after(out.next_due, out.still_due, now, poll),
                report=out.report,
                status=out.status,
                summary=out.summary,
            )

        def write(last: PassOutcome | None, counters: WatchCounters) -> None:
            from ..edges.metrics import write_metrics

            if setup.metrics is not None:
                write_metrics(
                    setup.metrics,
                    last.report if last else {},
                    last.status if last else {},
                    setup.collection,
                    counters.metrics(),
                )

        rules = setup.cfg.site_rules
        return run_watch(
            poll=poll,
            run_pass=one_pass,
            sitemaps=list(setup.cfg.sitemaps),
            headers=lambda u: headers_in_scope(rules, u, lambda _u: None),
            user_agent=setup.user_agent or DEFAULT_USER_AGENT,
            timeout=setup.timeout,
            write_metrics=write,
        )

    guarded(body, "watch stopped")


def _watch_signature() -> None:
    """`watch` takes `run`'s parameters and --poll: the same names, types, defaults and help,
    so the two commands cannot drift apart (and `prepare_run` reads both alike)."""
    import inspect

    sig = inspect.signature(run, eval_str=True)
    poll = inspect.Parameter(
        "poll",
        inspect.Parameter.KEYWORD_ONLY,
        annotation=float,
        default=typer.Option(
            POLL_S,
            "--poll",
            min=1.0,
            help="Seconds between reads of the sitemap(s) (conditional GETs): the longest "
            "a deploy waits to be seen, and the longest sleep.",
        ),
    )
    ctx, *rest = sig.parameters.values()
    params = [ctx, poll.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD), *rest]
    watch.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    watch.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}


_watch_signature()
app.command(short_help="A long-running sync: a pass whenever a deploy is seen or a page is due (SIGTERM ends it).")(
    watch
)


@app.command(short_help="Compare the collection with the page state (--fix repairs); exit 1 when anything is found.")
def audit(
    ctx: typer.Context,
    collection: str = CollectionOpt,
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    state: str = StateOpt,
    wait_lock: float = WaitLockOpt,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    fix: bool = typer.Option(
        False,
        "--fix",
        help="Delete orphans and stale generations, re-index broken and missing pages, then audit again.",
    ),
    include_foreign: bool = typer.Option(
        False, "--include-foreign", help="With --fix, also delete points that have no url payload."
    ),
    embedder: str | None = typer.Option(
        None,
        "--embedder",
        help="With --fix: the embedder the collection was built with (default: the one its points name, when pagesync has it; else the bundled all-MiniLM-L6-v2). Checked before anything is written.",
    ),
    embed_dimensions: int | None = EmbedDimensionsOpt,
    embed_concurrency: int | None = EmbedConcurrencyOpt,
    max_embed_tokens: int | None = MaxEmbedTokensOpt,
    examples: int = typer.Option(5, "--examples", min=0, help="Examples listed per category."),
    timeout: float = typer.Option(
        30.0, "--timeout", min=1.0, help="With --fix: seconds before a request is abandoned."
    ),
    now: str | None = typer.Option(
        None,
        "--now",
        help="With --fix: the repair pass's clock, ISO 8601, as run's --now (replays, backfills); default the wall clock.",
    ),
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
            check_selectors(rules)
        with store_and_state(
            collection, qdrant_url, api_key, qdrant_path, state, reading=not fix, missing=NO_STATE
        ) as (store, st):
            require_collection(store, st)
            clock = parse_now(now)  # a bad --now is exit 2 before anything is read
            if fix and now:
                check_clock(st, clock, now)
            out, ok, text = run_audit(
                store,
                st,
                fix=fix,
                include_foreign=include_foreign,
                embedder_name=embedder,
                timeout=timeout,
                examples=examples,
                wait_lock=wait_lock,
                now=clock,
                embed_dimensions=embed_dimensions,
                embed_concurrency=embed_concurrency,
                max_embed_tokens=max_embed_tokens,
                site_rules=rules,
            )
        typer.echo(json.dumps(out, indent=2) if as_json else text)
        return 0 if ok else 1

    guarded(body)


@app.command()
def status(
    collection: str = CollectionOpt,
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    state: str = StateOpt,
    now: str | None = typer.Option(None, "--now", help="Clock for 'due' (ISO 8601)."),
    pages: bool = typer.Option(False, "--pages", help="List every tracked page with its interval and due time."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """What is tracked, what is due, intervals, last pass."""

    def body() -> int:
        from .status import collect_status, render_status

        clock = parse_now(now)
        # A shard a running pass holds is not waited for: status reports from the state.
        with store_and_state(
            collection,
            qdrant_url,
            api_key,
            qdrant_path,
            state,
            lock_wait=0.5,
            reading=True,
            state_reading=True,
            missing=NO_STATE,
        ) as (store, st):
            # No require_collection: a missing collection is status's first warning line.
            info = collect_status(st, store, clock, with_pages=pages)
        typer.echo(json.dumps(info, indent=2) if as_json else render_status(info))
        return 0

    guarded(body)


@app.command()
def export(
    collection: str = CollectionOpt,
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    state: str = StateOpt,
    with_vectors: bool = typer.Option(False, "--with-vectors", help="Include each point's vector."),
) -> None:
    """Every point as JSON lines on stdout: {"id", "payload"} (+ "vector" with --with-vectors)."""

    def body() -> int:
        from .checks import require_collection
        from .transfer import export_points

        store = open_store(collection, qdrant_url, api_key, qdrant_path, reading=True)
        try:
            with open_state(state, store, optional=True, reading=True) as st:
                require_collection(store, st)
            n = export_points(store, sys.stdout, with_vectors=with_vectors)
        finally:
            store.close()
        log.info("exported %s", plural(n, "point"))
        return 0

    guarded(body)


@app.command("import")
def import_(
    source: str = typer.Argument("-", help="A JSON-lines file as `export` writes it, or - for stdin."),
    collection: str = CollectionOpt,
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    state: str = StateOpt,
) -> None:
    """Upsert JSON-lines points, as export writes them, from a file or stdin, as given."""

    def body() -> int:
        from .transfer import import_points

        if source != "-" and not os.path.exists(source):
            raise ConfigError(f"no such file: {source}")
        store = open_store(collection, qdrant_url, api_key, qdrant_path)
        try:
            with open(source, encoding="utf-8") if source != "-" else sys.stdin as fh:
                n = import_points(store, fh)
        finally:
            store.close()
        log.info("imported %s into %s", plural(n, "point"), collection)
        return 0

    guarded(body)


@app.command()
def search(
    query: str = typer.Argument(..., help="Text to search for."),
    limit: int = typer.Option(3, "--limit", min=1, help="How many chunks to show."),
    collection: str = CollectionOpt,
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    # Taken, and unused, so that the options naming a collection and its state work with every command.
    state: str = typer.Option(
        ".pagesync/state.db",
        "--state",
        help="Accepted as every command that takes a collection accepts it; search reads no page state.",
    ),
    embedder: str | None = typer.Option(
        None,
        "--embedder",
        help="The embedder the collection was built with (default: the one its points name, when pagesync has it; else the bundled all-MiniLM-L6-v2).",
    ),
    embed_dimensions: int | None = EmbedDimensionsOpt,
    embed_concurrency: int | None = EmbedConcurrencyOpt,
    mode: str = typer.Option(
        "hybrid",
        "--mode",
        help="hybrid (dense and BM25 keyword results fused), dense (the embedding alone) or keyword (BM25 alone).",
    ),
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
        emb = query_embedder(embedder, embed_dimensions, embed_concurrency)
        with open_collection(where, collection, api_key=api_key, embedder=emb, lock_wait=store_wait()) as coll:
            hits = [(h.score, h.payload) for h in coll.search(query, limit=limit, mode=mode)]
        if as_json:
            typer.echo(json.dumps([{"score": s, "payload": p} for s, p in hits], indent=2))
        for score, p in [] if as_json else hits:
            text = " ".join(str(p.get("text", "")).split())
            typer.echo(f"{score:.3f}  {p.get('url')}  [{p.get('title', '')}]\n       {text[:300]}")
        return 0

    guarded(body)


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
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    state: str = StateOpt,
    file: Path | None = typer.Option(None, "--file", help="Write here instead of stdout."),
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

        with (
            store_and_state(
                collection, qdrant_url, api_key, qdrant_path, state, state_reading=True, missing=NO_STATE
            ) as (_store, st),
            ExitStack() as stack,
        ):
            out = stack.enter_context(open(file, "w", encoding="utf-8")) if file else sys.stdout
            n = export_state(st, out)
        log.info(
            "exported %s, %s, %s", plural(n["pages"], "page"), plural(n["hosts"], "host"), plural(n["runs"], "run")
        )
        return 0

    guarded(body)


@state_app.command("import")
def state_import(
    collection: str = CollectionOpt,
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    state: str = StateOpt,
    file: Path | None = typer.Option(None, "--file", help="Read from here instead of stdin."),
    replace: bool = typer.Option(
        False, "--replace", help="Forget the target state's pages, hosts and runs first (else it must be empty)."
    ),
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
        with store_and_state(collection, qdrant_url, api_key, qdrant_path, state) as (_store, st):
            n = load_state(st, dump, replace=replace, wait_lock=wait_lock)
        log.info(
            "imported %s, %s, %s", plural(n["pages"], "page"), plural(n["hosts"], "host"), plural(n["runs"], "run")
        )
        return 0

    guarded(body)


@app.command(short_help="Rebuild the collection beside the live one (e.g. a new embedder) and switch an alias to it.")
def reindex(
    ctx: typer.Context,
    collection: str = typer.Option(
        "pages", "--collection", help="The alias readers query (or, the first time, the plain collection to replace)."
    ),
    qdrant_url: str | None = QdrantUrlOpt,
    api_key: str | None = ApiKeyOpt,
    qdrant_path: Path = QdrantPathOpt,
    config: Path | None = ConfigOpt,
    state: str = StateOpt,
    wait_lock: float = WaitLockOpt,
    embedder: str | None = typer.Option(
        None,
        "--embedder",
        help="The embedder of the new collection (default: the bundled all-MiniLM-L6-v2; any --embedder name `run` takes, e.g. st:NAME_OR_PATH or openai:MODEL).",
    ),
    embed_dimensions: int | None = EmbedDimensionsOpt,
    embed_concurrency: int | None = EmbedConcurrencyOpt,
    chunk_tokens: int | None = ChunkTokensOpt,
    chunk_overlap: int | None = ChunkOverlapOpt,
    max_chunk_tokens: int | None = MaxChunkTokensOpt,
    alias: str | None = typer.Option(
        None,
        "--alias",
        help="The alias to create or switch, when not --collection (e.g. the first time on a server, where --collection is a plain collection that is to stay).",
    ),
    drop_old: bool = typer.Option(
        False,
        "--drop-old",
        help="Delete the previous collection after a successful switch (on a server the first time: right before the alias is created).",
    ),
    drop_failed: bool = typer.Option(
        False,
        "--drop-failed",
        help="Delete the new collection when it fails to build or verify (default: keep it for inspection).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Say what would be done (pages, chunks, where each text comes from); write nothing, fetch nothing.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    embed_batch: int = typer.Option(64, "--embed-batch", min=1, help="Chunks per model call (batches span pages)."),
    workers: int = typer.Option(
        8, "--workers", min=1, help="Concurrent re-fetches of pages whose text is not at hand."
    ),
    user_agent: str | None = typer.Option(None, "--user-agent", help="User-Agent header for re-fetches."),
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
        from ..edges.client_store import ClientStore

        from .checks import check_runs
        from .config_file import rules_of

        # Re-fetched pages are read as run reads them: the configuration's site rules.
        rules = rules_of(ctx)
        check_selectors(rules)
        emb = make_embedder(embedder, dimensions=embed_dimensions, concurrency=embed_concurrency)
        check_runs(emb)  # a remote server's key and the model's size, before anything is opened
        splitter = splitter_for(
            emb, chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap, max_chunk_tokens=max_chunk_tokens
        )
        cfg = ReindexConfig(
            alias=alias,
            drop_old=drop_old,
            drop_failed=drop_failed,
            dry_run=dry_run,
            embed_batch=embed_batch,
            workers=workers,
            wait_lock=wait_lock,
            site_rules=rules,
        )
        try:
            # The store is where the page state may live; the new collection is built through the catalog.
            with store_and_state(collection, qdrant_url, api_key, qdrant_path, state, missing=NO_STATE) as (store, st):
                catalog = (
                    ClientCatalog.of(store)
                    if isinstance(store, ClientStore)
                    else EdgeCatalog(qdrant_path, lock_wait=store_wait())
                )
                rep = run_reindex(
                    catalog,
                    collection,
                    state=st,
                    embedder=emb,
                    splitter=splitter,
                    cfg=cfg,
                    client_factory=lambda: make_client(user_agent=user_agent or DEFAULT_USER_AGENT, timeout=timeout),
                )
        except ReindexFailed as exc:
            if as_json:
                typer.echo(json.dumps(exc.report.to_dict(), indent=2))
            raise
        if as_json:
            typer.echo(json.dumps(rep.to_dict(), indent=2))
        else:
            for entry in rep.plan:
                typer.echo(
                    f"would reindex {entry['url']}  ({plural(entry['chunks'], 'chunk')}, text: {entry['source']})"
                )
            typer.echo(rep.summary())
        for e in rep.errors:
            log.warning("warning: %s", e["error"])
        return 0

    guarded(body)


def main() -> None:
    """The `pagesync` command. Ctrl-C is exit 130 at any moment; an exit while a model call
    still runs in a thread of its own skips the interpreter's finalisation (`exit_now`)."""
    from ..edges.threads import running

    PROCESS["hard_exit"] = True
    # An inherited SIG_IGN (a job started in the background) is kept: such a job ignores Ctrl-C.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupted_outside_a_body)
    try:
        app()
    except SystemExit as exc:
        if running():
            code = exc.code
            exit_now(code if isinstance(code, int) else (0 if code is None else 1))
        raise
