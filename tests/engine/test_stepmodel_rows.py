"""The step model's rank-local inputs built at ingest (`rank.step_device`, `rank.step_host`,
`rank.step_marks`) against what the recompute computed from the events before
(the device query's scan of every runtime call, the host events grouped in the window),
on real shared traces, a synthetic run, a CPU/gloo run without device rows and an old
trace; and the device rows' launches against the raw trace JSON."""

from __future__ import annotations

import gzip
import json

import pytest

import tracekit
from tests.synth import Scenario, generate
from tracekit import sql
from tracekit.stepmodel import rows

# the device query before `step_device` (the launch found by correlation among every
# runtime call of the run, in the recompute), its columns as `step_device`'s
OLD_DEVICE = """
WITH w AS ({windows}),
d AS (
    SELECT e.rank, coalesce(e.stream, e.tid) AS lane, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
           e.kind, e.name::VARCHAR AS name, e.correlation
    FROM events e JOIN w ON e.rank = w.rank
    WHERE e.kind IN ('kernel', 'memcpy', 'memset', 'comm_thread')
      AND e.ts_ns >= w.start_ns AND e.ts_ns < w.end_ns
), r AS (
    SELECT rank, correlation, any_value(tid) AS tid, min(ts_ns) AS ts_ns,
           max(ts_ns + dur_ns) AS end_ns, arg_min(name, ts_ns)::VARCHAR AS name FROM events
    WHERE kind = 'runtime' AND correlation IS NOT NULL
      AND (rank, correlation) IN (SELECT rank, correlation FROM d)
    GROUP BY rank, correlation
)
SELECT d.rank, d.lane, d.ts_ns, d.end_ns, d.kind, d.name,
       (d.kind = 'comm_thread' OR coalesce(kc.category = 'communication', false)) AS comm,
       r.tid, r.ts_ns, r.end_ns, r.name
FROM d
LEFT JOIN r ON r.rank = d.rank AND r.correlation = d.correlation AND d.kind <> 'comm_thread'
LEFT JOIN kernel_classes kc ON kc.rank = d.rank AND kc.name = d.name
ORDER BY ALL
"""
NEW_DEVICE = """
WITH w AS ({windows})
SELECT s.rank, s.lane, s.ts_ns, s.end_ns, s.kind, s.name, s.comm, s.launch_tid,
       s.launch_ts_ns, s.launch_end_ns, s.launch_name
FROM step_device s JOIN w ON s.rank = w.rank
WHERE s.ts_ns >= w.start_ns AND s.ts_ns < w.end_ns
ORDER BY ALL
"""
# one analysed window per rank: its second step (its first where it has one step), or
# the whole trace
STEP_WINDOW = """
SELECT rank, step AS wid, ts_ns AS start_ns, end_ns, 1 AS n FROM steps s
WHERE step = (SELECT CASE WHEN count(*) > 1 THEN min(step) + 1 ELSE min(step) END
              FROM steps t WHERE t.rank = s.rank)
"""
TRACE_WINDOW = """
SELECT rank, 0 AS wid, min(ts_ns) AS start_ns, max(ts_ns + dur_ns) + 1 AS end_ns, 1 AS n
FROM events GROUP BY rank
"""


def _windows(run) -> list[str]:
    has_steps = run.sql("SELECT count(*) FROM steps").fetchall()[0][0] > 0
    return [STEP_WINDOW, TRACE_WINDOW] if has_steps else [TRACE_WINDOW]


def _grouped_in_window(run, windows: str) -> list[list]:
    """The host's top-level events as the recompute grouped them before: every host event
    of the window, grouped there (`stepmodel.graph:host_events`, `rows.top_level`)."""
    q = sql.query("stepmodel.graph", "host_events", windows=windows)
    return rows.top_level(run.con.sql(q), 0)


def _no_ties(cols: list[list]) -> list[list]:
    """The columns less the rows of a thread whose (start, end) another row shares: two
    events with one span are grouped in an order the sort leaves open (µs traces)."""
    seen: dict[tuple, int] = {}
    for key in zip(cols[0], cols[1], cols[2], cols[3], strict=True):
        seen[key] = seen.get(key, 0) + 1
    keep = [
        k for k, key in enumerate(zip(cols[0], cols[1], cols[2], cols[3], strict=True))
        if seen[key] == 1
    ]  # fmt: skip
    return [[c[k] for k in keep] for c in cols]


