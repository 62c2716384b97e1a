"""One definition per figure: the per-step samples are the report's own computation with
each step as the window. On every sample run and on synthetic GPU runs, for every
collective: the mean over steps of its time and exposed series is the report's
`time_ms_per_step` / `exposed_ms`; where the report's bus bandwidth is null, every sample
of it is null (and the gate does not judge it); per rank, the step-time series sums to
the steps' total and the time series to the report's ms over the window."""

from __future__ import annotations

import itertools
import shutil

import pytest

import tracekit
from tests.conftest import ROOT
from tests.helpers import full_report
from tests.synth import Scenario, generate

SAMPLES = sorted(p.name for p in (ROOT / "sample_traces").iterdir() if p.is_dir())
SYNTH = {
    "ddp": Scenario(world=4, steps=4, seed=21),
    "exposed": Scenario(world=4, steps=4, seed=22, buckets_after_backward=True),
    "straggler": Scenario(world=4, steps=4, seed=23, straggler=1),
    "pp": Scenario(world=4, steps=3, seed=24, pipeline=(4, 4), tokens=2048),
}


def _gap_ms(run, rank: int) -> float:
    """The part of a rank's steps window that no step covers (gaps between steps)."""
    rows = run.sql(
        "SELECT ts_ns, end_ns FROM steps WHERE rank = $r ORDER BY ts_ns", params={"r": rank}
    ).fetchall()
    return sum(max(b[0] - a[1], 0) for a, b in itertools.pairwise(rows)) / 1e6


def check(run) -> dict:
    rep = full_report(run)
    s = rep["samples"]
    n_steps = len(s["steps"])
    assert n_steps >= 1
    sam = {(c["name"], c["group_size"], c["bytes"]): c for c in s["collectives"]}
    assert set(sam) == {(c["name"], c["group_size"], c["bytes"]) for c in rep["collectives"]}
    ranks = {r["rank"]: r for r in rep["ranks"]}
    gap = max(_gap_ms(run, r) for r in ranks)
    for c in rep["collectives"]:
        x = sam[(c["name"], c["group_size"], c["bytes"])]
        # absent steps count 0, as the gate reads the series
        mean_time = sum(x["time_ms"]) / n_steps
        mean_exposed = sum(x["exposed_ms"]) / n_steps
        assert mean_time == pytest.approx(c["time_ms_per_step"], rel=1e-4, abs=1e-5 + gap), c
        assert mean_exposed == pytest.approx(c["exposed_ms"], rel=1e-4, abs=1e-5 + gap), c
        if c["busbw_GBps"] is None:
            assert all(v is None for v in x["busbw_GBps"]), c
        else:
            assert any(v is not None for v in x["busbw_GBps"])
    for r in s["ranks"]:
        want = ranks[r["rank"]]
        total = sum(r["step_time_ms"])
        assert total == pytest.approx(want["step_time_ms"] * want["steps"], rel=1e-6)
        for key in ("compute_ms", "comm_ms", "exposed_comm_ms"):
            assert sum(r[key]) == pytest.approx(want[key], abs=1e-5 + gap), key
        for key in ("idle_fraction", "compute_fraction", "exposed_comm_fraction"):
            # a fraction over the window is the step-weighted mean of the per-step ones
            weighted = sum(v * t for v, t in zip(r[key], r["step_time_ms"], strict=True))
            assert weighted / total == pytest.approx(want[key], abs=1e-5 + gap / total), key
        if "host_bound_ms" in r:
            assert sum(r["host_bound_ms"]) / total == pytest.approx(
                want["host_bound_fraction"], abs=1e-5 + gap / total
            )
    for k in rep["top_kernels"]:
        x = next(y for y in s["kernels"] if y["name"] == k["name"])
        assert sum(x["time_ms"]) / n_steps == pytest.approx(k["time_ms_per_step"], rel=1e-4)
    return rep


@pytest.mark.parametrize("name", SAMPLES)
def test_samples_are_the_report_per_step_on_sample_runs(name, tmp_path):
    run = shutil.copytree(
        ROOT / "sample_traces" / name, tmp_path / name, ignore=shutil.ignore_patterns(".tracekit")
    )
    with tracekit.open(run) as r:
        check(r)


@pytest.mark.parametrize("name", sorted(SYNTH))
def test_samples_are_the_report_per_step_on_synthetic_gpu_runs(name, tmp_path):
    generate(SYNTH[name], tmp_path)
    with tracekit.open(tmp_path) as r:
        rep = check(r)
    if name == "pp":  # point-to-point is never matched: no bandwidth, in report or samples
        assert all(c["busbw_GBps"] is None for c in rep["collectives"] if c["name"] == "send")


