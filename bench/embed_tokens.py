#!/usr/bin/env python3
"""Tokens sent to a real embeddings server per week of FastAPI's docs history, and what they cost.

FastAPI's English docs, rendered day by day from their git history (the renderer of
`replay_docs_history.py`), served by nginx on 127.0.0.1. Each day one `pagesync run
--embedder openai:all-MiniLM-L6-v2` against infinity-emb (a real OpenAI-compatible server,
`demo/infinity_server.py`) through a recording proxy (`demo/embed_proxy.py`): the tokens
are what the server counted (`usage.total_tokens`), checked against the report's
`tokens_embedded`. Compared on the same days and the same chunk texts (the chunks pagesync
holds after each day's pass):
- a nightly full re-embed: every chunk of the site, every night;
- LangChain's `index()` run nightly with `cleanup="incremental"` (langchain_core's record
  manager and in-memory vector store; documents = those chunks, `source` = URL), through an
  embedding that counts tokens with the model's own tokenizer, the count the server uses
  (`add_special_tokens=False`, cut at the model's 256 tokens; checked against the server on
  every text pagesync sent).
Day 1 is the initial index (the same for all three); a week is days 2-8. Money: at a stated
price per million tokens (default $0.02, OpenAI's text-embedding-3-small list price; an
assumption: OpenAI's tokenizer counts differently from this model's, the ratios hold).

    .venv/bin/python bench/embed_tokens.py [--git-dir DIR] [--start 2024-07-27 --days 8] [--price 0.02]

Needs the FastAPI clone (REPLAY_GIT_DIR), nginx and `make infinity`. Writes
bench/results/embed_tokens.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "bench"))

from demo.embed_proxy import EmbedProxy  # noqa: E402
from embedders.openai_api import PROBE_TEXT  # noqa: E402
from demo.infinity_server import InfinityServer, model_dir, unavailable  # noqa: E402
from pipeline import chunks_by_url  # noqa: E402  (the synced collection's chunk texts by URL)
from replay_docs_history import DEFAULT_GIT_DIR, NGINX, Git, Lastmods, Nginx, Renderer, write_site, write_sitemap  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
KEY = "sk-bench-embed-tokens"


class TokenCounter:
    """Tokens of a text as infinity-emb counts them for `usage`: the model's tokenizer, no
    special tokens, cut at the model's maximum length."""

    def __init__(self) -> None:
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(str(model_dir()))
        # the model's input: sentence-transformers' max_seq_length (256), not the tokenizer's 512
        self.max_len = json.loads((model_dir() / "sentence_bert_config.json").read_text())["max_seq_length"]

    def counts(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        enc = self.tok(
            texts,
            add_special_tokens=False,
            truncation=True,
            max_length=self.max_len,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        return [len(ids) for ids in enc["input_ids"]]

    def uncut(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        enc = self.tok(texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False)
        return [len(ids) for ids in enc["input_ids"]]


def pagesync_pass(work: Path, sitemap: str, now: datetime, env: dict, concurrency: int | None) -> dict:
    report = work / "report.json"
    report.unlink(missing_ok=True)
    args = [
        "run",
        "--sitemap",
        sitemap,
        "--state",
        str(work / "state.db"),
        "--qdrant-path",
        str(work / "qdrant"),
        "--now",
        now.isoformat().replace("+00:00", "Z"),
        "--report",
        str(report),
        "--quiet",
        "--embedder",
        f"openai:{MODEL}",
    ]
    if concurrency:
        args += ["--embed-concurrency", str(concurrency)]
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "sync", *args], cwd=work, env=env, capture_output=True, text=True)
    if p.returncode not in (0, 1) or not report.exists():
        raise SystemExit(f"pagesync run failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return {**json.loads(report.read_text()), "exit_code": p.returncode, "process_wall_s": time.perf_counter() - t}


class LangChainNightly:
    """LangChain's `index()` over the day's chunks, one call a night, its record manager kept.

    `batch_size=None` is index()'s default (100 documents): a page's chunks that span two
    batches are deleted by the incremental cleanup of one and re-added, so re-embedded, by
    the other, every night. `batch_size=0` puts the whole site in one batch (the best
    index() can do here)."""

    def __init__(self, counter: TokenCounter, batch_size: int | None = None) -> None:
        self.batch_size = batch_size
        from langchain_core.embeddings import Embeddings
        from langchain_core.indexing import InMemoryRecordManager
        from langchain_core.vectorstores import InMemoryVectorStore

        class Counting(Embeddings):
            def __init__(self) -> None:
                self.texts = self.tokens = 0

            def embed_documents(self, texts):
                self.texts += len(texts)
                self.tokens += sum(counter.counts(list(texts)))
                return [[float(len(t) % 7), 1.0] for t in texts]

            def embed_query(self, text):
                return [0.0, 1.0]

        self.emb = Counting()
        self.store = InMemoryVectorStore(self.emb)
        self.rm = InMemoryRecordManager("bench")
        self.rm.create_schema()

    def night(self, chunks: dict[str, list[str]]) -> dict:
        from langchain_core.documents import Document
        from langchain_core.indexing import index

        texts0, tokens0 = self.emb.texts, self.emb.tokens
        docs = [Document(page_content=t, metadata={"source": u}) for u in sorted(chunks) for t in chunks[u]]
        kw = {} if self.batch_size is None else {"batch_size": self.batch_size or max(1, len(docs))}
        res = index(docs, self.rm, self.store, cleanup="incremental", source_id_key="source", **kw)
        return {**dict(res), "texts": self.emb.texts - texts0, "tokens": self.emb.tokens - tokens0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", default=os.environ.get("REPLAY_GIT_DIR") or DEFAULT_GIT_DIR)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--docs-dir", default="docs/en/docs")
    ap.add_argument("--start", default="2024-07-27", help="day 1 (UTC): the initial index")
    ap.add_argument("--days", type=int, default=8, help="days, the initial index included (8: a week after it)")
    ap.add_argument("--max-pages", type=int, default=None)
    ap.add_argument("--embed-concurrency", type=int, default=None, help="default: pagesync's")
    ap.add_argument("--price", type=float, default=0.02, help="US$ per million tokens (assumed)")
    ap.add_argument("--price-label", default="text-embedding-3-small list price")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/embed_tokens.md")
    args = ap.parse_args(argv)
    # a SIGTERM unwinds like Ctrl-C, so the servers this script started are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not Path(args.git_dir).exists():
        raise SystemExit(f"no git repo at {args.git_dir}: clone https://github.com/fastapi/fastapi and pass --git-dir")
    if not (os.path.isfile(NGINX) and os.access(NGINX, os.X_OK)):
        raise SystemExit(f"nginx not found ({NGINX}): apt-get install nginx-light")
    if reason := unavailable():
        raise SystemExit(reason)
    command = shlex.join([".venv/bin/python", "bench/embed_tokens.py", *(sys.argv[1:] if argv is None else argv)])
    work = args.work or Path(tempfile.mkdtemp(prefix="pagesync-embed-tokens-"))
    shutil.rmtree(work, ignore_errors=True)
    root = work / "site"
    root.mkdir(parents=True)
    git = Git(args.git_dir)
    renderer, lastmods = Renderer(git, args.docs_dir), Lastmods(git, args.docs_dir)
    counter = TokenCounter()
    lc, lc_one = LangChainNightly(counter), LangChainNightly(counter, batch_size=0)
    nginx = Nginx(work / "nginx", root)
    days = [date.fromisoformat(args.start) + timedelta(days=i) for i in range(args.days)]
    records: list[dict] = []
    t0 = time.monotonic()
    nginx.start()
    try:
        with InfinityServer(KEY, log_path=work / "infinity.log") as server, EmbedProxy(server.root_url) as proxy:
            env = {
                **os.environ,
                "PYTHONPATH": str(REPO),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "OPENAI_BASE_URL": proxy.url("/v1"),
                "OPENAI_API_KEY": KEY,
            }
            prev = None
            for day in days:
                commit = git.day_commit(args.rev, day)
                pages = renderer.pages(commit, [], args.max_pages)
                if prev is None:
                    lastmods.init(commit, {p.src for p in pages})
                else:
                    lastmods.advance(prev, commit)
                write_site(root, renderer.render_site(pages, nginx.base), git.commit_time(commit))
                write_sitemap(root, nginx.base, pages, lastmods)
                proxy.clear()
                now = datetime(day.year, day.month, day.day, 23, 59, 59, tzinfo=timezone.utc)
                rep = pagesync_pass(work, nginx.base + "/sitemap.xml", now, env, args.embed_concurrency)
                work_ex = [e for e in proxy.served() if e.inputs != [PROBE_TEXT]]  # not the vector-size probe
                sent = [t for e in work_ex for t in e.inputs]
                chunks = chunks_by_url(work)
                all_texts = [t for u in sorted(chunks) for t in chunks[u]]
                full_counts = counter.counts(all_texts)
                rec = {
                    "day": day.isoformat(),
                    "commit": commit[:10],
                    "pages": len(pages),
                    "pagesync": {
                        "tokens_server": sum(e.tokens for e in work_ex),
                        "tokens_report": rep.get("tokens_embedded"),
                        "tokens_local": sum(counter.counts(sent)),
                        "texts_sent": len(sent),
                        "requests": len(work_ex),
                        "retried": len(proxy.exchanges) - len(proxy.served()),
                        **{
                            k: rep.get(k)
                            for k in (
                                "chunks_embedded",
                                "chunks_reused",
                                "pages_fetched",
                                "pages_changed",
                                "pages_added",
                                "pages_removed",
                                "pages_failed",
                                "seconds",
                                "exit_code",
                            )
                        },
                    },
                    "full": {
                        "texts": len(all_texts),
                        "tokens": sum(full_counts),
                        "chunks_over_model_input": sum(1 for c in counter.uncut(all_texts) if c > counter.max_len),
                    },
                    "langchain": lc.night(chunks),
                    "langchain_one_batch": lc_one.night(chunks),
                }
                records.append(rec)
                ps = rec["pagesync"]
                print(
                    f"{day} {commit[:8]} pages={len(pages)} pagesync: {ps['texts_sent']} texts {ps['tokens_server']} tokens "
                    f"(report {ps['tokens_report']}, local {ps['tokens_local']}) | full {rec['full']['tokens']} | "
                    f"LangChain {rec['langchain']['tokens']} (one batch {rec['langchain_one_batch']['tokens']}) [{time.monotonic() - t0:.0f}s]",
                    file=sys.stderr,
                    flush=True,
                )
                prev = commit
            startup = server.startup_seconds
    finally:
        nginx.stop()
        git.close()
    out = {
        "command": command,
        "args": {k: str(v) for k, v in vars(args).items()},
        "model": MODEL,
        "server": "infinity-emb 0.0.78 (torch, CPU)",
        "server_startup_s": round(startup or 0, 1),
        "records": records,
        "total_seconds": round(time.monotonic() - t0),
    }
    out["summary"] = summarise(records, args.price)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(out, indent=1) + "\n")
    args.out.write_text(render(out, args.price, args.price_label))
    print(args.out.read_text())
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def summarise(records: list[dict], price: float) -> dict:
    """Tokens of days 2.. per strategy, per 7 days, ratios and money; the token-count checks."""
    later = records[1:]
    weeks = max(1, len(later)) / 7
    tot = {
        "pagesync": sum(r["pagesync"]["tokens_server"] for r in later),
        "full": sum(r["full"]["tokens"] for r in later),
        "langchain": sum(r["langchain"]["tokens"] for r in later),
        "langchain_one_batch": sum(r.get("langchain_one_batch", {}).get("tokens", 0) for r in later),
    }
    per_week = {k: v / weeks for k, v in tot.items()}
    return {
        "days_after_initial": len(later),
        "initial_tokens": records[0]["pagesync"]["tokens_server"] if records else 0,
        "tokens": tot,
        "tokens_per_week": per_week,
        "ratio_full_to_pagesync": tot["full"] / tot["pagesync"] if tot["pagesync"] else None,
        "ratio_langchain_to_pagesync": tot["langchain"] / tot["pagesync"] if tot["pagesync"] else None,
        "ratio_langchain_one_batch_to_pagesync": (
            tot["langchain_one_batch"] / tot["pagesync"] if tot["pagesync"] else None
        ),
        "usd_per_week": {k: v * price / 1e6 for k, v in per_week.items()},
        "usd_per_year": {k: v * 52 * price / 1e6 for k, v in per_week.items()},
        "report_equals_server": all(r["pagesync"]["tokens_report"] == r["pagesync"]["tokens_server"] for r in records),
        "local_equals_server": all(r["pagesync"]["tokens_local"] == r["pagesync"]["tokens_server"] for r in records),
        "pages_failed": sum(r["pagesync"]["pages_failed"] or 0 for r in records),
        "chunks_over_model_input_last_day": records[-1]["full"]["chunks_over_model_input"] if records else 0,
    }


def _x(ratio: float | None) -> str:
    return "n/a (pagesync sent nothing)" if ratio is None else f"{ratio:.1f}x"


def render(out: dict, price: float, label: str) -> str:
    s, recs = out["summary"], out["records"]
    lines = [
        "# Tokens sent per week: pagesync vs a nightly full re-embed vs LangChain `index()`",
        "",
        f"Generated by `bench/embed_tokens.py` in {out['total_seconds']} s; server {out['server']} serving "
        f"{out['model']} (ready in {out['server_startup_s']} s).",
        "",
        "```",
        out["command"],
        "```",
        "",
        f"FastAPI's docs (docs/en/docs), one snapshot per UTC day from {recs[0]['day']} (day 1: the initial index, "
        f"{s['initial_tokens']:,} tokens sent by pagesync), {s['days_after_initial']} days after it. A full re-embed "
        "sends every chunk, repeated texts too; pagesync and `index()` send each distinct text once. pagesync's tokens are "
        "the server's `usage` seen by a proxy; the report's `tokens_embedded` "
        f"{'equals' if s['report_equals_server'] else 'DIFFERS FROM'} them every day, and the model's tokenizer "
        f"{'gives the same counts' if s['local_equals_server'] else 'DIFFERS'} on the texts pagesync sent (the "
        "baselines are counted with it). Failed pages: "
        f"{s['pages_failed']}. Chunks longer than the model's 256-token input on the last day: "
        f"{s['chunks_over_model_input_last_day']} (the server cuts them; every strategy sends them alike).",
        "",
        "| day | commit | pages | pagesync texts | pagesync tokens | full re-embed tokens | LangChain `index()` texts | "
        "LangChain tokens | `index()` one batch: texts | tokens |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in recs:
        ps, one = r["pagesync"], r.get("langchain_one_batch", {})
        lines.append(
            f"| {r['day']} | {r['commit'][:8]} | {r['pages']} | {ps['texts_sent']:,} | {ps['tokens_server']:,} | "
            f"{r['full']['tokens']:,} | {r['langchain']['texts']:,} | {r['langchain']['tokens']:,} | "
            f"{one.get('texts', 0):,} | {one.get('tokens', 0):,} |"
        )
    w, usd, yr = s["tokens_per_week"], s["usd_per_week"], s["usd_per_year"]
    lines += [
        "",
        f"## Per week (days 2-{s['days_after_initial'] + 1}, scaled to 7 days)",
        "",
        f"At ${price:g} per million tokens ({label}; an assumption, see above):",
        "",
        "| strategy | tokens / week | vs pagesync | $ / week | $ / year |",
        "|---|---:|---:|---:|---:|",
        f"| pagesync | {w['pagesync']:,.0f} | 1 | {usd['pagesync']:.4f} | {yr['pagesync']:.2f} |",
        f"| nightly full re-embed | {w['full']:,.0f} | {_x(s['ratio_full_to_pagesync'])} | {usd['full']:.4f} | {yr['full']:.2f} |",
        f"| LangChain `index()`, nightly, cleanup=incremental | {w['langchain']:,.0f} | "
        f"{_x(s['ratio_langchain_to_pagesync'])} | {usd['langchain']:.4f} | {yr['langchain']:.2f} |",
        f"| LangChain `index()`, the whole site in one batch (`batch_size` = all chunks) | "
        f"{w['langchain_one_batch']:,.0f} | {_x(s['ratio_langchain_one_batch_to_pagesync'])} | "
        f"{usd['langchain_one_batch']:.4f} | {yr['langchain_one_batch']:.2f} |",
        "",
        "`index()` with its default `batch_size` (100) re-embeds, every night, the chunks of each page whose "
        "chunks span two batches: the incremental cleanup after one batch deletes the page's chunks that "
        "are in the other, and the next night adds them back. In one batch it embeds each new chunk text, "
        "like pagesync, but still fetches and hashes every page every night.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