def _check(run) -> int:
    """Compare the ingest's rows with the old computation over each window; the number
    of host rows compared."""
    n = 0
    for windows in _windows(run):
        old = run.sql(OLD_DEVICE.format(windows=windows)).fetchall()
        new = run.sql(NEW_DEVICE.format(windows=windows)).fetchall()
        assert new == old
        got = rows.host(run.con, windows, 0)
        want = _grouped_in_window(run, windows)
        # the same top-level events, thread by thread, in the same order
        assert got[:4] == want[:4]
        assert _no_ties(got) == _no_ties(want)
        n += len(got[0])
    return n


@pytest.mark.parametrize(
    "name", ["v100_ddp_rank1", "a100_sendrecv_2rank", "mi300_resnet_ddp4_merged"]
)
def test_ingest_rows_match_the_recompute_on_real_traces(shared_trace, name):
    with tracekit.open(shared_trace(name)) as run:
        assert _check(run) > 0


def test_ingest_rows_match_the_recompute_on_a_synthetic_run(tmp_path):
    generate(Scenario(name="rows", world=2), tmp_path)
    with tracekit.open(tmp_path) as run:
        assert _check(run) > 0
        assert run.sql("SELECT count(*) FROM step_device").fetchall()[0][0] > 0


def test_a_cpu_gloo_run_has_no_device_rows_but_its_gloo_spans(shared_trace):
    with tracekit.open(shared_trace("cpu_gloo_rank34")) as run:
        kinds = {k for (k,) in run.sql("SELECT DISTINCT kind FROM step_device").fetchall()}
        assert kinds <= {"comm_thread"}
        assert _check(run) > 0


def test_an_old_trace_leaves_its_profiler_step_operators_out(shared_trace):
    """Old traces record ProfilerStep#N as a CPU op: not a host node, but a step mark."""
    with tracekit.open(shared_trace("v100_resnet50_single")) as run:
        assert _check(run) > 0
        names = run.sql("SELECT name FROM step_host WHERE starts_with(name, 'Profiler')")
        assert names.fetchall() == []
        steps = run.sql("SELECT count(*) FROM step_marks WHERE what = 'step'").fetchall()[0][0]
        assert steps == run.sql("SELECT count(*) FROM steps").fetchall()[0][0]


def test_a_window_that_cuts_a_host_event_is_grouped_in_the_window(shared_trace):
    """A window starting inside a top-level event: its events in the window group as the
    window sees them (`host_cut`), not as the whole trace does."""
    with tracekit.open(shared_trace("v100_ddp_rank1")) as run:
        # the longest top-level host event with others inside it; the window starts
        # halfway through it
        (mid,) = run.sql(
            "SELECT (ts_ns + end_ns) // 2 FROM step_host ORDER BY end_ns - ts_ns DESC LIMIT 1"
        ).fetchall()[0]
        windows = (
            f"SELECT rank, 0 AS wid, {mid}::BIGINT AS start_ns, max(ts_ns + dur_ns) + 1 "
            "AS end_ns, 1 AS n FROM events GROUP BY rank"
        )
        cut = run.sql(sql.query("stepmodel.graph", "host_cut", windows=windows)).fetchall()
        assert cut != []
        got = rows.host(run.con, windows, 0)
        want = _grouped_in_window(run, windows)
        assert got == want
        # events inside the cut one are top-level in the window, not over the trace
        whole = run.sql(f"SELECT count(*) FROM step_host WHERE ts_ns >= {mid}").fetchall()[0][0]
        assert len(got[0]) > whole


def _raw_events_and_launches(path) -> tuple[list[dict], dict]:
    """The raw JSON's complete events, and its runtime events by correlation (the first
    of each): the launching calls, read without tracekit."""
    (f,) = path.glob("*.json.gz")
    with gzip.open(f) as fh:
        trace = json.load(fh)
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    runtime = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "Runtime", "cuda_driver"):
            c = e.get("args", {}).get("correlation")
            if c is not None:
                runtime.setdefault(c, e)
    return events, runtime


