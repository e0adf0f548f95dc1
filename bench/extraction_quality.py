#!/usr/bin/env python3
"""How well does `chunking.extract.extract_page` (trafilatura) do on real Sphinx docs?

Why: pagesync hashes the extracted markdown to decide whether a page changed, and chunks it
for search. So the extractor must (a) drop the site chrome (nav bar, sidebars, footer),
otherwise chunks are polluted and a nav/footer-only redeploy re-embeds every page, and
(b) keep the main content, code included, so that a real edit changes the hash.

What: over a deterministic sample of a local Sphinx HTML tree (Debian's python3.11-doc:
`apt-get install python3.11-doc`, then pass /usr/share/doc/python3.11/html; evenly spaced
over the sorted paths), for each extractor: CPU time per page; share of pages whose raw HTML
vs extracted markdown contains each Sphinx boilerplate phrase; word-level recall of the main
element (`div[role=main]`) text; share of <pre> blocks whose first line survives, and that
survive verbatim; and whether `sync.core.hashing.content_hash` stays put when only the footer
(date, years, Sphinx version) or the nav/sidebar links change, and moves when one sentence of
the body is edited (hashes compared against an lxml round-trip of the unedited page, so
serialisation alone is not counted). trafilatura runs through `extract_page` itself, with
single settings overridden for the variants. Nothing is downloaded. The alternatives need
`pip install html2text readability-lxml markdownify` (bench only, not project dependencies).
Writes --out (markdown tables) and the per-page figures next to it (.json).

    .venv/bin/python bench/extraction_quality.py /usr/share/doc/python3.11/html
"""

from __future__ import annotations

import argparse
import difflib
import html
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from unittest import mock

import lxml.html

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from chunking.extract import extract_page  # noqa: E402
from sync.core.hashing import content_hash, fold_whitespace  # noqa: E402

BOILERPLATE = [
    "Previous topic",
    "Next topic",
    "This Page",
    "Report a Bug",
    "Show Source",
    "Quick search",
    "Table of Contents",
    "Navigation",
    "© Copyright",
    "This page is licensed under",
    "Please donate",
    "Last updated on",
    "Found a bug",
    "Created using Sphinx",
]
SKIP = re.compile(r"(^|/)(genindex[^/]*|search|py-modindex)\.html$")  # generated index pages
MAIN_XPATH = "(//div[@role='main'] | //div[contains(concat(' ', @class, ' '), ' body ')])[1]"
# Generic (not Sphinx-specific) chrome: ARIA navigation/search/contentinfo landmarks, <nav>, <footer>.
LANDMARKS = ["//*[@role='navigation']", "//*[@role='search']", "//*[@role='contentinfo']", "//nav", "//footer"]
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~=])")
_EMPHASIS = re.compile(r"[*`]")  # dropped on both sides when comparing code (grammar <pre> gets **bold**)


def norm(text: str) -> str:
    """Markdown backslash-escapes undone (markdownify/html2text escape `_`), whitespace folded."""
    return fold_whitespace(_MD_ESCAPE.sub(r"\1", text))


def lines(text: str) -> str:
    """Lines stripped (indentation ignored, blank lines kept): to compare code blocks verbatim."""
    text = _EMPHASIS.sub("", _MD_ESCAPE.sub(r"\1", text))
    return "\n".join(fold_whitespace(ln) for ln in text.strip("\n").splitlines())


def demark(text: str) -> str:
    return fold_whitespace(_EMPHASIS.sub("", norm(text)))


def tokens(text: str) -> Counter:
    return Counter(re.findall(r"\w+", norm(text).lower()))


# ---------------------------------------------------------------- extractors: bytes -> markdown
def trafilatura_with(**overrides):
    """extract_page itself, with some trafilatura.extract keyword arguments overridden."""
    import trafilatura

    real = trafilatura.extract

    def run(body: bytes, url: str) -> str:
        if not overrides:
            return extract_page(body, "text/html", url).markdown
        with mock.patch.object(trafilatura, "extract", lambda *a, **kw: real(*a, **{**kw, **overrides})):
            return extract_page(body, "text/html", url).markdown

    return run


def html2text_page(body: bytes, url: str) -> str:
    import html2text

    h = html2text.HTML2Text(baseurl=url)
    h.body_width, h.ignore_links, h.ignore_images = 0, True, True
    return h.handle(body.decode("utf-8"))


def _md(fragment: str) -> str:
    from markdownify import markdownify

    return markdownify(fragment, heading_style="ATX", strip=["a", "img"])


def readability_md(body: bytes, url: str) -> str:
    from readability import Document

    return _md(Document(body.decode("utf-8"), url=url).summary(html_partial=True))


def markdownify_main(body: bytes, url: str) -> str:
    main = lxml.html.document_fromstring(body).xpath(MAIN_XPATH)
    return _md(lxml.html.tostring(main[0], encoding="unicode")) if main else ""