def test_the_gate_does_not_judge_a_null_bandwidth(tmp_path):
    """The report says a bus bandwidth cannot be known: the gate leaves it uncompared,
    whatever older samples might hold."""
    from tracekit.gate.baseline import Side
    from tracekit.gate.compare import run_compare

    run = shutil.copytree(
        ROOT / "sample_traces" / "hybrid",
        tmp_path / "h",
        ignore=shutil.ignore_patterns(".tracekit"),
    )
    with tracekit.open(run) as r:
        rep = full_report(r)
    nulls = [c for c in rep["collectives"] if c["busbw_GBps"] is None]
    assert nulls
    for c in rep["samples"]["collectives"]:  # an older report's samples held numbers
        c["busbw_GBps"] = [1.0 for _ in c["busbw_GBps"]]
    cmp = run_compare(Side("a", "report", [rep]), Side("b", "report", [rep]))
    for c in nulls:
        label = f"busbw[{c['name']}"
        v = [v for v in cmp.verdicts if v.metric.startswith(label)]
        assert v and all(x.verdict == "not compared" for x in v)


def test_kernel_time_keeps_the_top_names_as_python_ranks_all_of_them(tmp_path):
    """`kernel_time(top=N)` ranks the names in SQL: the same names and cells as ranking
    every name's rows in Python (`top_names`), ties by name; `names=` keeps those alone."""
    from tracekit.metrics import kernels as K
    from tracekit.metrics import windows as W

    run = shutil.copytree(
        ROOT / "sample_traces" / "ddp", tmp_path / "ddp", ignore=shutil.ignore_patterns(".tracekit")
    )
    with tracekit.open(run) as r:
        wins = W.values(r, W.rank_windows(r))
        every = K.kernel_time(r, wins)
        assert len(every) > 3
        for n in (1, 3, len(every) + 1):
            want = {name: every[name] for name in K.top_names(every, n)}
            assert K.kernel_time(r, wins, top=n) == want
        some = sorted(every)[1:3]
        assert K.kernel_time(r, wins, names=[*some, "no such kernel"]) == {
            name: every[name] for name in some
        }
        steps = W.step_windows()
        assert K.kernel_time(r, steps, top=2) == {
            name: cells
            for name, cells in K.kernel_time(r, steps).items()
            if name in K.top_names(K.kernel_time(r, steps), 2)
        }


def test_kernel_time_top_names_break_ties_by_name_and_keep_a_nameless_kernel(tmp_path):
    """Two kernels of equal time straddle the cut: the first by name is kept, as
    `top_names` keeps it; a kernel the trace names not at all is a name of its own (the
    ingest writes a missing or null name as "")."""
    from tests.tracegen import TraceBuilder
    from tracekit.metrics import kernels as K
    from tracekit.metrics import windows as W

    for rank in range(2):
        b = TraceBuilder(rank=rank, world_size=2)
        b.step(1, 0.0, 1000.0)
        b.kernel("k_b", 10.0, 100.0, launch_ts=5.0)
        b.kernel("k_a", 200.0, 100.0, launch_ts=195.0)
        b.kernel("k_c", 400.0, 50.0, launch_ts=395.0)
        nameless = b.kernel("unnamed", 500.0, 300.0, launch_ts=495.0)
        del nameless["name"]
        b.write(tmp_path / f"rank-{rank}.json")
    with tracekit.open(tmp_path) as r:
        wins = W.values(r, W.rank_windows(r))
        every = K.kernel_time(r, wins)
        assert set(every) == {"", "k_a", "k_b", "k_c"}
        assert K.top_names(every, 2) == ["", "k_a"]  # the truth: Python over every name
        for n in (1, 2, 3, 4):
            want = {name: every[name] for name in K.top_names(every, n)}
            assert K.kernel_time(r, wins, top=n) == want, n


@pytest.mark.parametrize("name", ["exposed", "straggler"])
def test_collective_exposure_computed_once_is_the_two_queries_apart(name, tmp_path):
    """The report's windows and the samples' step windows in one query (the pieces of
    each report window) give exactly what each query gives alone; a selection of steps
    and the trace window (no pieces: the queries run apart) too."""
    from tracekit.metrics import collectives as C

    generate(SYNTH[name], tmp_path)
    with tracekit.open(tmp_path) as run:
        for report, step in _windows_and_steps(run):
            want_report = C._cells(C._rows(run, report))
            want_steps = C._cells(C._rows(run, step))
            assert want_report and want_steps
            assert C.exposure_with_steps(run, report, step) == want_report
            assert C.exposure(run, step) == want_steps


def _windows_and_steps(run):
    """(the report's windows, the step windows) for the default steps window, a selection
    of steps and the trace window (no pieces there: the queries run apart); the pieces of
    the report windows where the window is the steps'."""
    from tracekit.metrics import windows as W
    from tracekit.metrics.breakdown import per_rank, windows_of

    first = run.sql("SELECT min(step) FROM device_steps WHERE analysed").fetchone()[0]
    for window, steps in (("steps", None), ("steps", f"{first + 1}-{first + 2}"), ("trace", None)):
        report = W.values(run, windows_of(per_rank(run, window=window, steps=steps)))
        step = W.step_windows(steps)
        if window == "steps":  # the one query over the pieces
            assert W.pieces(run, report, step) is not None
        yield report, step


