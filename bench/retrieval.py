#!/usr/bin/env python3
"""Does a RAG system find the answer? Retrieval quality per search mode and chunking, on four
real docs sites, and what keyword vectors cost a first pass.

Sites (each page served by demo/site_server.py with a generated sitemap, synced by a pass
with the bundled all-MiniLM-L6-v2 into the embedded store):
- Click's docs, built by Sphinx (dirhtml) from the Click repository (`--click-html DIR` for
  a build already made, else `--click-git-dir` + `--sphinx-build`: the build is made here);
- this project's docs, built by MkDocs (Material) from mkdocs.yml (`--mkdocs-html DIR`, else
  built here with the venv's mkdocs);
- FastAPI's English docs at a fixed commit of the FastAPI repository: built by its own tool
  (`--fastapi-html DIR`, default `make fastapi-docs`'s: `bench/build_fastapi_docs.sh` runs its
  `scripts/docs.py build-lang en`, zensical, the MkDocs Material team's MkDocs-compatible
  successor, with mkdocstrings for its 22 API reference pages), else
  rendered from `--fastapi-git-dir` as the replay benches render them (`load_fastapi`: Python-Markdown
  in a Material-like page; its reference pages hold their intro text only);
- HTTPX's docs at a fixed commit of the HTTPX repository, built by plain MkDocs with Material
  (`--httpx-html DIR`, default `make httpx-docs`'s: `bench/build_httpx_docs.sh` runs `mkdocs build`
  with the tools its requirements.txt pins; its `/api/` page is mkautodoc's); skipped without it.

A question set of our own for each (`QUESTIONS`): questions a user would ask and identifier
queries (`CliRunner`, `--max-failed-share`, `OAuth2PasswordRequestForm`), each with the pages
that answer it (all of them: a miss whose top hit answers too had that page added). A question
is answered at rank r when the r-th chunk hit is on one of its pages. Figures, per site,
chunking and mode (`hybrid`, `dense`, `keyword`, and the hybrid fusion without the page lift):
hit@1, hit@5 and MRR@10. The chunkings: the
checkout's default splitter and, when that differs, the splitter at 1,000 characters (the
chunking before token-sized chunks), searched dense: the baseline.

First pass with and without keyword vectors: `pagesync run` on the Click site in a fresh
process each, `--rounds` times each (alternating which goes first), with the store's keyword vectors switched off for the baseline (points
written dense only: no BM25 computed, no sparse index written); wall time and peak RSS
(VmHWM), as a ratio.

    .venv/bin/python bench/retrieval.py [--click-html DIR | --click-git-dir DIR --sphinx-build PATH]
        [--mkdocs-html DIR] [--fastapi-html DIR | --fastapi-git-dir DIR] [--httpx-html DIR] [--rounds N]
        [--out bench/results/retrieval.md]

Writes bench/results/retrieval.md and .json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# "hybrid, fusion only": the fused ranking before `Collection.search` lifts hits by their page.
FUSED = "hybrid, fusion only"
MODES = ("hybrid", FUSED, "dense", "keyword")
# A bare clone of https://github.com/pallets/click (git clone --bare ...), or CLICK_GIT_DIR.
CLICK_GIT = Path(os.environ.get("CLICK_GIT_DIR", "/work/.mirror/pallets+click/repo"))
# A bare clone of https://github.com/fastapi/fastapi, or FASTAPI_GIT_DIR; its docs at a fixed commit.
FASTAPI_GIT = Path(os.environ.get("FASTAPI_GIT_DIR", "/work/.mirror/fastapi+fastapi/repo"))
FASTAPI_COMMIT = "c3f316b7e814667e8ee81e03a7330d00ee61e45c"  # 2026-08-19
HTTPX_COMMIT = "ae1b9f66238f75ced3ced5e4485408435de10768"  # 2025-12-10, bench/build_httpx_docs.sh's

# (query, kind, answering pages). kind: "question" (as a user asks it) or "identifier".
QUESTIONS: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "click": [
        ("How do I restrict an option to a fixed set of values?", "question", ("/parameter-types/",)),
        ("How do I enable shell completion for bash?", "question", ("/shell-completion/",)),
        ("How do I test a Click command and check its output?", "question", ("/testing/",)),
        (
            "How can an option take its value from an environment variable?",
            "question",
            ("/options/", "/commands-and-groups/"),
        ),
        ("How do I ask the user for a password?", "question", ("/option-decorators/", "/prompts/")),
        ("How do I add a --version option to my command?", "question", ("/option-decorators/",)),
        (
            "How do I ask the user to confirm before a dangerous action?",
            "question",
            ("/prompts/", "/option-decorators/"),
        ),
        ("How do I make a boolean flag with an on and an off switch?", "question", ("/options/",)),
        ("How do I accept a file as a command line argument?", "question", ("/handling-files/", "/arguments/")),
        ("How do I put several commands under one group?", "question", ("/commands-and-groups/",)),
        (
            "How do I pass an object from a group to its subcommands?",
            "question",
            ("/commands-and-groups/", "/commands/", "/complex/"),
        ),
        ("How do I chain several subcommands in one invocation?", "question", ("/commands/",)),
        ("How do I show the default values in the help page?", "question", ("/documentation/",)),
        ("How do I print colored text to the terminal?", "question", ("/utils/",)),
        ("How do I show a progress bar for a long loop?", "question", ("/utils/",)),
        ("How do I open the user's text editor from my program?", "question", ("/utils/",)),
        ("How do I load subcommands lazily to start faster?", "question", ("/complex/", "/commands-and-groups/")),
        ("How do I validate a parameter's value in a callback?", "question", ("/advanced/",)),
        (
            "What exit code does Click return on a usage error?",
            "question",
            ("/exceptions/", "/command-line-reference/"),
        ),
        ("How do I accept only integers within a range?", "question", ("/parameter-types/",)),
        ("How do I let an option be given several times?", "question", ("/options/",)),
        ("How do I count how often a flag is given, like -vvv?", "question", ("/options/",)),
        (
            "How do I install my Click script as a command with an entry point?",
            "question",
            ("/entry-points/", "/quickstart/"),
        ),
        ("How do I write my own parameter type?", "question", ("/parameter-types/",)),
        ("How do I run a test inside a temporary directory?", "question", ("/testing/",)),
        ("How do I define aliases for commands?", "question", ("/extending-click/",)),
        ("Where should my application store its configuration files?", "question", ("/utils/",)),
        ("CliRunner", "identifier", ("/testing/", "/api/")),
        ("auto_envvar_prefix", "identifier", ("/options/", "/commands-and-groups/")),
        ("click.Choice", "identifier", ("/parameter-types/", "/api/")),
        ("IntRange", "identifier", ("/parameter-types/", "/api/")),
        ("isolated_filesystem", "identifier", ("/testing/", "/api/")),
        ("confirmation_option", "identifier", ("/option-decorators/", "/api/")),
        ("pass_context", "identifier", ("/commands-and-groups/", "/commands/", "/api/")),
        ("click.launch", "identifier", ("/utils/", "/api/")),
        ("get_app_dir", "identifier", ("/utils/", "/api/")),
        ("chain=True", "identifier", ("/commands/",)),
        ("is_eager", "identifier", ("/advanced/", "/options/", "/api/")),
        ("show_default", "identifier", ("/documentation/", "/options/", "/api/")),
        ("click.progressbar", "identifier", ("/utils/", "/api/")),
        ("_FOO_BAR_COMPLETE=bash_source", "identifier", ("/shell-completion/",)),
        ("standalone_mode", "identifier", ("/exceptions/", "/api/")),
        ("ParamType.convert", "identifier", ("/parameter-types/", "/api/")),
    ],
    "pagesync": [
        # (/commands/search/ is not asked for: the default excludes' `*/search/` keeps it out of the index.)
        ("How do I see which pages are tracked and when they are due?", "question", ("/commands/status/",)),
        (
            "How do I switch to another embedding model without downtime?",
            "question",
            ("/tasks/change-model/", "/commands/reindex/"),
        ),
        (
            "How do I move the embedded collection to a Qdrant server?",
            "question",
            ("/commands/export/", "/commands/import/", "/concepts/stores/", "/tasks/frameworks/"),
        ),
        ("How do I run a sync every night in CI?", "question", ("/tasks/nightly-ci/",)),
        ("How do I read the collection from LangChain?", "question", ("/tasks/frameworks/", "/tasks/read-api/")),
        (
            "How do I repair a collection that no longer matches the site?",
            "question",
            ("/tasks/audit-and-repair/", "/commands/audit/"),
        ),
        ("How are vectors reused when only part of a page changes?", "question", ("/concepts/reuse/",)),
        ("How does pagesync decide when to visit a page again?", "question", ("/concepts/scheduling/",)),
        ("How do I index a site that has no sitemap?", "question", ("/concepts/crawling/",)),
        (
            "How do I index only the main content element of each page?",
            "question",
            ("/concepts/extraction/", "/concepts/sites/"),
        ),
        (
            "How do I send an authorization header to a private docs site?",
            "question",
            ("/concepts/sites/", "/commands/run/"),
        ),
        ("What fields does the run report have?", "question", ("/report/",)),
        ("How do I use an OpenAI embedding model?", "question", ("/concepts/embedders/",)),
        ("What happens if a pass is killed halfway?", "question", ("/concepts/write-order/", "/concepts/pass/")),
        ("--max-failed-share", "identifier", ("/commands/run/", "/configuration/", "/report/", "/operations/")),
        ("pages_not_modified", "identifier", ("/report/", "/reference/api/")),
        ("open_collection", "identifier", ("/tasks/read-api/", "/tasks/library/", "/reference/api/")),
        ("--with-vectors", "identifier", ("/commands/export/", "/configuration/")),
        (
            "tokens_saved_by_reuse",
            "identifier",
            ("/report/", "/concepts/reuse/", "/concepts/embedders/", "/reference/api/"),
        ),
        ("--max-pages", "identifier", ("/commands/run/", "/concepts/crawling/", "/configuration/")),
        ("PagesyncRetriever", "identifier", ("/tasks/read-api/", "/tasks/frameworks/")),
        ("--rebuild", "identifier", ("/commands/run/", "/operations/", "/concepts/pass/", "/configuration/")),
    ],
    # FastAPI's English docs (`load_fastapi`); for an identifier its reference page counts too.
    "fastapi": [
        ("How do I declare a request body with a Pydantic model?", "question", ("/tutorial/body/",)),
        ("How do I read query parameters with default values?", "question", ("/tutorial/query-params/",)),
        (
            "How do I validate that a query string is at most 50 characters long?",
            "question",
            ("/tutorial/query-params-str-validations/",),
        ),
        ("How do I make a path parameter accept only a fixed set of values?", "question", ("/tutorial/path-params/",)),
        (
            "How do I return a 201 status code when an item is created?",
            "question",
            ("/tutorial/response-status-code/", "/advanced/additional-status-codes/"),
        ),
        ("How do I return a 404 error with a message?", "question", ("/tutorial/handling-errors/",)),
        ("How do I upload a file?", "question", ("/tutorial/request-files/",)),
        ("How do I receive form fields instead of JSON?", "question", ("/tutorial/request-forms/",)),
        ("How do I let a frontend on another domain call my API?", "question", ("/tutorial/cors/",)),
        ("How do I run a task after returning the response?", "question", ("/tutorial/background-tasks/",)),
        ("How do I split my application into multiple files?", "question", ("/tutorial/bigger-applications/",)),
        (
            "How do I open a database session per request and close it afterwards?",
            "question",
            ("/tutorial/dependencies/dependencies-with-yield/", "/tutorial/sql-databases/"),
        ),
        ("How do I test my FastAPI app?", "question", ("/tutorial/testing/",)),
        (
            "How do I keep the password out of the data my endpoint returns?",
            "question",
            ("/tutorial/response-model/", "/tutorial/extra-models/"),
        ),
        ("How do I hash passwords and issue JWT tokens?", "question", ("/tutorial/security/oauth2-jwt/",)),
        ("How do I get the current user from the token?", "question", ("/tutorial/security/get-current-user/",)),
        (
            "How do I serve static files like images and CSS?",
            "question",
            ("/tutorial/static-files/", "/how-to/custom-docs-ui-assets/"),
        ),
        ("How do I connect to a SQL database?", "question", ("/tutorial/sql-databases/",)),
        ("How do I add a header to every response with a middleware?", "question", ("/tutorial/middleware/",)),
        ("How do I run my app in a Docker container?", "question", ("/deployment/docker/",)),
        ("How do I run several worker processes in production?", "question", ("/deployment/server-workers/",)),
        ("How do I read my app's settings from environment variables?", "question", ("/advanced/settings/",)),
        ("How do I talk to the browser over WebSockets?", "question", ("/advanced/websockets/",)),
        ("How do I set a cookie in the response?", "question", ("/advanced/response-cookies/",)),
        ("How do I return HTML instead of JSON?", "question", ("/advanced/custom-response/",)),
        ("How do I replace a dependency with a fake one in tests?", "question", ("/advanced/testing-dependencies/",)),
        ("How do I run code when the app starts up and shuts down?", "question", ("/advanced/events/",)),
        ("How do I change the title and description shown in the API docs?", "question", ("/tutorial/metadata/",)),
        ("How do I run my app behind a proxy that adds a path prefix?", "question", ("/advanced/behind-a-proxy/",)),
        ("When should I use async def and when plain def?", "question", ("/async/",)),
        ("How do I show an example request body in the docs?", "question", ("/tutorial/schema-extra-example/",)),
        ("How do I update only some fields of an item with PATCH?", "question", ("/tutorial/body-updates/",)),
        ("OAuth2PasswordRequestForm", "identifier", ("/tutorial/security/simple-oauth2/", "/reference/security/")),
        ("OAuth2PasswordBearer", "identifier", ("/tutorial/security/first-steps/", "/reference/security/")),
        ("Depends", "identifier", ("/tutorial/dependencies/", "/reference/dependencies/")),
        ("BackgroundTasks", "identifier", ("/tutorial/background-tasks/", "/reference/background/")),
        ("HTTPException", "identifier", ("/tutorial/handling-errors/", "/reference/exceptions/")),
        ("RequestValidationError", "identifier", ("/tutorial/handling-errors/", "/reference/exceptions/")),
        ("UploadFile", "identifier", ("/tutorial/request-files/", "/reference/uploadfile/")),
        ("APIRouter", "identifier", ("/tutorial/bigger-applications/", "/reference/apirouter/")),
        ("CORSMiddleware", "identifier", ("/tutorial/cors/", "/reference/middleware/")),
        ("TestClient", "identifier", ("/tutorial/testing/", "/reference/testclient/")),
        ("response_model_exclude_unset", "identifier", ("/tutorial/response-model/",)),
        ("jsonable_encoder", "identifier", ("/tutorial/encoder/", "/reference/encoders/")),
        ("dependency_overrides", "identifier", ("/advanced/testing-dependencies/",)),
        ("StaticFiles", "identifier", ("/tutorial/static-files/", "/reference/staticfiles/")),
        ("root_path", "identifier", ("/advanced/behind-a-proxy/",)),
        ("BaseSettings", "identifier", ("/advanced/settings/",)),
        ("status.HTTP_201_CREATED", "identifier", ("/tutorial/response-status-code/", "/reference/status/")),
        ("SecurityScopes", "identifier", ("/advanced/security/oauth2-scopes/",)),
    ],
    # HTTPX's docs (`--httpx-html`), written from its markdown before any search was run; an
    # identifier's `/api/` page counts where that page documents it.
    "httpx": [
        ("How do I set a timeout for a request?", "question", ("/advanced/timeouts/", "/quickstart/")),
        ("How do I retry failed connections?", "question", ("/advanced/transports/", "/third_party_packages/")),
        ("How do I send a JSON body in a POST request?", "question", ("/quickstart/",)),
        (
            "How can I upload several files under the same form field in one request?",
            "question",
            ("/advanced/clients/",),
        ),
        (
            "How do I skip certificate verification for a site with an expired or self-signed cert?",
            "question",
            ("/advanced/ssl/",),
        ),
        ("Can httpx use the operating system's certificate store instead of certifi?", "question", ("/advanced/ssl/",)),
        ("How do I present a client certificate to the server for mutual TLS?", "question", ("/advanced/ssl/",)),
        ("How do I send my requests through a SOCKS5 proxy?", "question", ("/advanced/proxies/",)),
        (
            "How can I send HTTP and HTTPS traffic to two different proxies?",
            "question",
            ("/advanced/proxies/", "/advanced/transports/"),
        ),
        (
            "How do I make some hosts bypass the proxy?",
            "question",
            ("/advanced/transports/", "/environment_variables/"),
        ),
        (
            "My HTTPS requests through a proxy fail with 'The handshake operation timed out', what's wrong?",
            "question",
            ("/troubleshooting/",),
        ),
        ("How do I cap the number of connections kept open in the pool?", "question", ("/advanced/resource-limits/",)),
        (
            "How can I run a function on every request and response the client makes, e.g. to log them?",
            "question",
            ("/advanced/event-hooks/",),
        ),
        ("How do I turn on debug output to see what happens at the connection level?", "question", ("/logging/",)),
        (
            "Can I get a callback for low-level events like TCP connect and TLS handshake of a request?",
            "question",
            ("/advanced/extensions/",),
        ),
        ("How do I make requests concurrently with asyncio?", "question", ("/async/",)),
        ("Does httpx work with trio?", "question", ("/async/",)),
        ("How do I turn on HTTP/2?", "question", ("/http2/",)),
        (
            "How can I tell whether the response actually came over HTTP/2 or HTTP/1.1?",
            "question",
            ("/http2/", "/advanced/extensions/"),
        ),
        ("How do I call my Flask app from tests without starting a server?", "question", ("/advanced/transports/",)),
        (
            "How can I return canned responses in tests instead of hitting the network?",
            "question",
            ("/advanced/transports/", "/third_party_packages/"),
        ),
        ("How do I talk to the Docker daemon over its unix socket?", "question", ("/advanced/transports/",)),
        ("What should I use instead of requests.Session?", "question", ("/compatibility/", "/advanced/clients/")),
        (
            "Why doesn't httpx follow redirects by itself like requests does?",
            "question",
            ("/compatibility/", "/quickstart/"),
        ),
        ("How do I avoid repeating the host name in every request URL?", "question", ("/advanced/clients/",)),
        (
            "How do I guess the character encoding of pages that don't declare a charset?",
            "question",
            ("/advanced/text-encodings/",),
        ),
        ("How do I show a progress bar while downloading a big file?", "question", ("/advanced/clients/",)),
        (
            "What's the best way to catch both network failures and 4xx/5xx responses?",
            "question",
            ("/quickstart/", "/exceptions/"),
        ),
        (
            "How do I write an auth class that refreshes an expired access token and retries?",
            "question",
            ("/advanced/authentication/",),
        ),
        ("Can httpx pick up login credentials from my .netrc file?", "question", ("/advanced/authentication/",)),
        (
            "How do I stop httpx from reading proxy settings from the environment?",
            "question",
            ("/environment_variables/",),
        ),
        (
            "How do I connect to a server by IP address but still verify TLS against its hostname?",
            "question",
            ("/advanced/extensions/",),
        ),
        ("How do I install httpx with support for brotli and zstd compressed responses?", "question", ("/",)),
        ("How do I remove a client-wide header for just one request?", "question", ("/advanced/clients/",)),
        (
            "Is there a package that adds HTTP caching to httpx?",
            "question",
            ("/third_party_packages/", "/compatibility/"),
        ),
        ("How do I run the project's tests before opening a pull request?", "question", ("/contributing/",)),
        (
            "How should I debug requests through a local mitmproxy while developing httpx?",
            "question",
            ("/contributing/",),
        ),
        ("What behaviour is expected from people taking part in the project?", "question", ("/code_of_conduct/",)),
        ("AsyncClient", "identifier", ("/async/", "/api/")),
        ("follow_redirects", "identifier", ("/quickstart/", "/compatibility/", "/api/")),
        ("max_keepalive_connections", "identifier", ("/advanced/resource-limits/",)),
        ("DigestAuth", "identifier", ("/advanced/authentication/", "/quickstart/")),
        ("NetRCAuth", "identifier", ("/advanced/authentication/",)),
        ("MockTransport", "identifier", ("/advanced/transports/",)),
        ("ASGITransport", "identifier", ("/advanced/transports/",)),
        ("HTTPStatusError", "identifier", ("/quickstart/", "/exceptions/")),
        ("PoolTimeout", "identifier", ("/advanced/timeouts/", "/exceptions/")),
        ("RemoteProtocolError", "identifier", ("/exceptions/",)),
        ("trust_env", "identifier", ("/environment_variables/", "/api/")),
        ("default_encoding", "identifier", ("/advanced/text-encodings/", "/api/")),
        ("event_hooks", "identifier", ("/advanced/event-hooks/",)),
        ("sni_hostname", "identifier", ("/advanced/extensions/",)),
        ("SSL_CERT_FILE", "identifier", ("/environment_variables/", "/advanced/ssl/")),
        ("NO_PROXY", "identifier", ("/environment_variables/",)),
        ("num_bytes_downloaded", "identifier", ("/advanced/clients/",)),
        ("requires_response_body", "identifier", ("/advanced/authentication/",)),
        ("next_request", "identifier", ("/compatibility/", "/quickstart/", "/api/")),
        ("max_redirects", "identifier", ("/api/",)),
    ],
}


# ------------------------------------------------------------------------------ the sites
def build_click(git_dir: Path, sphinx_build: str, out: Path) -> Path:
    """Click's docs at the mirror's HEAD, built by Sphinx (dirhtml: /options/ and so on)."""
    src = out.parent / "click-src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "HEAD"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    subprocess.run([sphinx_build, "-q", "-b", "dirhtml", str(src / "docs"), str(out)], check=True, capture_output=True)
    return out


_EXAMPLE = re.compile(r"^\{\*\s*(?P<path>\S+)(?:\s+ln\[(?P<ln>[\d:,]+)\])?[^*]*\*\}[ \t]*$", re.M)


def load_fastapi(git_dir: Path, commit: str = FASTAPI_COMMIT):
    """FastAPI's English docs at `commit` as a demo Site, rendered the way the replay benches
    render them (`replay_docs_history.Renderer`: Python-Markdown with the site's extensions and
    its `{! include !}`s expanded, in a Material-like page with header, tabs, a sidebar of every
    page, table of contents and footer), and each `{* example.py ln[..] hl[..] *}` as the code block
    the site shows (the file named, its `ln` lines; the site adds tabs of the file's other Python
    versions). Its reference pages are rendered by mkdocstrings on the real site; here they hold
    their intro text only."""
    sys.path.insert(0, str(REPO / "bench"))
    from demo.site_server import Site
    from replay_docs_history import Git, Renderer

    git = Git(str(git_dir))

    def code(m: re.Match) -> str:
        path = os.path.normpath(os.path.join("docs/en", m["path"]))  # mkdocs.yml's directory
        lines = (git.blob(commit, path) or b"").decode("utf-8", "replace").splitlines()
        if m["ln"]:
            spans = [
                tuple(int(x) for x in span.split(":")) if ":" in span else (int(span),) * 2
                for span in m["ln"].split(",")
            ]
            lines = [ln for a, b in spans for ln in lines[a - 1 : b]]
        return "```python\n" + "\n".join(lines) + "\n```"

    try:
        renderer = Renderer(git, "docs/en/docs")
        pages = [
            pg
            for pg in renderer.pages(commit, [], None)
            if not pg.src.rsplit("/", 1)[-1].startswith(("_", "translation-banner"))
        ]
        for pg in pages:
            pg.markdown = _EXAMPLE.sub(code, pg.markdown)
        html = renderer.render_site(pages, "")
    finally:
        git.close()
    site = Site()
    for url, body in html.items():
        site.set(url, body)
    return site


def build_mkdocs(out: Path) -> Path:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    subprocess.run(
        [mkdocs, "build", "-q", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)],
        check=True,
        capture_output=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return out


# Not pages of the docs: the generators' own (404, index, search, assets) and, in FastAPI's build,
# its translation banner and a test page (`_llm-test`), which its nav does not list.
SKIP = ("404", "genindex", "search", "assets", "translation-banner")


def load_site(html: Path):
    """Every page of a built site (`<dir>/index.html` as `/<dir>/`) in a demo Site."""
    from demo.site_server import Site

    site = Site()
    for f in sorted(html.rglob("index.html")):
        rel = f.parent.relative_to(html)
        if rel.parts and (rel.parts[0] in SKIP or rel.parts[0].startswith("_")):  # Sphinx's _static, _sources
            continue
        site.set("/" + "".join(f"{p}/" for p in rel.parts), f.read_bytes())
    return site


# ------------------------------------------------------------------------------ retrieval
def sync_site(site, work: Path, splitter: Any, embedder: Any) -> dict[str, Any]:
    """One first pass of the site into a fresh embedded store; its report."""
    from demo.site_server import SiteServer
    from sync.edges.fetcher import Fetcher, make_client
    from sync.edges.state import StateDB
    from sync.edges.edge_store import EdgeStore
    from sync.engine import PassConfig, arun_pass

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with SiteServer(site) as server:
        cfg = PassConfig(sitemaps=[server.url("/sitemap.xml")], now=datetime.now(timezone.utc))
        store = EdgeStore(work / "qdrant", "pages")
        try:
            with StateDB(work / "state.db") as st:

                async def go():
                    async with make_client(timeout=30) as client:
                        return await arun_pass(
                            cfg, fetcher=Fetcher(client), store=store, state=st, embedder=embedder, splitter=splitter
                        )

                report = asyncio.run(go())
        finally:
            store.close()
        base = server.base_url
    return {"report": report.to_dict(), "base": base}


def score(ranked_urls: list[str], answers: tuple[str, ...], base: str) -> int | None:
    """The 1-based rank of the first hit on an answering page, or None (not in these hits)."""
    wanted = {base + a for a in answers}
    return next((i for i, u in enumerate(ranked_urls, 1) if u in wanted), None)


def evaluate(
    work: Path, base: str, questions: list[tuple[str, str, tuple[str, ...]]], embedder: Any, modes: tuple[str, ...]
) -> dict[str, Any]:
    from sync.commands.read import open_collection
    from sync.edges.keywords import query_vector

    out: dict[str, Any] = {}
    with open_collection(work / "qdrant", "pages", embedder=embedder, keep_open=True) as coll:
        for mode in modes:
            rows = []
            for query, kind, answers in questions:
                if mode == FUSED:  # the store's fusion as it comes, without the search's page lift
                    found = coll.store.search(
                        embedder.embed([query])[0], limit=10, keywords=query_vector(query), mode="hybrid"
                    )
                    urls = [str(p.get("url", "")) for _, p in found]
                else:
                    urls = [h.url for h in coll.search(query, limit=10, mode=mode)]
                rank = score(urls, answers, base)
                rows.append({"query": query, "kind": kind, "rank": rank, "top": urls[0][len(base) :] if urls else None})
            out[mode] = {
                "all": metrics(rows),
                "question": metrics([r for r in rows if r["kind"] == "question"]),
                "identifier": metrics([r for r in rows if r["kind"] == "identifier"]),
                "rows": rows,
            }
    return out


def metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    n = max(1, len(rows))
    ranks = [r["rank"] for r in rows]
    return {
        "n": len(rows),
        "hit@1": sum(r == 1 for r in ranks) / n,
        "hit@5": sum(r is not None and r <= 5 for r in ranks) / n,
        "mrr@10": sum(1 / r for r in ranks if r is not None and r <= 10) / n,
    }


# ------------------------------------------------------------------------------ first-pass cost
CHILD = r"""
import atexit, json, sys, time
out, keywords, args = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
t0 = time.perf_counter()
def done():
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    open(out, "w").write(json.dumps({"seconds": time.perf_counter() - t0, "hwm_mb": hwm / 1024}))
atexit.register(done)
if not keywords:  # the baseline: points written dense only (no BM25 computed, no sparse index written)
    import sync.edges.edge_store as s
    s.EdgeStore.has_keywords = lambda self: False
