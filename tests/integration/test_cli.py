"""The front door: analyze/query/ingest on every shared trace; bad input → one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tests.conftest import shared_trace_names
from tests.helpers import invoke
from tests.tracegen import ddp_like_rank
from tracekit.cli import main

REPORT_RANK_KEYS = {
    "rank",
    "steps",
    "step_time_ms",
    "window",
    "window_ms",
    "idle_fraction",
    "compute_fraction",
    "non_compute_fraction",
    "comm_fraction",
    "comm_overlap_fraction",
    "exposed_comm_fraction",
}


@pytest.fixture
def run_dir(tmp_path):
    for r in range(2):
        ddp_like_rank(r).write(tmp_path / f"rank-{r}.json.gz")
    return tmp_path


@pytest.mark.parametrize("name", shared_trace_names())
def test_analyze_every_shared_trace(name, shared_trace):
    path = shared_trace(name)
    res = invoke("analyze", path, "--format", "json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["schema"] == 1 and rep["tracekit_version"]
    assert set(rep["run"]) >= {"path", "world_size", "ranks", "backend", "device", "steps"}
    assert rep["ranks"]
    for r in rep["ranks"]:
        assert set(r) >= REPORT_RANK_KEYS
        parts = r["idle_fraction"] + r["compute_fraction"] + r["non_compute_fraction"]
        assert parts == pytest.approx(1.0)
    text = invoke("analyze", path)
    assert text.exit_code == 0 and "idle %" in text.output
    q = invoke("query", path, "SELECT count(*) AS n FROM events", "--format", "json")
    assert q.exit_code == 0 and json.loads(q.stdout)[0]["n"] > 0


def test_analyze_text_and_markdown(run_dir):
    out = invoke("analyze", run_dir, "--breakdown-only").output
    assert "2 of 2 ranks" in out
    # rank, steps, step ms, idle, compute, non-compute, overlap, exposed
    assert out.splitlines()[-1].split() == [
        "1",
        "2",
        "1.00",
        "20.0",
        "60.0",
        "20.0",
        "33.3",
        "20.0",
    ]
    full = invoke("analyze", run_dir).output
    assert "level" in full and "communication" in full and "findings" in full
    md = invoke("analyze", run_dir, "--format", "markdown").output
    assert md.count("\n|") >= 4 and "| 20.0 |" in md and "### Findings" in md


def test_analyze_writes_output_file(run_dir, tmp_path):
    dest = tmp_path / "report.json"
    assert invoke("analyze", run_dir, "--format", "json", "-o", dest).exit_code == 0
    assert json.loads(dest.read_text())["run"]["ranks"] == [0, 1]


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_query_formats(run_dir, fmt):
    res = invoke(
        "query",
        run_dir,
        "--sql",
        "SELECT rank, count(*) AS n FROM steps GROUP BY 1 ORDER BY 1",
        "--format",
        fmt,
    )
    assert res.exit_code == 0
    if fmt == "csv":
        assert res.output.splitlines() == ["rank,n", "0,2", "1,2"]
    elif fmt == "json":
        assert json.loads(res.stdout) == [{"rank": 0, "n": 2}, {"rank": 1, "n": 2}]
    else:
        assert "(2 rows)" in res.output


def test_query_describe_and_views(run_dir):
    res = invoke("query", run_dir, "--describe", "collectives")
    assert res.exit_code == 0 and "wait_ns" in res.output and "last peer" in res.output
    res = invoke("query", run_dir, "--views")
    assert "device_activity" in res.output


@pytest.mark.parametrize(
    "sql",
    [
        "DROP VIEW steps",
        "CREATE TABLE x AS SELECT 1",
        "COPY events TO '/tmp/x.csv'",
        "SELECT 1; SELECT 2",
        "ATTACH 'x.db'",
    ],
)
def test_query_is_read_only(run_dir, sql):
    res = invoke("query", run_dir, sql)
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "Traceback" not in res.output


def test_ingest_command(run_dir):
    res = invoke("ingest", run_dir)
    assert res.exit_code == 0 and "rank    0" in res.output and "2 collectives" in res.output


@pytest.mark.parametrize(
    "setup,args,message",
    [
        (None, ["analyze", "{tmp}/missing"], "does not exist"),
        ("empty", ["analyze", "{tmp}"], "no Kineto traces"),
        ("truncated", ["analyze", "{tmp}"], "not valid JSON"),
        ("dupe", ["analyze", "{tmp}"], "appears twice"),
        ("ok", ["analyze", "{tmp}", "--steps", "zz"], "not a step selection"),
        ("ok", ["query", "{tmp}", "SELECT nope FROM events"], "SQL error"),
        ("ok", ["query", "{tmp}", "--describe", "nope"], "no view named"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, setup, args, message):
    if setup == "truncated":
        (tmp_path / "rank-0.json").write_text('{"traceEvents": [{"ph": "X", "na')
    elif setup == "dupe":
        ddp_like_rank(0).write(tmp_path / "a.json")
        ddp_like_rank(0).write(tmp_path / "b.json")
    elif setup == "ok":
        ddp_like_rank(0).write(tmp_path / "rank-0.json")
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit.cli", *(a.format(tmp=tmp_path) for a in args)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_debug_shows_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit.cli", "--debug", "analyze", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" in proc.stderr


def test_usage_error_exit_2():
    res = CliRunner().invoke(main, ["analyze"])
    assert res.exit_code == 2


def test_analyze_pauses_the_collector_and_restores_it(run_dir, monkeypatch):
    """`analyze` runs with the cyclic collector off (`tracekit.cli.oneshot`) and leaves it
    as it found it for an in-process caller; the process's last collection is skipped
    (gc.freeze at exit)."""
    import atexit
    import gc

    from tracekit import commands
    from tracekit.cli import oneshot

    seen, registered = [], []

    analyze = commands.analyze

    def spy(*a, **k):
        seen.append(gc.isenabled())
        return analyze(*a, **k)

    monkeypatch.setattr(commands, "analyze", spy)
    monkeypatch.setattr(oneshot, "_frozen_at_exit", False)
    monkeypatch.setattr(atexit, "register", registered.append)
    assert gc.isenabled()
    assert invoke("analyze", run_dir, "--format", "json").exit_code == 0
    assert seen == [False] and gc.isenabled() and gc.freeze in registered