@pytest.mark.parametrize("name", ["ddp", "pp"])
def test_kernel_time_computed_once_is_the_two_queries_apart(name, tmp_path):
    """The report's top kernels and the samples' series of those kernels in one query (the
    pieces of each report window) are exactly what each query gives alone; a selection of
    steps and the trace window (no pieces: the queries run apart) too."""
    from tracekit.metrics import kernels as K

    generate(SYNTH[name], tmp_path)
    with tracekit.open(tmp_path) as run:
        for report, step in _windows_and_steps(run):
            top = max(len(K.kernel_time(run, report)) - 1, 1)  # all but one name
            want_report = K.kernel_time(run, report, top=top)
            assert len(want_report) == top
            names = K.top_names(want_report, top)
            want_steps = K.kernel_time(run, step, names)
            assert want_steps
            assert K.kernel_time_with_steps(run, report, step, top=top) == want_report
            assert K.kernel_time(run, step, names) == want_steps
            assert K.kernel_time(run, step, names[:1]) == {names[0]: want_steps[names[0]]}


@pytest.mark.parametrize("name", ["ddp", "pp"])
def test_device_gaps_ordered_once_are_the_two_queries_apart(name, tmp_path):
    """The host-bound gaps of the report's windows and of the step windows from one
    ordering of the work over the pieces are the rows `device_gaps` gives over each alone
    (the report's: the work before an item in the earlier pieces counts)."""
    from tracekit.metrics import windows as W
    from tracekit.metrics.breakdown import (
        device_gaps_sql,
        device_gaps_with_steps,
        host_bound_sql,
        per_rank,
        windows_of,
    )

    generate(SYNTH[name], tmp_path)
    with tracekit.open(tmp_path) as run:
        for window in ("steps", "trace"):
            report = W.values(run, windows_of(per_rank(run, window=window)))
            step = W.step_windows(None)
            apart = device_gaps_sql(report)
            want_gaps = sorted(run.sql(apart).fetchall(), key=repr)
            want_steps = run.sql(f"{host_bound_sql(step)} ORDER BY rank, wid").fetchall()
            assert want_gaps and want_steps
            got = run.sql(device_gaps_with_steps(run, report, step)).fetchall()
            assert sorted(got, key=repr) == want_gaps
            assert run.sql(f"{host_bound_sql(step, run)} ORDER BY rank, wid").fetchall() == (
                want_steps
            )
            if window == "steps":
                assert W.pieces(run, report, step) is not None


@pytest.mark.parametrize("name", ["ddp", "pp"])
def test_piece_work_by_numpy_is_the_sql_windows(name, tmp_path):
    """`piece_work_table` (the items sorted in DuckDB, `prev_end` and `before_end` running
    maxima in numpy) gives the rows of the SQL (`piece_work` over `work`'s window) over
    the pieces of the report's windows, and of a selection of steps."""
    from tracekit import sql
    from tracekit.metrics import windows as W
    from tracekit.metrics.breakdown import per_rank, piece_work_table, windows_of, work_sql

    generate(SYNTH[name], tmp_path)
    with tracekit.open(tmp_path) as run:
        first = run.sql("SELECT min(step) FROM device_steps WHERE analysed").fetchall()[0][0]
        for steps in (None, f"{first + 1}-{first + 2}"):
            report = W.values(run, windows_of(per_rank(run, window="steps", steps=steps)))
            pieces = W.table(run, W.pieces(run, report, W.step_windows(steps)))
            apart = sql.query("metrics.host_bound", "piece_work", work=work_sql(pieces))
            want = sorted(run.sql(apart).fetchall(), key=repr)
            assert any(r[-1] is not None for r in want) and any(r[-1] is None for r in want)
            assert sorted(run.sql(piece_work_table(run, pieces)).fetchall(), key=repr) == want


@pytest.mark.parametrize("name", ["exposed", "pp"])
def test_the_sweep_over_the_pieces_is_the_two_sweeps_apart(name, tmp_path):
    """`per_rank`'s sweep over the pieces of the report's windows: each rank's figures
    and the steps' rows the samples read are what the sweep over each alone gives."""
    from tracekit import sql
    from tracekit.metrics import windows as W
    from tracekit.metrics.breakdown import _rows, sweep_sql

    generate(SYNTH[name], tmp_path)
    with tracekit.open(tmp_path) as run:
        for window in ("steps", "trace", "hta"):
            wins = W.rank_windows(run, window, None)
            alone = sweep_sql(W.values(run, wins), W.activity_table(window))
            want = {r[0]: r[2:] for r in run.sql(alone).fetchall()}
            step = W.step_windows(None)
            per_step = sql.query(
                "metrics.step_windows",
                "window_breakdown",
                windows=step,
                sweep=sweep_sql("SELECT * FROM w"),
            )
            assert _rows(run, wins, W.activity_table(window), None) == want
            if window == "steps":
                assert W.kept(run, ("window_breakdown", step)) == run.sql(per_step).fetchall()
