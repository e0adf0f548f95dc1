"""`pagesync state export/import`: the whole page state as JSON lines, SQLite <-> Qdrant,
and the CLI around `--state qdrant`."""

from __future__ import annotations

import io
import json
import logging
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from sync.errors import ConfigError
from sync.edges.qdrant_state import QdrantState
from sync.edges.state import GONE, LIVE, NEW, PageState, StateDB
from sync.commands.transfer import export_state, import_state
from tests.cli_helpers import API_KEY, DEAD, cli, cli_build, one_error_line, sitemap
from tests.helpers import T0_NOON, full_page


def fill(st) -> None:
    """A state with every kind of record and every field set somewhere."""
    st.put_many(
        [
            full_page("https://docs.example.com/a"),
            full_page("https://docs.example.com/caf\u00e9?x=1"),
            PageState(url="https://docs.example.com/new", status=NEW, first_seen_at=T0_NOON),
            PageState(
                url="https://docs.example.com/gone",
                status=GONE,
                in_sitemap=True,
                due_at=T0_NOON + timedelta(days=3),
                interval=timedelta(hours=6),
            ),
            PageState(
                url="https://other.example.org/p",
                status=LIVE,
                source="url",
                content_hash="e" * 64,
                due_at=T0_NOON - timedelta(microseconds=1),
                chunk_count=0,
            ),
        ]
    )
    st.add_host_trust({"docs.example.com": (5, 3), "other.example.org": (1, 0)})
    for i in range(3):
        st.record_run(
            {
                "started_at": f"2026-01-0{i + 1}T00:00:00+00:00",
                "finished_at": f"2026-01-0{i + 1}T00:01:00+00:00",
                "pages_added": i,
                "seconds": 0.25 * i,
                "errors": [{"url": "u", "error": "\u2603"}] * i,
                "nested": {"k": [1, 2.5, None, True]},
            }
        )


def everything(st) -> tuple:
    return st.all_pages(), st.host_trust_counts(), st.runs(), st.last_run()


def dump(st) -> str:
    out = io.StringIO()
    export_state(st, out)
    return out.getvalue()


def qstate() -> QdrantState:
    return QdrantState(
        QdrantClient(location=":memory:"), "pages__pagesync_state", settle_seconds=0, heartbeat_seconds=0
    )


def test_round_trip_sqlite_to_qdrant_to_sqlite(tmp_path):
    with StateDB(tmp_path / "a.db") as a:
        fill(a)
        original = everything(a)
        first = dump(a)
    lines = first.splitlines()
    assert json.loads(lines[0]) == {"kind": "pagesync-state", "version": 1}
    assert [json.loads(x)["kind"] for x in lines[1:]] == ["page"] * 5 + ["host"] * 2 + ["run"] * 3
    page = json.loads(lines[1])
    assert page["due_at"] == "2026-01-03T12:00:00+00:00" and page["interval_s"] == 183845.678

    q = qstate()
    assert import_state(q, io.StringIO(first)) == {"pages": 5, "hosts": 2, "runs": 3}
    assert everything(q) == original
    second = dump(q)
    assert second == first  # Qdrant -> JSONL is byte for byte what SQLite -> JSONL was
    assert q.read_lease() is None  # the import's lock was released

    with StateDB(tmp_path / "b.db") as b:
        import_state(b, io.StringIO(second))
        assert everything(b) == original
        assert dump(b) == first
        assert b.due_urls(T0_NOON) == q.due_urls(T0_NOON) and b.tracked_count() == q.tracked_count() == 4


def test_import_refuses_a_state_that_is_not_empty_unless_replace(tmp_path):
    with StateDB(tmp_path / "a.db") as a:
        fill(a)
        text = dump(a)
    q = qstate()
    q.put(PageState(url="https://docs.example.com/stale"))
    with pytest.raises(ConfigError, match="--replace"):
        import_state(q, io.StringIO(text))
    assert [p.url for p in q.all_pages()] == ["https://docs.example.com/stale"]  # nothing written
    import_state(q, io.StringIO(text), replace=True)
    assert "https://docs.example.com/stale" not in {p.url for p in q.all_pages()}
    assert len(q.all_pages()) == 5 and len(q.runs()) == 3


