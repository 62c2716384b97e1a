"""`tracekit export`: one Chrome-JSON trace for Perfetto — a process per rank on one
clock, every original event kept, tracekit's tracks — that tracekit reads back (as a
merged multi-rank file) to the same per-rank step times."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import invoke
from tests.report.test_html import STEP_MODEL
from tests.synth import SCENARIOS, Scenario, generate
from tracekit.cli import main
from tracekit.ingest.tracefile import decode
from tracekit.report import export as ex
from tracekit.report.schema import decode as decode_report
from tracekit.report.schema import to_dict
from tracekit.store.open import open_run

ROOT = Path(__file__).resolve().parents[2]
SKEW_NS = 5_000_000  # rank 1's clock runs 5 ms ahead


def _cli(*args) -> str:
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    return res.stdout


def _skewed_run(dest: Path) -> Path:
    """A 4-rank exposed all-reduce run (Seq in the metadata, so clocks can be aligned)
    whose rank 1 stamps its trace 5 ms late."""
    generate(Scenario(name="exposed", hidden=4096, buckets_after_backward=True, seq=True), dest)
    path = dest / "rank-1.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["baseTimeNanoseconds"] += SKEW_NS
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dest


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(the run, its report, the merged trace's JSON, the export folder)"""
    base = tmp_path_factory.mktemp("export")
    run = _skewed_run(base / "run")
    out = base / "back" / "merged.json.gz"
    out.parent.mkdir()
    text = _cli("export", run, "-o", out)
    report = decode_report(_cli("analyze", run, "--format", "json"))
    return run, report, json.loads(gzip.decompress(out.read_bytes())), out, text


def _processes(doc: dict) -> dict:
    return {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e.get("ph") == "M" and e["name"] == "process_name"
    }