from sync.commands.cli import app
app(args, prog_name="pagesync")
"""


def first_pass(site, work: Path, keywords: bool) -> dict[str, Any]:
    from demo.site_server import SiteServer

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with SiteServer(site) as server:
        args = [
            "run",
            "--sitemap",
            server.url("/sitemap.xml"),
            "--qdrant-path",
            str(work / "qdrant"),
            "--state",
            str(work / "state.db"),
            "--report",
            str(work / "report.json"),
            "--allow-host",
            server.base_url.split("://", 1)[1],
        ]
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(work / "cost.json"), "1" if keywords else "0", *args],
            env=env,
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise SystemExit(f"pagesync run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    cost = json.loads((work / "cost.json").read_text())
    report = json.loads((work / "report.json").read_text())
    return {**cost, "chunks_written": report["chunks_written"], "pages_added": report["pages_added"]}


# ------------------------------------------------------------------------------ main
def splitters(embedder: Any) -> list[tuple[str, Any]]:
    """(label, splitter): the one a pass makes for `embedder` (`splitter_for`, its defaults),
    and 1,000 characters when that differs."""
    from chunking.split import Splitter
    from sync.stages.chunks import splitter_for

    default = splitter_for(embedder)
    out = [(f"default ({default.settings})", default)]
    try:
        chars = Splitter(chunk_size=1000, chunk_overlap=100)
    except TypeError:  # a splitter that no longer takes characters
        return out
    if chars.settings != default.settings:
        out.append((f"1,000 chars ({chars.settings})", chars))
    return out


def render(result: dict[str, Any]) -> str:
    lines = [
        "# Retrieval quality per search mode and chunking",
        "",
        f"Measured {result['date']} by `bench/retrieval.py` (the bundled all-MiniLM-L6-v2, the embedded store, "
        "chunk hits ranked by `Collection.search`, a question answered at the first hit on one of its pages).",
        "",
        "| site | chunking | mode | queries | hit@1 | hit@5 | MRR@10 | questions hit@1 | identifiers hit@1 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for site, by_chunking in result["sites"].items():
        for chunking, res in by_chunking["chunkings"].items():
            for mode, m in res["modes"].items():
                a, q, i = m["all"], m["question"], m["identifier"]
                how = "" if by_chunking.get("built", True) else ", rendered"
                lines.append(
                    f"| {site}{how} ({res['chunks']} chunks) | {chunking} | {mode} | {a['n']} | {a['hit@1']:.0%} | "
                    f"{a['hit@5']:.0%} | {a['mrr@10']:.3f} | {q['hit@1']:.0%} | {i['hit@1']:.0%} |"
                )
    c = result.get("first_pass")
    if c:
        w, wo = c["with"], c["without"]
        lines += [
            "",
            f"## A first pass with keyword vectors against one without (Click, fresh processes, the fastest "
            f"of {len(c['rounds']['with'])} rounds each, alternating; peak RSS the largest)",
            "",
            "| | seconds | peak RSS MB | chunks |",
            "|---|---|---|---|",
            f"| with keyword vectors | {w['seconds']:.1f} | {w['hwm_mb']:.0f} | {w['chunks_written']} |",
            f"| without | {wo['seconds']:.1f} | {wo['hwm_mb']:.0f} | {wo['chunks_written']} |",
            f"| ratio | {c['time_ratio']:.3f} | {c['memory_ratio']:.3f} | |",
        ]
    lines += ["", "## Misses (hybrid, default chunking): query, rank of the first right page, top hit", ""]
    for site, by_chunking in result["sites"].items():
        res = next(iter(by_chunking["chunkings"].values()))
        for r in res["modes"].get("hybrid", {}).get("rows", []):
            if r["rank"] != 1:
                lines.append(f"- {site}: `{r['query']}`: {r['rank'] or '>10'}, top {r['top']}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--click-html", type=Path, help="Click's docs built already (sphinx dirhtml)")
    ap.add_argument("--click-git-dir", type=Path, default=CLICK_GIT)
    ap.add_argument(
        "--sphinx-build",
        help="to build Click's docs (default: the venv's, else PATH's)",
        default=shutil.which("sphinx-build", path=str(Path(sys.executable).parent)) or shutil.which("sphinx-build"),
    )
    ap.add_argument("--mkdocs-html", type=Path, help="this project's docs built already (mkdocs build)")
    built = REPO / ".bench-sites" / "fastapi" / "html"  # `make fastapi-docs`
    ap.add_argument(
        "--fastapi-html",
        type=Path,
        default=built if built.is_dir() else None,
        help=f"FastAPI's English docs built by its own tool at {FASTAPI_COMMIT[:12]} (default: `make fastapi-docs`'s)",
    )
    ap.add_argument(
        "--fastapi-git-dir",
        type=Path,
        default=FASTAPI_GIT,
        help=f"a clone of FastAPI's repository (its docs at {FASTAPI_COMMIT[:12]})",
    )
    httpx_built = REPO / ".bench-sites" / "httpx" / "html"  # `make httpx-docs`
    ap.add_argument(
        "--httpx-html",
        type=Path,
        default=httpx_built if httpx_built.is_dir() else None,
        help=f"HTTPX's docs built by MkDocs at {HTTPX_COMMIT[:12]} (default: `make httpx-docs`'s)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "retrieval.md")
    ap.add_argument(
        "--rounds", type=int, default=2, help="first passes with and without keyword vectors, each (0: not measured)"
    )
    args = ap.parse_args()

    from embedders import make_embedder

    tmp = Path(tempfile.mkdtemp(prefix="pagesync-retrieval-"))
    sites: dict[str, Path] = {}
    if args.click_html:
        sites["click"] = args.click_html
    elif args.sphinx_build and args.click_git_dir.exists():
        sites["click"] = build_click(args.click_git_dir, args.sphinx_build, tmp / "click-html")
    else:
        print("Click's docs: skipped (no --click-html, and no sphinx-build or Click repository)", file=sys.stderr)
    sites["pagesync"] = args.mkdocs_html or build_mkdocs(tmp / "mkdocs-html")
    if args.fastapi_html:
        sites["fastapi"] = args.fastapi_html
    elif args.fastapi_git_dir.exists():
        sites["fastapi"] = args.fastapi_git_dir
    else:
        print(f"FastAPI's docs: skipped (no repository at {args.fastapi_git_dir})", file=sys.stderr)
    if args.httpx_html:
        sites["httpx"] = args.httpx_html
    else:
        print("HTTPX's docs: skipped (no --httpx-html, and no `make httpx-docs` build)", file=sys.stderr)

    embedder = make_embedder(None)
    result: dict[str, Any] = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "sites": {}}
    for name, html in sites.items():
        site = load_fastapi(html) if name == "fastapi" and not args.fastapi_html else load_site(html)
        for _, _, answers in QUESTIONS[name]:
            for a in answers:
                assert a in site.resources, f"{name}: no page {a}"
        built = name != "fastapi" or bool(args.fastapi_html)
        by: dict[str, Any] = {"pages": len(site.pages()), "built": built, "chunkings": {}}
        for i, (label, splitter) in enumerate(splitters(embedder)):
            synced = sync_site(site, tmp / f"{name}-{i}", splitter, embedder)
            modes = MODES if i == 0 else ("dense",)
            by["chunkings"][label] = {
                "chunks": synced["report"]["chunks_written"],
                "modes": evaluate(tmp / f"{name}-{i}", synced["base"], QUESTIONS[name], embedder, modes),
            }
            print(
                f"{name} {label}: "
                + ", ".join(f"{m} hit@1 {r['all']['hit@1']:.0%}" for m, r in by["chunkings"][label]["modes"].items()),
                flush=True,
            )
        result["sites"][name] = by
    if args.rounds and "click" in sites:
        site = load_site(sites["click"])
        # Rounds alternate which goes first (a shared machine's load drifts); each side's fastest.
        rounds: dict[str, list[dict[str, Any]]] = {"with": [], "without": []}
        for r in range(args.rounds):
            for k in ("without", "with") if r % 2 == 0 else ("with", "without"):
                rounds[k].append(first_pass(site, tmp / f"cost-{k}", k == "with"))
        best = {k: min(v, key=lambda x: x["seconds"]) for k, v in rounds.items()}
        result["first_pass"] = {
            **best,
            "rounds": rounds,
            "time_ratio": best["with"]["seconds"] / best["without"]["seconds"],
            "memory_ratio": (max(x["hwm_mb"] for x in rounds["with"]) / max(x["hwm_mb"] for x in rounds["without"])),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(result))
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    print(args.out.read_text())
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