@pytest.mark.parametrize(
    "text, where",
    [
        ("", "no input"),
        ('{"id": "x", "payload": {}}\n', "line 1"),  # a point export is not a state
        ('{"kind": "pagesync-state", "version": 9}\n', "version"),
        ('{"kind": "pagesync-state", "version": 1}\n{"kind": "page", "url": "u", "colour": 1}\n', "line 2"),
        ('{"kind": "pagesync-state", "version": 1}\n{"kind": "page"}\n', "line 2"),
        ('{"kind": "pagesync-state", "version": 1}\n{"kind": "run", "report": {"x": 1}}\n', "line 2"),
        ('{"kind": "pagesync-state", "version": 1}\nnot json\n', "line 2"),
    ],
)
def test_a_bad_dump_writes_nothing(tmp_path, text, where):
    with StateDB(tmp_path / "a.db") as a:
        with pytest.raises(ConfigError, match=where):
            import_state(a, io.StringIO(text))
        assert everything(a) == ([], {}, [], None)


# -- the CLI ----------------------------------------------------------------------------------------
def invoke(*args: str, input: str | None = None):
    """The CLI in-process (cheap); tests/commands/test_cli.py drives it as a subprocess."""
    from typer.testing import CliRunner

    from sync.commands.cli import app

    return CliRunner().invoke(app, list(args), input=input)


def test_cli_state_commands_and_runs_on_the_qdrant_state(site, work, caplog, monkeypatch):
    """Every CLI path around the Qdrant state. One real subprocess (a dead server with an
    API key: the user's view of stderr) runs while the rest run in-process."""
    cli_build(site)
    common = ["--sitemap", sitemap(site), "--embedder", "fake"]
    dead: list = []
    t = threading.Thread(
        target=lambda: dead.append(
            cli(work, "run", *common, "--state", "qdrant", "--qdrant-url", DEAD, "--api-key", API_KEY)
        )
    )
    t.start()
    caplog.set_level(logging.INFO, logger="pagesync")
    with StateDB(work / "s.db") as st:
        fill(st)
        text = dump(st)
    (work / "dump.jsonl").write_text(text)

    r = invoke("state", "export", "--state", str(work / "s.db"))
    assert r.exit_code == 0, r.output
    assert r.stdout == text
    r = invoke("state", "import", "--state", str(work / "s2.db"), input=text)
    assert r.exit_code == 0, r.output
    with StateDB(work / "s2.db") as st:
        assert dump(st) == text
    r = invoke("state", "import", "--state", "qdrant", "--qdrant-url", ":memory:", "--file", str(work / "dump.jsonl"))
    assert r.exit_code == 0, r.output
    assert "imported 5 pages, 2 hosts, 3 runs" in caplog.text
    r = invoke("state", "import", "--state", str(work / "s3.db"), input='{"id": 1, "payload": {}}\n')
    assert r.exit_code == 2 and "line 1" in r.stderr
    assert not (work / "s3.db").exists()  # a bad dump creates no state

    # a pass on the Qdrant state (local :memory: mode stands in for a server)
    r = invoke("run", *common, "--state", "qdrant", "--qdrant-url", ":memory:", "--report", str(work / "Q.json"))
    assert r.exit_code == 0, r.output
    assert json.loads((work / "Q.json").read_text())["pages_added"] == 3

    # the embedded store cannot hold the state (exit 2, one line); a file named 'qdrant' is ./qdrant
    q = str(work / "q")
    r = invoke("run", *common, "--qdrant-path", q, "--state", "qdrant")
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and "--state qdrant" in r.stderr and "--qdrant-url" in r.stderr
    assert not (work / "q").exists()  # the refused run wrote nothing
    monkeypatch.chdir(work)
    r = invoke("run", *common, "--qdrant-path", q, "--state", "./qdrant")
    assert r.exit_code == 0, r.output
    assert Path("qdrant").exists()  # relative to the working directory, like any --state path
    with StateDB("qdrant") as st:
        assert len(st.all_pages()) == 3

    t.join(timeout=120)
    (d,) = dead
    assert d.returncode == 2, d.stderr  # an unreachable server: configuration, not a page failure
    assert API_KEY not in d.stderr and API_KEY not in d.stdout
    assert "Qdrant state" in one_error_line(d)


def test_cli_wait_lock_waits_for_the_other_pass(site, work):
    cli_build(site, n=1)
    common = [
        "run",
        "--sitemap",
        sitemap(site),
        "--embedder",
        "fake",
        "--qdrant-path",
        str(work / "q"),
        "--state",
        str(work / "s.db"),
    ]
    with StateDB(work / "s.db") as holder:
        holder.lock()
        r = invoke(*common)
        assert r.exit_code == 2
        assert r.stderr.startswith("pagesync: error: another pagesync pass is using") and r.stderr.count("\n") == 1
        assert "--wait-lock" in r.stderr
        assert site.count() == 0
        releaser = threading.Timer(0.5, holder.unlock)
        releaser.start()
        r = invoke(*common, "--wait-lock", "30")
        releaser.join()
    assert r.exit_code == 0, r.output
    assert site.count() > 0