EXTRACTORS = {
    "trafilatura": ("trafilatura, extract_page as shipped (favor_recall)", trafilatura_with()),
    "traf-balanced": ("trafilatura, favor_recall=False", trafilatura_with(favor_recall=False)),
    "traf-precision": ("trafilatura, favor_precision=True", trafilatura_with(favor_recall=False, favor_precision=True)),
    "traf-noformat": (
        "trafilatura, favor_recall, include_formatting=False",
        trafilatura_with(include_formatting=False),
    ),
    "traf-prune": ("trafilatura, favor_recall, prune_xpath=ARIA landmarks", trafilatura_with(prune_xpath=LANDMARKS)),
    "html2text": ("html2text, whole page (naive baseline)", html2text_page),
    "readability": ("readability-lxml + markdownify", readability_md),
    "md-main": ("markdownify of div[role=main] (site-specific selector)", markdownify_main),
}


# ---------------------------------------------------------------- page edits (lxml)
def _sub_text(el, pattern: str, repl: str) -> None:
    for e in el.iter():
        e.text = re.sub(pattern, repl, e.text) if e.text else e.text
        e.tail = re.sub(pattern, repl, e.tail) if e.tail and e is not el else e.tail


def edit(body: bytes, kind: str) -> bytes:
    """kind: 'none' (round-trip only), 'footer', 'nav' or 'body'."""
    doc = lxml.html.document_fromstring(body)
    if kind == "footer":  # a rebuild on another day, another year, another Sphinx
        for div in doc.xpath("//div[contains(concat(' ', @class, ' '), ' footer ')]"):
            _sub_text(div, r"Last updated on \w+ \d+, \d{4}", "Last updated on January 02, 2030")
            _sub_text(div, r"2001-\d{4}", "2001-2030")
            _sub_text(div, r"\b\d+\.\d+\.\d+\b", "7.2.6")
    elif kind == "nav":  # a page added elsewhere: one more nav link, neighbours renamed
        for ul in doc.xpath("//div[contains(@class, 'related')]//ul"):
            ul.append(
                lxml.html.fragment_fromstring(
                    '<li class="right"><a href="../whatsnew/3.12.html">what\'s new</a> |</li>'
                )
            )
        for ul in doc.xpath("//ul[@class='this-page-menu']"):
            ul.append(lxml.html.fragment_fromstring('<li><a href="../about.html">Edit this page</a></li>'))
        for a in doc.xpath("//p[@class='topless']/a"):
            last = a[-1] if len(a) else None
            if last is not None:
                last.tail = (last.tail or "") + " (renamed)"
            else:
                a.text = (a.text or "") + " (renamed)"
    elif kind == "body":  # one word of the wordiest paragraph text node replaced
        main = doc.xpath(MAIN_XPATH)
        paras = list(main[0].iter("p")) if main else []
        slots = [(p, "text") for p in paras] + [(c, "tail") for p in paras for c in p]
        slots = [s for s in slots if getattr(*s)]
        if not slots:
            return b""
        el, attr = max(slots, key=lambda s: len(getattr(*s).split()))
        setattr(el, attr, re.sub(r"\w+", "Zyzzyva", getattr(el, attr), count=1))
    return lxml.html.tostring(doc, encoding="utf-8", doctype=doc.getroottree().docinfo.doctype)


# ---------------------------------------------------------------- per page
def page_facts(body: bytes) -> dict:
    doc = lxml.html.document_fromstring(body)
    for bad in doc.xpath("//script | //style"):
        bad.drop_tree()
    source = html.unescape(body.decode("utf-8"))
    visible = fold_whitespace(doc.text_content())
    main = doc.xpath(MAIN_XPATH)[0]
    pres = [pre.text_content() for pre in main.iter("pre") if pre.text_content().strip()]
    return {
        "raw": [p for p in BOILERPLATE if p in source or p in visible],
        "visible": [p for p in BOILERPLATE if p in visible],
        "in_main": [p for p in BOILERPLATE if p in fold_whitespace(main.text_content())],
        "main_tokens": tokens(main.text_content()),
        "pre_first": [demark(next(ln for ln in p.splitlines() if ln.strip())) for p in pres],
        "pre_lines": [lines(p) for p in pres],
    }


