"""One pass from the command line: `run`'s options checked and built (`prepare_run`), and one
pass of them with its store and state opened and closed around it (`execute_run`); `run`
runs it once, `watch` at every wake-up."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..core.plural import plural
from ..errors import ConfigError
from .opening import is_fresh, open_state, open_store
from .options import check_clock, check_output, check_url, file_sites, parse_duration, parse_now, read_changed
from .output import DRY_FAILED, Progress, action_text, error_line, write_pass_metrics

if TYPE_CHECKING:
    from ..engine import PassConfig

__all__ = ["RunSetup", "RunOutcome", "prepare_run", "execute_run"]

log = logging.getLogger("pagesync")


@dataclass
class RunSetup:
    """What `run`'s options build, checked, before anything is opened: `run` runs one pass
    with it and `watch` one per wake-up (each with its own clock)."""

    cfg: "PassConfig"
    embedder: object | None  # None: the collection's own model, resolved once the store is open
    embed_dimensions: int | None
    embed_concurrency: int | None
    chunking: dict[str, int | None]  # --chunk-tokens, --chunk-overlap, --max-chunk-tokens
    collection: str
    qdrant_url: str | None
    api_key: str | None
    qdrant_path: Path
    state: str
    now_given: str | None
    report: Path | None
    metrics: Path | None
    user_agent: str | None
    timeout: float
    per_host: int
    ignore_robots: bool
    max_crawl_delay: float
    quiet: bool
    max_failed_share: float


@dataclass
class RunOutcome:
    code: int
    report: dict
    summary: str
    next_due: datetime | None = None
    still_due: int = 0
    status: dict = field(default_factory=dict)


def prepare_run(
    ctx: typer.Context,
    *,
    sitemap: list[str],
    url: list[str],
    crawl: list[str],
    max_pages: int,
    collection: str,
    qdrant_url: str | None,
    api_key: str | None,
    qdrant_path: Path,
    state: str,
    wait_lock: float,
    embedder: str | None,
    embed_dimensions: int | None,
    embed_concurrency: int | None,
    max_embed_tokens: int | None,
    chunk_tokens: int | None,
    chunk_overlap: int | None,
    max_chunk_tokens: int | None,
    full: bool,
    rebuild: bool,
    now: str | None,
    report: Path | None,
    dry_run: bool,
    workers: int,
    per_host: int,
    embed_batch: int,
    no_reuse: bool,
    user_agent: str | None,
    timeout: float,
    allow_host: list[str],
    allow_mass_delete: bool,
    max_delete_share: float,
    ignore_robots: bool,
    max_crawl_delay: float,
    policy: str,
    revisit_interval: str | None,
    max_fetches: int | None,
    max_chunks_per_page: int,
    bulk_edits: bool,
    include: list[str],
    exclude: list[str],
    no_default_excludes: bool,
    select: str | None,
    header: list[str],
    quiet: bool,
    max_failed_share: float,
    metrics: Path | None,
    changed: list[str],
    changed_from: str | None,
    **_: object,
) -> RunSetup:
    """`run`'s options (as `ctx.params` holds them; `watch` has the same and more) checked and
    built into a pass configuration and an embedder: a bad one is exit 2, nothing opened."""
    from embedders import make_embedder

    from ..engine import PassConfig

    from ..core.config import rule_set, sources

    sites = file_sites(ctx)
    src = sources(sitemap=sitemap, url=url, crawl=crawl, allow_host=allow_host, sites=sites)
    for s in src.sitemaps:
        check_url(s, "--sitemap")
    for u in src.urls:
        check_url(u, "--url")
    for u in src.crawl:
        check_url(u, "--crawl")
    # Flags over the file over the environment: click merged them (`load_config`).
    rules = rule_set(
        {
            "include": include,
            "exclude": exclude,
            "select": select,
            "header": header,
            "no_default_excludes": no_default_excludes,
        },
        sites,
        os.environ,
    )
    cfg = PassConfig(
        sitemaps=src.sitemaps,
        urls=src.urls,
        crawl=src.crawl,
        max_pages=max_pages,
        now=parse_now(now),
        full=full,
        dry_run=dry_run,
        rebuild=rebuild,
        embed_batch=embed_batch,
        workers=workers,
        allow_hosts=src.allow_hosts,
        allow_mass_delete=allow_mass_delete,
        max_delete_share=max_delete_share,
        policy=policy,
        max_fetches=max_fetches,
        bulk_edits=bulk_edits,
        wait_lock=wait_lock,
        reuse_vectors=not no_reuse,
        max_chunks_per_page=max_chunks_per_page,
        site_rules=rules,
        max_embed_tokens=max_embed_tokens,
        changed=[*changed, *read_changed(changed_from)],
        revisit_interval=parse_duration(revisit_interval, "--revisit-interval") if revisit_interval else None,
    )
    from ..core.policies import make_policy

    make_policy(policy, interval=cfg.revisit_interval)  # a bad policy or interval is exit 2 before anything opens
    cfg.check_rules()  # a --select that is no CSS selector: exit 2 too
    cfg.check_changed()  # a --changed URL outside the run's scope: exit 2, naming it
    check_output(report, "--report")
    check_output(metrics, "--metrics")
    # Without --embedder (nor the file's key) the collection's own model, once the store is open.
    emb = (
        make_embedder(embedder, dimensions=embed_dimensions, concurrency=embed_concurrency)
        if embedder is not None
        else None
    )
    if not (src.sitemaps or src.urls or src.crawl):
        # The state does not keep them, and the scope (which hosts may be fetched) is
        # theirs: without one, every due page would be skipped as out of scope.
        raise ConfigError(
            "nothing to sync: give --sitemap or --url (or --crawl, or a [[site]] in "
            "pagesync.toml; the page state does not keep them)"
        )
    from .checks import check_runs

    chunking = {"chunk_tokens": chunk_tokens, "chunk_overlap": chunk_overlap, "max_chunk_tokens": max_chunk_tokens}
    if emb is not None:
        from ..stages.chunks import splitter_for

        check_runs(emb)  # a model not installed, a remote key refused: exit 2 before the state is created
        splitter_for(emb, **chunking)  # sizes that cannot hold: exit 2 before anything opens
    return RunSetup(
        cfg=cfg,
        embedder=emb,
        embed_dimensions=embed_dimensions,
        embed_concurrency=embed_concurrency,
        chunking=chunking,
        collection=collection,
        qdrant_url=qdrant_url,
        api_key=api_key,
        qdrant_path=qdrant_path,
        state=state,
        now_given=now,
        report=report,
        metrics=metrics,
        user_agent=user_agent,
        timeout=timeout,
        per_host=per_host,
        ignore_robots=ignore_robots,
        max_crawl_delay=max_crawl_delay,
        quiet=quiet,
        max_failed_share=max_failed_share,
    )


def execute_run(setup: RunSetup, now: datetime, *, watching: bool = False) -> RunOutcome:
    """One pass of `setup` at `now`: the store and the state are opened for it and closed
    after it. `watching`: --metrics is left to the watcher (which adds its own figures), and
    the state's due times and freshness figures are read before it is closed."""
    from ..engine import arun_pass
    from ..stages.chunks import splitter_for
    from ..edges.fetcher import DEFAULT_USER_AGENT, Fetcher, make_client
    from .checks import collection_embedder

    cfg = replace(setup.cfg, now=now)
    dry_run, metrics, report = cfg.dry_run, setup.metrics, setup.report
    outcome = RunOutcome(code=0, report={}, summary="")
    with ExitStack() as stack:
        store = open_store(setup.collection, setup.qdrant_url, setup.api_key, setup.qdrant_path)
        stack.callback(store.close)
        emb = setup.embedder
        dims, conc = setup.embed_dimensions, setup.embed_concurrency
        if emb is None and is_fresh(setup.state, store):  # the default, checked before the state is created
            emb = collection_embedder(store, None, dimensions=dims, concurrency=conc)
        # Chunk sizes the model cannot take: exit 2, before the state is created when it can be.
        splitter = splitter_for(emb, **setup.chunking) if emb is not None else None
        # A dry run on a fresh setup must not even create the state (file or collection).
        st = stack.enter_context(open_state(setup.state, store, dry_run=dry_run))
        if emb is None:  # the last pass's model into this collection, else its points'
            emb = collection_embedder(store, st.last_run(), dimensions=dims, concurrency=conc)
        if splitter is None:
            splitter = splitter_for(emb, **setup.chunking)
        if watching:  # the watcher's next passes use the model this one resolved
            setup.embedder = emb
        if setup.now_given:
            check_clock(st, cfg.now, setup.now_given)
        progress = stack.enter_context(Progress(setup.quiet, dry_run))

        async def go():
            # The client lives and dies inside the pass's event loop.
            async with make_client(user_agent=setup.user_agent or DEFAULT_USER_AGENT, timeout=setup.timeout) as client:
                fetcher = Fetcher(
                    client,
                    per_host=setup.per_host,
                    respect_robots=not setup.ignore_robots,
                    max_crawl_delay=setup.max_crawl_delay,
                )
                return await arun_pass(
                    cfg, fetcher=fetcher, store=store, state=st, embedder=emb, splitter=splitter, on_progress=progress
                )

        rep = asyncio.run(go())
        data = rep.to_dict()
        if watching:  # the watcher's wake-up time and its --metrics figures, from the state as it is now
            from ..core.freshness import freshness

            pages = st.all_pages()
            still_due = st.due_urls(cfg.now)
            outcome.next_due = min(
                (p.due_at for p in pages if p.due_at is not None and p.due_at > cfg.now), default=None
            )
            outcome.still_due = len(still_due)
            outcome.status = freshness(pages, len(still_due), cfg.now)
        elif metrics:  # while the state is open: the freshness figures are read from it
            write_pass_metrics(metrics, data, st, cfg.now, setup.collection)
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(data, indent=2) + "\n")
    if dry_run:
        for c in rep.changes:
            chunks = f"; {plural(c['chunks'], 'chunk')}, {c['reused']} reused" if "reused" in c else ""
            after = f"; {DRY_FAILED}" if c["action"] == "failed" else ""
            typer.echo(f"{action_text(c['action'], True):<12}  {c['url']}  ({c['reason']}{chunks}{after})")
    failed = {c["url"] for c in rep.changes if c["action"] == "failed"} if dry_run else set()
    for e in rep.errors:
        log.warning("%s", error_line(e, failed))
    ok = rep.ok_within(setup.max_failed_share)
    budget = (
        (
            f" (within --max-failed-share {setup.max_failed_share:g}: {rep.pages_failed_share:.1%} of "
            f"{plural(rep.pages_visited, 'visited page')})"
        )
        if ok and rep.pages_failed
        else ""
    )
    outcome.summary = ("dry run: " if dry_run else "") + rep.summary() + budget
    if not watching:  # the watcher says it in its own line
        typer.echo(outcome.summary, err=True)
    outcome.code, outcome.report = (0 if ok else 1), data
    return outcome
