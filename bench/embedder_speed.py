"""torch vs ONNX Runtime for the bundled all-MiniLM-L6-v2, and padding waste by batch size.

The corpus is fixed and offline: this repo's README, the demo site's pages (extracted as
the engine does) and bench results, then the long descriptions (PyPI READMEs) of the
project's installed dependencies, all split by the production `Splitter` (1000 chars,
100 overlap), the first `--chunks` chunks in that order (pages one after another, as the
engine's batches see them).

Measured, in one process, alternating the backends each round (the machine is shared, so
only ratios taken side by side mean anything):
  1. agreement: min / mean cosine between the two backends' vectors for every chunk;
  2. throughput: chunks/s (wall) and chunks per CPU-second, each backend embedding the
     corpus in calls of `--call` chunks (the engine's --embed-batch, 64);
  3. padding waste (tokenizer only, no model): padded token slots / real tokens for
     call sizes 16..256, model sub-batches of 32, unsorted / sorted by characters (what
     sentence-transformers does within one encode call) / sorted by tokens (what both
     pagesync embedders do now);
  4. throughput by model sub-batch (4..32) in calls of 64, and in calls of 256 (the sort
     has more room in a bigger call), both backends, in CPU time on one thread;
  5. cold start: a fresh process importing the backend and embedding one text.

    .venv/bin/python bench/embedder_speed.py [--chunks 300] [--rounds 3] [--sweep-chunks 128]

Writes bench/results/embedders.md and .json.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout this script lives in, before any installed copy
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from chunking import Splitter, extract_page  # noqa: E402
from embedders import MiniLMEmbedder, OnnxMiniLMEmbedder  # noqa: E402
from embedders.onnx_backend import export_onnx  # noqa: E402

DEPENDENCY_READMES = [
    "httpx",
    "qdrant-client",
    "trafilatura",
    "typer",
    "rich",
    "protego",
    "sentence-transformers",
    "transformers",
    "tokenizers",
    "huggingface-hub",
    "hypothesis",
    "pytest",
    "onnxruntime",
    "numpy",
]
CALL_SIZES = [16, 32, 64, 128, 256]
SUB_BATCH = 32  # the embedders' model batch before this bench (sentence-transformers' default)
SUB_BATCHES = [4, 8, 16, 32]


def corpus(n: int) -> tuple[list[str], list[str]]:
    docs: list[tuple[str, str]] = [("README.md", (ROOT / "README.md").read_text())]
    for f in sorted((ROOT / "demo" / "site").glob("*.html")):
        docs.append((f"demo/site/{f.name}", extract_page(f.read_bytes(), "text/html").markdown))
    for f in sorted((ROOT / "bench" / "results").glob("*.md")):
        if f.name != "embedders.md":
            docs.append((f"bench/results/{f.name}", f.read_text()))
    for name in DEPENDENCY_READMES:
        try:
            meta = md.metadata(name)
        except md.PackageNotFoundError:
            continue
        docs.append((f"{name} {meta['Version']} README", meta.get_payload() or ""))
    sp = Splitter()
    chunks, used = [], []
    for label, text in docs:
        if len(chunks) >= n:
            break
        got = sp.split(text)
        if got:
            chunks += got
            used.append(f"{label} ({len(got)})")
    return chunks[:n], used


def padding_table(tok, chunks: list[str]) -> list[dict]:
    lengths = [len(e.ids) for e in tok.encode_batch(chunks)]
    chars = [len(c) for c in chunks]
    real = sum(lengths)
    rows = []
    for call in CALL_SIZES:
        row = {"call": call}
        for mode, sub_batch in [("unsorted", SUB_BATCH), ("chars", SUB_BATCH), *(("tokens", b) for b in SUB_BATCHES)]:
            slots = 0
            for start in range(0, len(chunks), call):
                idx = list(range(start, min(start + call, len(chunks))))
                if mode == "chars":
                    idx.sort(key=lambda i: -chars[i])
                elif mode == "tokens":
                    idx.sort(key=lambda i: -lengths[i])
                for s in range(0, len(idx), sub_batch):
                    sub = idx[s : s + sub_batch]
                    slots += len(sub) * max(lengths[i] for i in sub)
            # padded slots over real tokens, minus one: the share of extra work
            row[mode if mode != "tokens" else f"tokens/{sub_batch}"] = slots / real - 1.0
        rows.append(row)
    return rows


class TorchAsBefore:
    """The torch embedder as it was: one sentence-transformers call (sorted by characters), batches of 32."""

    def __init__(self, model):
        self.model = model

    def embed(self, texts):
        return self.model.encode(
            list(texts), batch_size=SUB_BATCH, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        ).tolist()


def run_calls(emb, chunks: list[str], call: int) -> tuple[float, float, list[list[float]]]:
    vecs: list[list[float]] = []
    w0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, len(chunks), call):
        vecs += emb.embed(chunks[start : start + call])
    return time.perf_counter() - w0, time.process_time() - c0, vecs


COLD = """
import os, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from embedders import {cls}
e = {cls}()
e.embed(["warm up one text"])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(time.perf_counter() - t0, int(hwm) / 1024)
"""


def cold_start(cls: str) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", COLD.format(root=str(ROOT), cls=cls)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    secs, rss = out.stdout.split()[-2:]
    return float(secs), float(rss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--call", type=int, default=64, help="chunks per embed call (the engine's --embed-batch)")
    ap.add_argument("--sweep-chunks", type=int, default=128, help="chunks for the sweeps (0: skip)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "embedders"))
    ap.add_argument("--render", action="store_true", help="only write the .md again from the .json")
    args = ap.parse_args()
    if args.render:
        out = Path(args.out)
        res = json.loads(out.with_suffix(".json").read_text())
        for k, v in res.get("args", {}).items():
            setattr(args, k, v) if k not in ("render", "out") else None
        out.with_suffix(".md").write_text(render(res, args))
        print(out.with_suffix(".md").read_text())
        return

    chunks, used = corpus(args.chunks)
    print(f"corpus: {len(chunks)} chunks, mean {statistics.mean(map(len, chunks)):.0f} chars", flush=True)
    export = export_onnx()
    print(f"onnx export: {export['path']} ({'built now' if export['built'] else 'cached'})", flush=True)

    onnx = OnnxMiniLMEmbedder()  # the shipped defaults
    torch_ = MiniLMEmbedder()
    onnx.embed(["warm up"]), torch_.embed(["warm up"])
    torch_before = TorchAsBefore(torch_._model)
    onnx32 = OnnxMiniLMEmbedder(batch_size=SUB_BATCH)  # the same session, sub-batches of 32
    onnx32._session, onnx32._tokenizer, onnx32._inputs = onnx._session, onnx._tokenizer, onnx._inputs
    tok = onnx._tokenizer
    lengths = [len(e.ids) for e in tok.encode_batch(chunks)]
    res: dict = {
        "chunks": len(chunks),
        "mean_chars": statistics.mean(map(len, chunks)),
        "mean_tokens": statistics.mean(lengths),
        "truncated_share": sum(n >= 256 for n in lengths) / len(lengths),
        "sources": used,
        "call": args.call,
        "sub_batch": {"torch": torch_.batch_size, "onnx": onnx.batch_size},
        "rounds": args.rounds,
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": os.getloadavg(),
            "python": platform.python_version(),
            "torch": md.version("torch"),
            "onnxruntime": md.version("onnxruntime"),
            "sentence-transformers": md.version("sentence-transformers"),
        },
    }

    # 2. throughput, alternating (and reversing the order every other round)
    names = {"torch/32 (before)": torch_before, "torch": torch_, "onnx/32": onnx32, "onnx": onnx}
    runs: dict[str, dict[str, list[float]]] = {b: {"wall": [], "cpu": []} for b in names}
    vecs = {}
    for r in range(args.rounds):
        order = list(names.items())
        for name, emb in order if r % 2 == 0 else order[::-1]:
            wall, cpu, vecs[name] = run_calls(emb, chunks, args.call)
            runs[name]["wall"].append(len(chunks) / wall)
            runs[name]["cpu"].append(len(chunks) / cpu)
            print(
                f"round {r + 1} {name}: {len(chunks) / wall:.1f} chunks/s, {len(chunks) / cpu:.1f} chunks/cpu-s",
                flush=True,
            )
    import numpy as np

    cos = (np.asarray(vecs["torch/32 (before)"]) * np.asarray(vecs["onnx"])).sum(axis=1)
    res["cosine"] = {"min": float(cos.min()), "mean": float(cos.mean())}
    base = runs["torch/32 (before)"]
    res["throughput"] = {
        n: {
            "wall_median": statistics.median(v["wall"]),
            "cpu_median": statistics.median(v["cpu"]),
            "wall": v["wall"],
            "cpu": v["cpu"],
            "paired_ratio_wall": statistics.median(x / y for x, y in zip(v["wall"], base["wall"])),
            "paired_ratio_cpu": statistics.median(x / y for x, y in zip(v["cpu"], base["cpu"])),
        }
        for n, v in runs.items()
    }

    # 3. padding waste
    res["padding"] = padding_table(tok, chunks)

    # 4-5. by model sub-batch and by chunks per call: CPU time on one thread, so that other
    # jobs taking turns on the cores do not enter the figure; ratios paired within rounds
    sweep = chunks[: args.sweep_chunks]
    if sweep:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        one = {"torch": MiniLMEmbedder(), "onnx": OnnxMiniLMEmbedder(threads=1)}
        one["torch"]._model = torch_._model
        one["onnx"].embed(["warm up"])
        configs = [(n, b, args.call) for n in ("torch", "onnx") for b in SUB_BATCHES]
        configs += [(n, b, 256) for n in ("torch", "onnx") for b in (8, 32)]
        cpu: dict[tuple, list[float]] = {c: [] for c in configs}
        for r in range(args.rounds):
            for c in configs if r % 2 == 0 else configs[::-1]:
                emb = one[c[0]]
                emb.batch_size = c[1]
                _, secs, _ = run_calls(emb, sweep, c[2])
                cpu[c].append(len(sweep) / secs)
            print(
                f"sweep round {r + 1}: " + ", ".join(f"{n}/{b}/{k}: {v[-1]:.1f}" for (n, b, k), v in cpu.items()),
                flush=True,
            )
        torch.set_num_threads(threads)
        res["sweep"] = [
            {
                "backend": n,
                "sub_batch": b,
                "call": k,
                "cpu_median": statistics.median(v),
                "ratio": statistics.median(x / y for x, y in zip(v, cpu[(n, SUB_BATCH, args.call)])),
            }
            for (n, b, k), v in cpu.items()
        ]

    # 6. cold start in fresh processes, alternating
    cold: dict[str, list[tuple[float, float]]] = {"torch": [], "onnx": []}
    for r in range(2):
        for name, cls in [("torch", "MiniLMEmbedder"), ("onnx", "OnnxMiniLMEmbedder")][:: 1 if r == 0 else -1]:
            cold[name].append(cold_start(cls))
    res["cold_start"] = {
        n: {"seconds_median": statistics.median(s for s, _ in v), "peak_rss_mb": max(m for _, m in v)}
        for n, v in cold.items()
    }
    res["machine"]["load_after"] = os.getloadavg()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    res["args"] = vars(args)
    out.with_suffix(".json").write_text(json.dumps(res, indent=2))
    out.with_suffix(".md").write_text(render(res, args))
    print(out.with_suffix(".md").read_text())


def render(res: dict, args) -> str:
    t = res["throughput"]
    m = res["machine"]
    lines = [
        "# torch vs ONNX Runtime: all-MiniLM-L6-v2 on CPU",
        "",
        f"`python bench/embedder_speed.py --chunks {args.chunks} --rounds {args.rounds} --sweep-chunks {args.sweep_chunks}`; "
        f"{m['cpus']} CPUs shared with other jobs (load {m['load_before'][0]:.1f} before, {m['load_after'][0]:.1f} after); "
        f"torch {m['torch']}, onnxruntime {m['onnxruntime']}, sentence-transformers {m['sentence-transformers']}.",
        "",
        f"Corpus: {res['chunks']} chunks, mean {res['mean_chars']:.0f} chars / {res['mean_tokens']:.0f} tokens, "
        f"{res['truncated_share']:.0%} truncated at 256 tokens. From: {', '.join(res['sources'])}.",
        "",
        f"Agreement, every chunk: cosine min {res['cosine']['min']:.7f}, mean {res['cosine']['mean']:.7f}.",
        "",
        f"## Throughput (calls of {res['call']} chunks; medians of {res['rounds']} alternating rounds, ratios paired by round)",
        "",
        f"Shipped defaults, texts sorted by tokens: torch in sub-batches of {res['sub_batch']['torch']}, ONNX in "
        f"sub-batches of {res['sub_batch']['onnx']}. `torch/32 (before)` is the torch "
        "embedder as it was: one sentence-transformers call, sub-batches of 32 sorted by characters.",
        "",
        "| embedder | chunks/s (wall) | chunks per CPU-second | rounds (wall) | ratio to before (wall / CPU) |",
        "|---|---|---|---|---|",
    ]
    for n, v in t.items():
        lines.append(
            f"| {n} | {v['wall_median']:.1f} | {v['cpu_median']:.1f} | "
            + ", ".join(f"{x:.1f}" for x in v["wall"])
            + f" | {v['paired_ratio_wall']:.2f} / {v['paired_ratio_cpu']:.2f} |"
        )

    def paired(a: str, b: str, k: str) -> float:
        return statistics.median(x / y for x, y in zip(t[a][k], t[b][k]))

    lines += [
        "",
        f"ONNX / torch, both in sub-batches of 32: **{paired('onnx/32', 'torch', 'wall'):.2f}x** wall, "
        f"**{paired('onnx/32', 'torch', 'cpu'):.2f}x** per CPU-second; as shipped (ONNX in 8s, torch in 32s): "
        f"**{paired('onnx', 'torch', 'wall'):.2f}x** wall, **{paired('onnx', 'torch', 'cpu'):.2f}x** per CPU-second "
        "(medians of per-round ratios).",
        "",
        "## Padding waste (padded token slots / real tokens - 1)",
        "",
        "| chunks per call | unsorted, batches of 32 | sorted by chars (sentence-transformers alone), 32 | "
        + " | ".join(f"sorted by tokens, {b}" for b in SUB_BATCHES)
        + " |",
        "|---|---|---|" + "---|" * len(SUB_BATCHES),
    ]
    for row in res["padding"]:
        lines.append(
            f"| {row['call']} | {row['unsorted']:.1%} | {row['chars']:.1%} | "
            + " | ".join(f"{row[f'tokens/{b}']:.1%}" for b in SUB_BATCHES)
            + " |"
        )
    if "sweep" in res:
        lines += [
            "",
            f"## By model sub-batch and chunks per call (first {args.sweep_chunks} chunks; one thread, "
            f"chunks per CPU-second, median of {args.rounds}; ratio to sub-batch {SUB_BATCH} in calls of "
            f"{res['call']}, paired by round)",
            "",
            "| backend | sub-batch | chunks per call | chunks per CPU-second | ratio |",
            "|---|---|---|---|---|",
        ]
        for row in res["sweep"]:
            lines.append(
                f"| {row['backend']} | {row['sub_batch']} | {row['call']} | {row['cpu_median']:.1f} | {row['ratio']:.2f} |"
            )
    cs = res["cold_start"]
    lines += [
        "",
        "## Cold start (fresh process: import, load, embed one text; median of 2, peak RSS)",
        "",
        "| backend | seconds | peak RSS (MB) |",
        "|---|---|---|",
    ]
    for n in ("torch", "onnx"):
        lines.append(f"| {n} | {cs[n]['seconds_median']:.1f} | {cs[n]['peak_rss_mb']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