def test_device_launches_match_the_raw_trace(shared_trace):
    """Each kernel's launch call (start, end, name, thread) as the raw JSON says: the
    runtime event with the kernel's correlation."""
    path = shared_trace("v100_ddp_rank1")
    events, runtime = _raw_events_and_launches(path)
    kernels = [e for e in events if e.get("cat") in ("kernel", "Kernel")]
    assert kernels
    with tracekit.open(path) as run:
        got = run.sql(
            "SELECT name, launch_name, launch_end_ns - launch_ts_ns, launch_tid, "
            "ts_ns - launch_ts_ns FROM step_device WHERE kind = 'kernel'"
        ).fetchall()
    assert len(got) == len(kernels)
    want = []
    for k in kernels:
        r = runtime[k["args"]["correlation"]]
        want.append(
            (
                k["name"],
                r["name"],
                round(r["dur"] * 1000),
                r["tid"],
                round((k["ts"] - r["ts"]) * 1000),
            )
        )
    # ns from µs with 3 decimals: within rounding
    assert sorted((*x[:2], x[3]) for x in got) == sorted((*x[:2], x[3]) for x in want)
    gaps = sorted((x[0], x[4]) for x in got)
    truth = sorted((x[0], x[4]) for x in want)
    assert all(abs(a[1] - b[1]) <= 2 for a, b in zip(gaps, truth, strict=True))


def test_twins_are_named_after_the_cpu_op_whatever_the_rows_order():
    # a CPU op and the runtime call it wraps with the same start and end (real in
    # a100_recsys_rank0_of16, v100_dlrm_8rank): the top-level node is the CPU op's, in
    # whichever order the rows arrive; two CPU-op twins: the first name
    import duckdb

    from tracekit import sql

    rows = [
        (0, 1, 100, 50, "cudaLaunchKernel", "runtime", 7, None),
        (0, 1, 100, 50, "aten::add_", "cpu_op", None, None),
        (0, 1, 200, 30, "b_op", "cpu_op", None, None),
        (0, 1, 200, 30, "a_op", "cpu_op", None, None),
    ]
    for order in (rows, rows[::-1]):
        con = duckdb.connect()
        con.execute(
            "CREATE TABLE events (rank INT, tid BIGINT, ts_ns BIGINT, dur_ns BIGINT,"
            " name VARCHAR, kind VARCHAR, correlation BIGINT, stream BIGINT)"
        )
        con.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", order)
        con.execute(sql.module("rank.step_host"))  # CREATE VIEW step_host
        got = con.execute("SELECT ts_ns, name FROM step_host ORDER BY ts_ns").fetchall()
        assert got == [(100, "aten::add_"), (200, "a_op")]


def test_device_query_names_only_calls_that_outlast_their_work(shared_trace):
    """`stepmodel.graph:device` names a kernel's, copy's or memset's launching call only
    where the call (the runtime event with its correlation in the raw JSON) ended at or
    after the work did — the one case the graph reads the name (a blocking copy); `gloo`
    is false for every device row of a GPU trace."""
    from collections import Counter

    path = shared_trace("v100_ddp_rank1")
    events, runtime = _raw_events_and_launches(path)
    cats = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
    want, close = Counter(), 0
    for k in (e for e in events if e.get("cat") in cats):
        r = runtime.get(k.get("args", {}).get("correlation"))
        margin = (r["ts"] + r["dur"] - k["ts"] - k["dur"]) * 1000 if r else -1.0e9
        close += abs(margin) <= 2  # µs with 3 decimals: a tie within ns rounding
        want[(k["name"], r["name"] if r and margin >= 0 else None)] += 1
    assert sum(n for (_k, call), n in want.items() if call is not None) > 0  # 30 in this trace
    with tracekit.open(path) as run:
        q = sql.query("stepmodel.graph", "device", windows=TRACE_WINDOW)
        got = run.sql(f"SELECT name, launch_name, gloo FROM ({q})").fetchall()
    assert got and not any(g for *_, g in got)
    have = Counter((name, call) for name, call, _g in got)
    assert sum(have.values()) == sum(want.values())
    assert sum(((have - want) + (want - have)).values()) <= 2 * close
