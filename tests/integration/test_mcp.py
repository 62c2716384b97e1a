"""The agent door, `tracekit mcp`, driven by the MCP SDK's own client over stdio: the tools
on sample runs, what it refuses (a file read through SQL, a run outside the roots, a link
that leads out, malformed arguments) while it keeps serving, and the SQL bounds — in the
door and in the CLI (`tracekit query --memory/--timeout`)."""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.cli import main

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
HUGE = "select list(range) from range(1000000000)"  # > 20 GB unbounded: only ever run bounded
SLOW = "select count(*) from range(100000000000) t(a), range(10) u(b) where a + b < 0"
MEMORY, TIMEOUT = "500MB", 3


def _cap_address_space():
    """A safety net under the bounds being tested: the child cannot take the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))


def _steps_per_rank(run: Path) -> dict[int, int]:
    """ProfilerStep spans per rank, read from the raw traces (not through tracekit)."""
    out = {}
    for f in sorted(run.glob("rank-*.json.gz")):
        with gzip.open(f) as fh:
            events = json.load(fh)["traceEvents"]
        n = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
        out[int(f.name.split("-")[1].split(".")[0])] = n
    return out


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """Roots with copies of two sample runs, a run outside them and a link leading out."""
    base = tmp_path_factory.mktemp("mcp")
    root = base / "root"
    root.mkdir()
    for name in ("ddp", "fsdp"):
        shutil.copytree(SAMPLES / name, root / name)
    outside = base / "outside"
    shutil.copytree(SAMPLES / "ddp", outside)
    (root / "escape").symlink_to(outside, target_is_directory=True)
    sneaky = root / "sneaky"
    sneaky.mkdir()
    (sneaky / "rank-0.json.gz").symlink_to(outside / "rank-0.json.gz")
    return root, outside


async def _session(root: Path, calls: list[tuple[str, dict]]):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "tracekit",
            "mcp",
            "--root",
            str(root),
            "--memory",
            MEMORY,
            "--timeout",
            str(TIMEOUT),
        ],
        cwd=str(root),
    )
    out: dict = {"results": [], "progress": []}

    async def progress(p, total, message):
        out["progress"].append((p, total, message))

    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            out["tools"] = {t.name: t for t in (await s.list_tools()).tools}
            out["resources"] = [str(x.uri) for x in (await s.list_resources()).resources]
            out["schema"] = (await s.read_resource("tracekit://schema/report")).contents[0]
            out["prompt"] = await s.get_prompt("diagnose", {"run": "ddp"})
            for name, args in calls:
                t0 = time.monotonic()
                res = await s.call_tool(name, args, progress_callback=progress)
                out["results"].append((res, time.monotonic() - t0))
    return out


CALLS = [
    ("analyze", {"run": "ddp"}),
    ("findings", {"run": "ddp"}),
    ("explain", {"code": "TK-N301"}),
    ("explain", {}),
    ("describe", {"run": "ddp"}),
    ("describe", {"run": "ddp", "view": "steps"}),
    ("query", {"run": "ddp", "sql": "select rank, count(*) as n from steps group by 1 order by 1"}),
    ("whatif", {"run": "ddp", "changes": ["compute-speed=2"]}),
    ("compare", {"base": ["ddp"], "new": ["fsdp"]}),
    ("perfetto_link", {"run": "ddp"}),
    # refused, one line each, and the server goes on
    ("query", {"run": "ddp", "sql": "select * from read_text('/etc/passwd')"}),
    ("query", {"run": "ddp", "sql": "select * from read_csv('/etc/passwd')"}),
    ("analyze", {"run": "/etc"}),
    ("analyze", {"run": "../outside"}),
    ("analyze", {"run": "escape"}),
    ("analyze", {"run": "sneaky"}),
    ("analyze", {"run": "nowhere"}),
    ("analyze", {"rnu": "ddp"}),
    ("query", {"run": "ddp", "sql": "select 1", "limit": -5}),
    ("whatif", {"run": "ddp", "changes": ["faster-please"]}),
    ("explain", {"code": "TK-NOPE"}),
    ("query", {"run": "ddp", "sql": HUGE}),
    ("query", {"run": "ddp", "sql": SLOW}),
    # still serving
    ("query", {"run": "ddp", "sql": "select count(*) as n from steps"}),
]
N_OK = 10


@pytest.fixture(scope="module")
def session(place):
    root, _ = place
    return anyio.run(_session, root, CALLS)


def _text(res) -> str:
    return res.content[0].text if res.content else ""


def test_lists_the_tools_resources_and_prompt(session):
    assert set(session["tools"]) == {
        "analyze", "findings", "explain", "describe", "query", "whatif", "compare",
        "perfetto_link",
    }  # fmt: skip
    for t in session["tools"].values():
        assert t.input_schema["type"] == "object"
        assert t.output_schema is not None
        assert t.description
    # analyze's result is typed with the report's own schema
    assert "summary" in session["tools"]["analyze"].output_schema["properties"]
    assert set(session["resources"]) >= {
        "tracekit://schema/report", "tracekit://rules", "tracekit://sql/columns"
    }  # fmt: skip
    assert json.loads(session["schema"].text)["title"] == "tracekit report"
    text = session["prompt"].messages[0].content.text
    assert all(w in text for w in ("memory", "compute", "communication", "scaling", "whatif"))


def test_every_tool_answers_on_a_sample_run(session, place):
    root, _ = place
    results = [r for r, _ in session["results"]]
    for (name, _), res in zip(CALLS[:N_OK], results[:N_OK], strict=True):
        assert not res.is_error, (name, _text(res))
        assert res.structured_content, name
    (rep, fnd, exp, exp_all, views, steps, q, wi, cmp, links) = (
        r.structured_content for r in results[:N_OK]
    )
    assert fnd["findings"] == rep["findings"]
    assert exp["code"] == "TK-N301" and "What it detects" in exp["docs"]
    assert any(r["code"] == "TK-N301" for r in exp_all["rules"])
    assert "steps" in {v["name"] for v in views["views"]}
    assert "rank" in {c["name"] for c in steps["columns"]}
    # the query against the raw traces, read by hand
    assert {r: n for r, n in q["rows"]} == _steps_per_rank(root / "ddp")
    assert wi["change"] == ["compute-speed=2"]
    assert wi["predicted_step_ms"] < wi["measured_step_ms"]
    assert wi["saved_ms"] == pytest.approx(wi["replayed_step_ms"] - wi["predicted_step_ms"])
    assert cmp["result"] in ("pass", "fail") and cmp["metrics"]
    assert {m["metric"] for m in cmp["metrics"]} >= {"step_time"}
    perfetto = "https://ui.perfetto.dev/"
    assert links["links"]
    assert all(x["link"] is None or x["link"].startswith(perfetto) for x in links["links"])
    assert session["progress"], "long tools report progress"


def test_analyze_is_what_the_cli_prints(session, place):
    root, _ = place
    res = CliRunner().invoke(main, ["analyze", str(root / "ddp"), "--format", "json"])
    assert res.exit_code == 0, res.output
    door = session["results"][0][0].structured_content
    assert door == json.loads(res.stdout)


def test_refusals_are_one_line_and_the_server_keeps_serving(session):
    refused = session["results"][N_OK:-1]
    expect = [
        "reads only the run", "reads only the run", "outside the server's roots",
        "outside the server's roots", "outside the server's roots",
        "leads outside the server's roots", "no such folder", "bad arguments: run",
        "bad arguments: limit", "faster-please", "no finding", "memory limit", "time limit",
    ]  # fmt: skip
    assert len(refused) == len(expect)
    for (res, _), want in zip(refused, expect, strict=True):
        assert res.is_error
        text = _text(res)
        assert want in text, text
        assert "\n" not in text.strip(), text
        assert "Traceback" not in text
    last = session["results"][-1][0]
    assert not last.is_error and last.structured_content["rows"] == [[4]]


def test_the_door_bounds_a_query(session):
    (huge, t_huge), (slow, t_slow) = session["results"][-3:-1]
    assert "memory limit" in _text(huge) and t_huge < TIMEOUT + 5
    assert "time limit of 3 s" in _text(slow) and t_slow < TIMEOUT + 5


def _bounded_cli(run: Path, sql: str):
    """`tracekit query` in a child (so its peak RSS is its own): rc, stderr, seconds, MB."""
    import tempfile

    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracekit",
                "query",
                str(run),
                sql,
                "--memory",
                MEMORY,
                "--timeout",
                str(TIMEOUT),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=_cap_address_space,
        )
        _, status, usage = os.wait4(p.pid, 0)  # this child's own peak RSS
        p.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
        err.seek(0)
        text = err.read().decode()
    return p.returncode, text, seconds, usage.ru_maxrss / 1024


@pytest.mark.parametrize("sql,said", [(HUGE, "memory limit"), (SLOW, "time limit of 3 s")])
def test_the_cli_bounds_a_query(place, sql, said):
    root, _ = place
    rc, err, seconds, rss_mb = _bounded_cli(root / "ddp", sql)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], err
    assert seconds < TIMEOUT + 10
    # the limit (500 MB) plus the interpreter, DuckDB and the run's tables
    assert rss_mb < 500 + 700, rss_mb


def test_bad_bounds_and_a_missing_sdk_are_one_line(place, monkeypatch):
    root, _ = place
    r = CliRunner().invoke(main, ["query", str(root / "ddp"), "select 1", "--memory", "lots"])
    assert r.exit_code == 2 and "memory limit 'lots'" in r.stderr
    r = CliRunner().invoke(main, ["query", str(root / "ddp"), "select 1", "--timeout", "0"])
    assert r.exit_code == 2
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "mcp" else real(n, *a)
    )
    r = CliRunner().invoke(main, ["mcp", "--root", str(root)])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        "tracekit: tracekit mcp needs the MCP SDK: pip install 'tracekit-torch[mcp]'"
    )


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _http_session(url: str):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    for _ in range(100):  # the server is starting
        try:
            async with streamable_http_client(url) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                tools = {t.name for t in (await s.list_tools()).tools}
                q = await s.call_tool("query", {"run": "ddp", "sql": "select count(*) from steps"})
                bad = await s.call_tool("analyze", {"run": "/etc"})
                return tools, q, bad
        except Exception:
            await anyio.sleep(0.2)
    raise AssertionError(f"no MCP server answered at {url}")


def test_streamable_http_on_localhost(place):
    root, _ = place
    port = _free_port()
    p = subprocess.Popen(
        [sys.executable, "-m", "tracekit", "mcp", "--root", str(root), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        tools, q, bad = anyio.run(_http_session, f"http://127.0.0.1:{port}/mcp")
    finally:
        p.terminate()
        p.wait(timeout=20)
    assert "analyze" in tools
    assert not q.is_error and q.structured_content["rows"] == [[4]]
    assert bad.is_error and "outside the server's roots" in _text(bad)