def measure(fn, body: bytes, url: str, facts: dict, edits: dict) -> dict:
    t0 = time.process_time()  # CPU time: robust to other load on the machine (extractors are 1-thread)
    md = fn(body, url)
    secs = time.process_time() - t0
    flat, toks, md_lines, bare = norm(md), tokens(md), lines(md), demark(md)
    main = facts["main_tokens"]
    overlap = sum((main & toks).values())
    base = fn(edits["none"], url)
    leaks = [p for p in BOILERPLATE if p in flat and p not in facts["in_main"]]
    out = {
        "secs": secs,
        "chars": len(md),
        "leaks": leaks,
        "recall": overlap / max(1, sum(main.values())),
        "extra": 1 - overlap / max(1, sum(toks.values())),
        "pre_kept": [p in bare for p in facts["pre_first"]],
        "pre_verbatim": [p in md_lines for p in facts["pre_lines"]],
        "roundtrip_same": content_hash(base) == content_hash(md),
        "diff": {},
    }
    for kind in ("footer", "nav", "body"):
        new = fn(edits[kind], url) if edits[kind] else None
        out[kind + "_same"] = None if new is None else content_hash(new) == content_hash(base)
        if new is not None and out[kind + "_same"] == (kind == "body"):
            out["diff"][kind] = [
                ln
                for ln in difflib.unified_diff(base.splitlines(), new.splitlines(), n=0, lineterm="")
                if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
            ][:4]
    return out


# ---------------------------------------------------------------- report
def pct(xs) -> str:
    xs = [x for x in xs if x is not None]
    return f"{100 * sum(xs) / len(xs):.1f}%" if xs else "n/a"