def _threads(doc: dict, pid) -> dict:
    return {
        e["tid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == pid
    }


def test_the_run_is_aligned_before_export(exported):
    _run, report, *_ = exported
    (off,) = [v for k, v in report.run.clock_offsets_ns.items() if k == "1"]
    assert off == pytest.approx(SKEW_NS, abs=50_000)


def test_a_process_per_rank_and_no_pid_shared(exported):
    _run, report, doc, *_ = exported
    procs = _processes(doc)
    for r in report.run.ranks:
        assert f"rank {r}" in procs.values()
    by_rank: dict[int, set] = {}
    for e in doc["traceEvents"]:
        r = (e.get("args") or {}).get("rank")
        if isinstance(r, int):
            by_rank.setdefault(r, set()).add(e["pid"])
    assert sorted(by_rank) == report.run.ranks
    pids = [p for ps in by_rank.values() for p in ps]
    assert len(pids) == len(set(pids))  # no pid in two ranks


def test_every_original_event_is_kept(exported):
    run, _report, doc, *_ = exported
    kept: dict[int, list] = {}
    for e in doc["traceEvents"]:
        r = (e.get("args") or {}).get("rank")
        if isinstance(r, int) and e.get("name") not in ("process_name", "process_sort_index"):
            kept.setdefault(r, []).append(e)
    for path in sorted(run.glob("rank-*.json.gz")):
        rank = int(re.search(r"rank-(\d+)", path.name).group(1))
        _h, raw = decode(path)
        renamed = ("process_name", "process_sort_index")  # the export names and orders them
        orig = [e for e in json.loads(bytes(raw)) if e.get("name") not in renamed]
        assert len(kept[rank]) == len(orig)
        # names, phases and durations as traced
        assert sorted((e.get("name"), e.get("ph"), e.get("dur")) for e in orig) == sorted(
            (e.get("name"), e.get("ph"), e.get("dur")) for e in kept[rank]
        )


def test_tracekit_tracks(exported):
    _run, report, doc, *_ = exported
    procs = _processes(doc)
    (pid,) = [p for p, n in procs.items() if n == "tracekit"]
    threads = _threads(doc, pid)
    assert "findings" in threads.values()
    mine = [e for e in doc["traceEvents"] if e.get("pid") == pid and e.get("ph") == "X"]
    findings = [e for e in mine if e["cat"] == "tracekit.finding"]
    assert report.findings
    assert sorted(e["name"] for e in findings) == sorted(
        f"{f.code} {f.title}" for f in report.findings
    )
    assert all(e["dur"] > 0 for e in findings)
    steps = [e for e in mine if e["cat"] == "tracekit.step"]
    assert len(steps) == sum(r.steps for r in report.ranks)
    exposed = [e for e in mine if e["cat"] == "tracekit.exposed_comm"]
    # the exposed intervals of each rank add up to its exposed communication (whole
    # trace ⊇ the analysed window)
    for r in report.ranks:
        total_ms = sum(e["dur"] for e in exposed if e["args"]["of_rank"] == r.rank) / 1000
        assert total_ms >= r.exposed_comm_ms * (1 - 1e-6)


def test_finding_links_open_at_the_finding_slice(exported):
    _run, report, doc, _out, text = exported
    procs = _processes(doc)
    (pid,) = [p for p, n in procs.items() if n == "tracekit"]
    findings = {
        e["name"]: e
        for e in doc["traceEvents"]
        if e.get("pid") == pid and e.get("cat") == "tracekit.finding"
    }
    links = re.findall(r"visStart=(\d+)&visEnd=(\d+)", text)
    assert len(links) == len(report.findings)
    for f, (s, e) in zip(report.findings, links, strict=True):
        sl = findings[f"{f.code} {f.title}"]
        assert int(s) == pytest.approx(sl["ts"] * 1000, abs=1)  # Perfetto: ts µs × 1000
        assert int(e) == pytest.approx((sl["ts"] + sl["dur"]) * 1000, abs=1)


def test_reads_back_to_the_same_step_times(exported, tmp_path):
    run, report, _doc, out, _text = exported
    back = decode_report(_cli("analyze", out.parent, "--format", "json"))
    assert back.run.ranks == report.run.ranks
    assert back.run.clock_offsets_ns == {}  # one clock now
    for a, b in zip(report.ranks, back.ranks, strict=True):
        assert b.step_time_ms == pytest.approx(a.step_time_ms, rel=0.01)
    _same_figures(report, back)
    # the steps sit where the aligned run has them
    with open_run(run) as r:
        want = r.sql("SELECT rank, step, ts_ns FROM steps ORDER BY ALL").fetchall()
    with open_run(out.parent) as r:
        got = r.sql("SELECT rank, step, ts_ns FROM steps ORDER BY ALL").fetchall()
    assert got == want


def _same_figures(a, b) -> None:
    """Every per-rank figure, the summary and the findings' codes read back alike (the
    process groups travel in the export's `distributedInfoByRank`)."""
    ra, rb = to_dict(a), to_dict(b)
    for x, y in zip(ra["ranks"], rb["ranks"], strict=True):
        for k, v in x.items():
            assert y[k] == (pytest.approx(v, rel=1e-6, abs=1e-6) if v is not None else None), k
    for k in ("step_time_ms", "mfu", "comm_wait_fraction", "exposed_comm_fraction"):
        assert rb["summary"][k] == pytest.approx(ra["summary"][k], rel=1e-6), k
    assert [f["code"] for f in rb["findings"]] == [f["code"] for f in ra["findings"]]


def test_dlrm_8_ranks_read_back_alike(shared_trace, tmp_path):
    run = shared_trace("v100_dlrm_8rank")
    out = tmp_path / "back" / "merged.json.gz"
    out.parent.mkdir()
    _cli("export", run, "-o", out)
    report = decode_report(_cli("analyze", run, "--format", "json"))
    back = decode_report(_cli("analyze", out.parent, "--format", "json"))
    assert back.run.ranks == list(range(8))
    _same_figures(report, back)


def test_critical_path_track_when_the_report_has_a_step_model(tmp_path):
    run = tmp_path / "run"
    generate(SCENARIOS["pipeline_bubble"][0], run)
    report = decode_report(_cli("analyze", run, "--format", "json"))
    data = {**to_dict(report), "step_model": STEP_MODEL}
    bare = {k: v for k, v in to_dict(report).items() if k != "step_model"}
    with open_run(run) as r:
        plain = ex.trace_events(r, report, bare)
        with_model = ex.trace_events(r, report, data)
    assert not [e for e in plain if e.get("cat") == "tracekit.critical_path"]
    path = [e for e in with_model if e.get("cat") == "tracekit.critical_path"]
    assert len(path) == len(STEP_MODEL["critical_path"]["segments"])
    origin = min(x.window_start_ns for x in report.ranks)
    with open_run(run) as r:
        zero = ex.base_ns(r)
    first = STEP_MODEL["critical_path"]["segments"][0]
    assert path[0]["ts"] == pytest.approx((origin - zero) / 1000 + first["start_ms"] * 1000)
    assert path[0]["dur"] == pytest.approx(first["ms"] * 1000)


def test_bad_output_folder_is_one_line(tmp_path):
    run = shutil.copytree(ROOT / "sample_traces" / "ddp", tmp_path / "ddp")
    res = CliRunner().invoke(main, ["export", str(run), "-o", str(tmp_path / "no" / "x.json")])
    assert res.exit_code == 2
    assert "does not exist" in res.output and "Traceback" not in res.output


def test_served_for_perfetto(tmp_path):
    """`--serve` answers any path with the trace and lets ui.perfetto.dev read it."""
    import threading
    import urllib.request

    trace = tmp_path / "merged.json.gz"
    trace.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    server = ex.trace_server(trace, port=0)  # any free port on the loopback
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        with direct.open(f"http://127.0.0.1:{port}/{ex.SERVED_NAME}", timeout=10) as r:
            assert r.headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
            assert r.read() == trace.read_bytes()
    finally:
        server.shutdown()
        server.server_close()
