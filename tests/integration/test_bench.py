"""The benchmark's pure helpers (benchmarks/benchlib.py): runs built from one trace, the
replicated big trace, and the targets table. Nothing here is timed."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_benchlib():
    # by path: putting benchmarks/ on sys.path would let benchmarks/tui.py shadow `tui`
    spec = importlib.util.spec_from_file_location("benchlib", ROOT / "benchmarks" / "benchlib.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["benchlib"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


bl = _load_benchlib()

EVENTS = [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 100, "dur": 50},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "ts": 150, "dur": 40},
    {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::mm",
        "ts": 101,
        "dur": 10,
        "args": {"External id": 7, "Sequence number": 2, "Ev Idx": 5},
    },
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "ts": 102,
        "dur": 3,
        "args": {"External id": 7, "correlation": 9},
    },
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9, "ts": 102},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 9, "ts": 180, "bp": "e"},
    {
        "ph": "X",
        "cat": "kernel",
        "name": "gemm",
        "ts": 180,
        "dur": 15.5,
        "args": {"External id": 7, "correlation": 9},
    },
]


def test_replica_plan_by_hand():
    plan = bl.replica_plan(EVENTS)
    # span: first start 100, last end 180 + 15.5 = 195.5 → ceil(95.5) + 1 = 97
    assert plan == bl.ReplicaPlan(span_us=97, id_stride=10, step_stride=2)


def test_replica_moves_times_ids_and_steps_and_keeps_the_input():
    before = json.dumps(EVENTS)
    plan = bl.ReplicaPlan(span_us=97, id_stride=10, step_stride=2)
    assert bl.replica(EVENTS, 0, plan) == EVENTS
    copy = bl.replica(EVENTS, 2, plan)
    assert json.dumps(EVENTS) == before
    assert [e["ph"] for e in copy] == ["X", "X", "X", "X", "s", "f", "X"]  # metadata once
    steps = [(e["name"], e["ts"]) for e in copy if e["name"].startswith("ProfilerStep")]
    assert steps == [("ProfilerStep#7", 294), ("ProfilerStep#8", 344)]
    mm = copy[2]["args"]
    assert (mm["External id"], mm["Sequence number"], mm["Ev Idx"]) == (27, 22, 5)
    assert copy[3]["args"] == {"External id": 27, "correlation": 29}
    assert [e["id"] for e in copy if e["ph"] in "sf"] == [29, 29]
    assert copy[-1]["ts"] == 374 and copy[-1]["dur"] == 15.5


def _trace(tmp_path: Path, events: list[dict]) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}}
    with gzip.open(src / "t.json.gz", "wt") as fh:
        json.dump({**doc, "traceEvents": events}, fh)
    return src


def test_build_big_reaches_the_size_and_counts_what_it_wrote(tmp_path):
    src = _trace(tmp_path, EVENTS)
    one = len(json.dumps(EVENTS[1:], separators=(",", ":")))
    big = bl.build_big(src, tmp_path / "big", 3 * one)
    text = gzip.decompress(big.path.read_bytes())
    assert big.json_bytes == len(text) >= 3 * one
    events = json.loads(text)["traceEvents"]
    assert big.events == len(events) == 1 + 7 * big.copies
    assert big.copies >= 3
    names = [e["name"] for e in events if e["name"].startswith("ProfilerStep")]
    assert names == [f"ProfilerStep#{n}" for n in range(3, 3 + 2 * big.copies)]
    assert len({e["id"] for e in events if e["ph"] == "s"}) == big.copies
    # a second call reuses the file
    stamp = big.path.stat().st_mtime_ns
    assert bl.build_big(src, tmp_path / "big", 3 * one).path.stat().st_mtime_ns == stamp


def test_big_trace_of_a_real_rank_ingests_with_unique_steps_and_flows(tmp_path):
    src = ROOT / "sample_traces" / "ddp" / "rank-0.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    steps = sum(e.get("name", "").startswith("ProfilerStep#") for e in doc["traceEvents"])
    starts = sum(e.get("ph") == "s" for e in doc["traceEvents"])
    big = bl.build_big(src, tmp_path / "big", 2 * 2**20)  # the source is 4 MB: one copy
    assert big.copies == 1
    big = bl.build_big(src, tmp_path / "big3", 10 * 2**20)
    assert big.copies == 3
    sql = (
        "SELECT (SELECT count(DISTINCT step) FROM steps), (SELECT count(*) FROM steps), "
        "(SELECT count(DISTINCT flow_id) FROM flows WHERE phase = 's'), "
        "(SELECT count(*) FROM flows WHERE phase = 's')"
    )
    cmd = [sys.executable, "-m", "tracekit.cli", "query", str(big.path.parent), "--sql", sql]
    out = subprocess.run(
        [*cmd, "--format", "json", "--workers", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    row = list(json.loads(out.stdout)[0].values())
    assert row == [3 * steps, 3 * steps, 3 * starts, 3 * starts]


def test_build_small_run_repeats_the_source_ranks(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for r in range(2):
        doc = {"distributedInfo": {"rank": r, "world_size": 2}, "traceEvents": EVENTS[r:]}
        (src / f"w{r}.json").write_text(json.dumps(doc))
    files = bl.build_small_run(src, 5, tmp_path / "run")
    for r, f in enumerate(files):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        assert doc["distributedInfo"] == {"rank": r, "world_size": 5}
        assert doc["traceEvents"] == EVENTS[r % 2 :]


def test_build_run_sets_rank_and_world_size(tmp_path):
    src = _trace(tmp_path, EVENTS)
    files = bl.build_run(src, 3, tmp_path / "run")
    for r, f in enumerate(files):
        text = gzip.decompress(f.read_bytes())
        assert bl.gzip_text_bytes(f) == len(text)
        doc = json.loads(text)
        assert doc["distributedInfo"] == {"rank": r, "world_size": 3}
        assert doc["traceEvents"] == EVENTS


def _m(seconds, mib):
    return {"seconds": seconds, "peak_rss_bytes": mib * 2**20}


def test_evaluate_against_hand_ratios():
    figs = {
        "8 big ranks": {
            "hta": _m(20.0, 1000),
            "floor": _m(2.0, 100),
            "analyze_cold": _m(3.8, 500),
            "analyze_warm": _m(0.6, 80),
        },
        "64 big ranks": {
            "floor": _m(16.0, 100),
            "analyze_cold": _m(32.0, 800),
            "analyze_warm": _m(1.0, 90),
        },
        "1024 small ranks": {
            "floor": _m(4.0, 100),
            "analyze_cold": _m(12.4, 700),
            "analyze_warm": _m(0.9, 90),
        },
    }
    rows = bl.evaluate(figs, "8 big ranks", "64 big ranks", "1024 small ranks")
    got = {r.target: (r.value, r.met) for r in rows}
    assert got == {
        "cold analyze ≤ 2× floor (8 big ranks)": (pytest.approx(1.9), True),
        "cold analyze ≤ 3× floor (1024 small ranks)": (pytest.approx(3.1), False),
        "warm analyze ≤ 0.5 s (8 big ranks)": (0.6, False),
        "warm analyze ≤ 1 s (1024 small ranks)": (0.9, True),
        "cold (64 big ranks) ≤ 8× cold (8 big ranks)": (pytest.approx(32 / 3.8), False),
        "cold peak RSS (64 big ranks) ≤ 1.5× (8 big ranks)": (pytest.approx(1.6), False),
    }


def test_bound_is_the_parallel_decode_plus_the_recompute_by_hand():
    figs = {
        "8 big ranks": {
            "floor": _m(1.7, 100),
            "floor_parallel": _m(0.9, 300),
            "analyze_recompute": _m(2.3, 350),
        },
        "1024 small ranks": {"floor": _m(3.0, 20), "analyze_recompute": _m(3.1, 650)},
    }
    b = bl.bound(figs, "8 big ranks", 2.0)
    # 0.9 + 2.3 = 3.2 s = 1.88x of 1.7 s; 2 x 1.7 - 3.2 = 0.2 s left for the tables
    assert (b.seconds, b.ratio, b.left_seconds) == (
        pytest.approx(3.2),
        pytest.approx(3.2 / 1.7),
        pytest.approx(0.2),
    )
    assert bl.bound(figs, "1024 small ranks", 3.0) is None  # no floor_parallel measured
    assert bl.bound(figs, None, 3.0) is None


def test_measure_lets_the_phases_keep_their_bytecode(monkeypatch):
    # a shell that forbids bytecode caches must not make every timed phase recompile
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    m = bl.measure([sys.executable, "-c", "import sys; print(sys.dont_write_bytecode)"])
    assert m.stdout.strip() == "False"


def test_evaluate_says_not_measured():
    figs = {"8 big ranks": {"floor": _m(2.0, 100), "analyze_cold": _m(2.0, 500)}}
    rows = bl.evaluate(figs, "8 big ranks", None, None)
    missing = [r.target for r in rows if r.met is None]
    assert len(rows) == 6 and len(missing) == 5
    assert all(r.measured == "not measured" for r in rows if r.met is None)
    assert rows[0].met is True  # 1.0× the floor


def test_markdown_rows_and_ratios():
    result = {
        "workers": 2,
        "runs": {
            "8 big ranks": {"phases": {"floor": _m(2.0, 100), "analyze_cold": _m(2.5, 512)}},
            "64 big ranks": {"phases": {"floor": _m(16.0, 100), "analyze_warm": _m(1.0, 64)}},
        },
        "targets": [{"target": "warm ≤ 1.5 s", "measured": "1.00 s", "met": True}],
    }
    lines = bl.markdown(result).splitlines()
    cold = next(x for x in lines if "cold (no cache)" in x)
    assert cold.endswith("| 2.50 s |  | 512 MiB | 1.25× |  |  |  |  |")
    warm = next(x for x in lines if "warm:" in x)
    assert warm.endswith("|  |  |  |  | 1.00 s |  | 64 MiB | 0.06× |")
    assert lines[0].startswith("| phase | 8 big ranks | CPU | peak RSS | × floor | 64 big ranks |")
    assert not any("HTA" in x for x in lines)  # no row for a phase not measured
    assert lines[-1] == "| warm ≤ 1.5 s | 1.00 s | yes |"


def _load_split():
    spec = importlib.util.spec_from_file_location(
        "ingest_split", ROOT / "benchmarks" / "ingest_split.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ingest_split_names_every_step_of_a_real_ingest(tmp_path):
    """The split tool times the runner's own statements: each table the ingest builds and
    each Parquet file it writes gets its own label (a renamed statement in the runner
    would fall into a catch-all and fail here), the steps add up to the total, and the
    ingest is left as it was (duckdb.connect and tracefile.decode restored)."""
    import duckdb

    from tracekit.ingest import cache, tracefile

    split = _load_split()
    connect, decode = duckdb.connect, tracefile.decode
    spent = split.one_run([ROOT / "sample_traces" / "ddp" / "rank-0.json.gz"])
    assert (duckdb.connect, tracefile.decode) == (connect, decode)
    for table in cache.TABLES:
        assert f"parquet {table}" in spent, table
    built = {"events", "flows", "memory", "threads", "steps", "device_activity"}
    built |= {"activity_islands", "activity_segments", "op_flops", "collective_groups"}
    for table in built:
        assert f"table {table}" in spent, table
    assert spent["read_json → raw"] > 0 and spent["gunzip + split (isal, msgspec)"] > 0
    steps = sum(v for k, v in spent.items() if k != "TOTAL")
    assert abs(steps - spent["TOTAL"]) < 1e-9
    assert split.label("SELECT 1") == "queries (other)"
    assert "query issue_ops" in spent and "table collectives" in spent
