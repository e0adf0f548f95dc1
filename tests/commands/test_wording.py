"""Counts in what users read agree with their nouns: "1 point", "2 points"
(the output once said "1 points" in audit, status and run output)."""

from __future__ import annotations

import re

import pytest

from demo.site_server import render_page
from sync.core.ids import chunk_id, point_id
from sync.core.plural import plural
from sync.core.report import Report
from sync.commands.status import render_status
from sync.edges.edge_store import EdgeStore
from sync.edges.store import StoredPoint
from tests.cli_helpers import cli, cli_run

# A count of one followed (within two words) by a plural noun: "1 points", "1 live pages".
ONE_PLURAL = re.compile(
    r"(?<![\d.,])\b1 (?:[a-z-]+ ){0,2}(?:points|pages|chunks|failures|advances|bytes|entries|hosts|runs)\b"
)
COMMON = ("--qdrant-path", "q", "--state", "s.db")


@pytest.mark.parametrize(
    "n, noun, many, said",
    [
        (0, "point", None, "0 points"),
        (1, "point", None, "1 point"),
        (2, "point", None, "2 points"),
        (1, "entry", "entries", "1 entry"),
        (3, "entry", "entries", "3 entries"),
        (-1, "point", None, "-1 points"),
    ],
)
def test_plural(n, noun, many, said):
    assert plural(n, noun, many) == said


def singular_free(text: str) -> str:
    assert not ONE_PLURAL.search(text), f"{ONE_PLURAL.search(text).group()!r} in:\n{text}"
    return text


def test_run_status_and_audit_say_one_point_not_one_points(site, work):
    site.set("/a.html", render_page("Tiny", "<p>Just one short paragraph of text here, nothing else at all.</p>"))
    url = site.server.url("/a.html")
    dry = cli_run(site, work, "--dry-run")
    assert "1 chunk, 0 reused" in singular_free(dry.stdout), dry.stdout
    assert cli_run(site, work).returncode == 0
    status = cli(work, "status", "--pages", *COMMON)
    assert "1 point;" in singular_free(status.stdout) and " 1 chunk " in status.stdout, status.stdout
    audit = cli(work, "audit", *COMMON)
    assert "scanned 1 point against 1 live page" in singular_free(audit.stdout), audit.stdout

    store = EdgeStore(work / "q", "pages")  # one point of an old generation
    try:
        store.upsert(
            [
                StoredPoint(
                    point_id(chunk_id(url, 5)),
                    {
                        "url": url,
                        "chunk_id": chunk_id(url, 5),
                        "chunk_index": 5,
                        "content_hash": "0" * 64,
                        "text": "old",
                    },
                    [1.0] + [0.0] * 15,
                )
            ]
        )
    finally:
        store.close()
    audit = cli(work, "audit", *COMMON)
    assert "1 point of an old generation" in singular_free(audit.stdout), audit.stdout
    fixed = cli(work, "audit", "--fix", "--embedder", "fake", *COMMON)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "fix: deleted 1 point, re-indexed 0 pages" in singular_free(fixed.stdout), fixed.stdout


def test_status_lines_of_one():
    info = {
        "collection": "pages",
        "points": 1,
        "chunks_recorded": 1,
        "pages": {"live": 1},
        "pages_tracked": 1,
        "pages_due": 1,
        "pages_pending": 0,
        "pages_failing": 1,
        "next_due_at": None,
        "interval_min": "6.0h",
        "interval_median": "6.0h",
        "interval_max": "6.0h",
        "last_pass": None,
        "failing_examples": [{"url": "https://e.com/a", "failures": 1, "last_error": "HTTP 500"}],
        "hosts": [
            {
                "host": "e.com",
                "lastmod_advances": 1,
                "lastmod_confirmed": 1,
                "lastmod_trust": 0.75,
                "lastmod_followed": True,
            }
        ],
        "page_list": [
            {
                "url": "https://e.com/a",
                "status": "live",
                "chunks": 1,
                "interval": "6.0h",
                "due_at": None,
                "failures": 1,
                "last_error": "HTTP 500",
            }
        ],
    }
    text = singular_free(render_status(info))
    assert "1 sitemap lastmod advance, 1 confirmed" in text and "[1 failure: HTTP 500]" in text


def test_run_summary_of_one():
    rep = Report(bytes_downloaded=1, pages_fetched=1, sitemaps_skipped=1)
    assert "1 byte in" in singular_free(rep.summary())


def test_status_says_which_due_pages_are_gone_and_next_due_to_the_second():
    """Seen in use: "due now: 162" beside "160 tracked" (gone pages a sitemap still lists are
    due too), and a next-due stamp with microseconds beside whole seconds elsewhere."""
    info = {
        "collection": "pages",
        "points": 9,
        "chunks_recorded": 9,
        "pages": {"live": 160, "gone": 2},
        "pages_tracked": 160,
        "pages_due": 162,
        "pages_due_gone": 2,
        "pages_pending": 0,
        "pages_failing": 0,
        "next_due_at": "2026-12-04T09:24:09.285608+00:00",
        "interval_min": "6.0h",
        "interval_median": "6.0h",
        "interval_max": "6.0h",
        "last_pass": None,
        "failing_examples": [],
    }
    text = render_status(info)
    assert "due now: 162 (of them 2 gone but still listed, looked at again in case they return)" in text
    assert "next due: 2026-12-04T09:24:09Z" in text
    text = render_status({**info, "pages_due": 3, "pages_due_gone": 0, "next_due_at": None})
    assert "due now: 3   pending" in text and "next due: -" in text