def q(xs, p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def sample(root: Path, n: int) -> list[str]:
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html"))
    paths = [p for p in paths if not SKIP.search(p)]
    step = max(1.0, len(paths) / n)
    return [paths[int(i * step)] for i in range(min(n, len(paths)))]


def versions() -> str:
    names = ["trafilatura", "lxml", "html2text", "readability-lxml", "markdownify", "beautifulsoup4"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return ", ".join([f"Python {sys.version.split()[0]}", *found])


def report(args, pages: list[str], facts: dict, res: dict, doc_version: str) -> str:
    n = len(pages)
    dirs = Counter(p.split("/")[0] if "/" in p else "(top)" for p in pages)
    keys = list(res)
    L = [
        f"# Extraction quality on real Sphinx HTML ({doc_version})",
        "",
        f"Command: `{' '.join(getattr(sys, 'orig_argv', sys.argv))}`  ",
        f"Versions: {versions()}  ",
        f"Sample: {n} pages, every {max(1.0, args._total / args.pages):.2f}-th of {args._total} sorted "
        f"`*.html` (generated genindex/search/modindex pages left out): "
        + ", ".join(f"{d} {c}" for d, c in sorted(dirs.items())),
        "",
        "| extractor | median CPU ms | p95 CPU ms | pages/s (1 core) | recall median | recall p10 | pages recall<0.9 "
        "| extra tokens median | <pre> kept | <pre> verbatim | pages with boilerplate "
        "| hash same: footer edit | hash same: nav edit | hash changed: body edit |",
        "|" + " --- |" * 14,
    ]
    for k in keys:
        r = [res[k][p] for p in pages]
        secs = [x["secs"] for x in r]
        pre = [b for x in r for b in x["pre_kept"]]
        verb = [b for x in r for b in x["pre_verbatim"]]
        L.append(
            f"| {EXTRACTORS[k][0]} | {1000 * statistics.median(secs):.0f} | {1000 * q(secs, 0.95):.0f} "
            f"| {n / sum(secs):.1f} | {statistics.median(x['recall'] for x in r):.3f} "
            f"| {q([x['recall'] for x in r], 0.10):.3f} | {sum(x['recall'] < 0.9 for x in r)} "
            f"| {statistics.median(x['extra'] for x in r):.3f} "
            f"| {pct(pre)} of {len(pre)} | {pct(verb)} | {pct([bool(x['leaks']) for x in r])} "
            f"| {pct([x['footer_same'] for x in r])} | {pct([x['nav_same'] for x in r])} "
            f"| {pct([None if x['body_same'] is None else not x['body_same'] for x in r])} |"
        )
    L += [
        "",
        "Boilerplate: share of pages whose raw HTML (source or visible text) contains the phrase, "
        "and whose extracted markdown does although the page's main element does not (a leak; "
        "case-sensitive, whitespace folded). 'Quick search' is only in attributes.",
        "",
        "| phrase | raw HTML | visible text | main element | " + " | ".join(keys) + " |",
        "|" + " --- |" * (4 + len(keys)),
    ]
    for ph in BOILERPLATE:
        L.append(
            f"| {ph} | {pct([ph in facts[p]['raw'] for p in pages])} "
            f"| {pct([ph in facts[p]['visible'] for p in pages])} "
            f"| {pct([ph in facts[p]['in_main'] for p in pages])} | "
            + " | ".join(pct([ph in res[k][p]["leaks"] for p in pages]) for k in keys)
            + " |"
        )
    L += [
        "",
        f"Times: CPU time of the extraction call (`time.process_time`, one process), load average "
        f"at start {args._load}.",
        "",
        "Round-trip check (lxml parse + serialise, no edit, same hash): "
        + ", ".join(f"{k} {pct([res[k][p]['roundtrip_same'] for p in pages])}" for k in keys),
        "",
        "Columns: recall = multiset overlap of lowercase `\\w+` tokens of the main element's text found "
        "in the markdown / main tokens; extra = markdown tokens not in the main element; <pre> kept = "
        "first non-empty line of a `<pre>` in the main element found in the markdown; <pre> verbatim = "
        "all its lines, in order with blank lines, found as consecutive markdown lines (indentation "
        "ignored); footer edit = "
        "date, copyright years and Sphinx version changed; nav edit = a link added to every "
        "`div.related` bar and 'This Page' menu, prev/next topic titles changed; body edit = one word "
        "of the wordiest paragraph text replaced.",
        "",
        "## Examples (worst pages per extractor)",
        "",
    ]
    for k in keys:
        r = res[k]
        worst = sorted(pages, key=lambda p: r[p]["recall"])[:3]
        lost = [(p, facts[p]["pre_first"][i]) for p in pages for i, ok in enumerate(r[p]["pre_kept"]) if not ok]
        L.append(
            f"- **{k}**: lowest recall "
            + ", ".join(f"`{p}` {r[p]['recall']:.2f}" for p in worst)
            + f"; <pre> not verbatim on {sum(not all(r[p]['pre_verbatim']) for p in pages)} pages"
            + f"; <pre> lost on {len({p for p, _ in lost})} pages"
            + (", e.g. " + "; ".join(f"`{p}`: `{t[:60]}`" for p, t in lost[:3]) if lost else "")
        )
        for kind, label in (
            ("footer", "footer edit changed hash"),
            ("nav", "nav edit changed hash"),
            ("body", "body edit did NOT change hash"),
        ):
            hit = [p for p in pages if kind in r[p]["diff"]]
            if hit:
                L.append(
                    f"  - {label} on {len(hit)} pages, e.g. `{hit[0]}`: "
                    + " / ".join(f"`{d[:90]}`" for d in r[hit[0]]["diff"][kind][:2])
                )
        leaks = Counter(ph for p in pages for ph in r[p]["leaks"])
        if leaks:
            ex = {ph: next(p for p in pages if ph in r[p]["leaks"]) for ph in leaks}
            L.append(
                "  - boilerplate kept: "
                + "; ".join(f"'{ph}' {c} pages (e.g. `{ex[ph]}`)" for ph, c in leaks.most_common())
            )
    return "\n".join(L) + "\n"


def per_page(res: dict) -> dict:
    """The per-page figures behind the tables (code text left out), for a closer look."""
    out = {}
    for k, pages in res.items():
        out[k] = {
            p: {
                **{
                    f: round(v, 4) if isinstance(v, float) else v
                    for f, v in r.items()
                    if f not in ("pre_kept", "pre_verbatim")
                },
                "pre": len(r["pre_kept"]),
                "pre_kept": sum(r["pre_kept"]),
                "pre_verbatim": sum(r["pre_verbatim"]),
            }
            for p, r in pages.items()
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html_dir", type=Path, help="Sphinx HTML root, e.g. /usr/share/doc/python3.11/html")
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--extractors", default=",".join(EXTRACTORS), help=f"subset of {','.join(EXTRACTORS)}")
    ap.add_argument("--base-url", default="https://docs.python.org/3.11/")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/extraction_quality.md")
    args = ap.parse_args()
    keys = args.extractors.split(",")
    pages = sample(args.html_dir, args.pages)
    args._total = len(sample(args.html_dir, 10**9))
    args._load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    missing = {"library", "tutorial", "howto", "reference"} - {p.split("/")[0] for p in pages}
    if missing:
        print(f"warning: sample has no page under {sorted(missing)}", file=sys.stderr)
    facts, edits, res = {}, {}, {k: {} for k in keys}
    for p in pages:
        body = (args.html_dir / p).read_bytes()
        facts[p] = page_facts(body)
        edits[p] = {kind: edit(body, kind) for kind in ("none", "footer", "nav", "body")}
    for k in keys:
        fn = EXTRACTORS[k][1]
        fn(edits[pages[0]]["none"], args.base_url)  # warm-up: imports, lazy init
        t0 = time.time()
        for p in pages:
            res[k][p] = measure(fn, (args.html_dir / p).read_bytes(), args.base_url + p, facts[p], edits[p])
        print(f"{k}: {time.time() - t0:.0f}s", file=sys.stderr)
    title = lxml.html.parse(str(args.html_dir / "index.html")).findtext(".//title") or str(args.html_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(args, pages, facts, res, title.strip()))
    args.out.with_suffix(".json").write_text(json.dumps(per_page(res)))
    print(args.out.read_text())


if __name__ == "__main__":
    main()
