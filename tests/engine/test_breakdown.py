"""Per-rank breakdown: golden values, union arithmetic, and HTA as the oracle."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit
from tests.conftest import HTA_REFERENCE
from tests.tracegen import TraceBuilder, ddp_like_rank
from tracekit.errors import TracekitError
from tracekit.metrics.breakdown import StepSelection, per_rank


@pytest.fixture
def ddp_run(tmp_path):
    for r in range(2):
        ddp_like_rank(r, steps=3).write(tmp_path / f"rank-{r}.json.gz")
    with tracekit.open(tmp_path) as run:
        yield run


def test_golden_fractions_over_steps(ddp_run):
    rows = per_rank(ddp_run)
    assert [r.rank for r in rows] == [0, 1]
    for r in rows:
        assert r.steps == 3
        assert r.step_time_ms == pytest.approx(1.0)
        assert r.window_ms == pytest.approx(3.0)
        # per 1000 µs step: compute 600, comm 300, overlap 100, busy 800
        assert r.idle_fraction == pytest.approx(0.2)
        assert r.compute_fraction == pytest.approx(0.6)
        assert r.non_compute_fraction == pytest.approx(0.2)
        assert r.comm_fraction == pytest.approx(0.3)
        assert r.comm_overlap_fraction == pytest.approx(1 / 3)
        assert r.exposed_comm_fraction == pytest.approx(0.2)


def test_windows_table_is_made_once_and_read_from_any_cursor(ddp_run):
    from tracekit.metrics import windows as W

    wins = W.rank_windows(ddp_run)
    a, b = W.values(ddp_run, wins), W.values(ddp_run, wins)
    assert a == b and len(ddp_run.window_tables) == 1  # one table per distinct list
    rows = [(w.rank, 0, w.start_ns, w.end_ns, max(w.n_steps, 1)) for w in wins]
    # another thread's cursor (the TUI's) reads it: a table of the database, not TEMP
    assert ddp_run.con.cursor().sql(f"{a} ORDER BY rank").fetchall() == rows
    types = ddp_run.sql(f"DESCRIBE {a}").fetchall()
    assert [t[1] for t in types] == ["INTEGER", "INTEGER", "BIGINT", "BIGINT", "INTEGER"]
    other = W.table(ddp_run, rows[:1])
    assert other != a and ddp_run.sql(other).fetchall() == rows[:1]
    assert ddp_run.sql(W.table(ddp_run, [])).fetchall() == []


def test_step_selection(ddp_run):
    (r, _) = per_rank(ddp_run, steps="2-3")
    assert r.steps == 2 and r.window_ms == pytest.approx(2.0)
    (r, _) = per_rank(ddp_run, steps="1")
    assert r.steps == 1
    with pytest.raises(TracekitError, match="no ProfilerStep in that range"):
        per_rank(ddp_run, steps="40-50")


@pytest.mark.parametrize("spec", ["x", "5-2", "1-2-3"])
def test_bad_step_selection(spec):
    with pytest.raises(TracekitError):
        StepSelection.parse(spec)


def test_trace_window_is_first_to_last_device_event(ddp_run):
    r = per_rank(ddp_run, window="trace")[0]
    assert r.window_ms == pytest.approx(2.8)  # 100 µs … 2900 µs (last comm kernel end)


KIND = {
    "compute": "sm90_gemm",
    "comm": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
    "memcpy": None,
}


def _reference(intervals, start, end):
    """Per-µs sets: the definitions of the module docstring, computed the slow way."""
    sets = {k: set() for k in KIND}
    for kind, s, e in intervals:
        sets[kind].update(range(max(s, start), min(e, end)))
    busy = sets["compute"] | sets["comm"] | sets["memcpy"]
    return {
        "idle": (end - start) - len(busy),
        "compute": len(sets["compute"]),
        "comm": len(sets["comm"]),
        "overlap": len(sets["compute"] & sets["comm"]),
    }


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(KIND)), st.integers(0, 300), st.integers(1, 80)),
        min_size=1,
        max_size=20,
    )
)
def test_breakdown_matches_reference(tmp_path_factory, spans):
    tmp = tmp_path_factory.mktemp("prop")
    b = TraceBuilder(rank=0)
    b.step(1, 50.0, 250.0)  # window 50–300 µs clips some intervals
    intervals = []
    for i, (kind, s, d) in enumerate(spans):
        if kind == "memcpy":
            b.memcpy(float(s), float(d))
        else:
            b.kernel(KIND[kind], float(s), float(d), stream=7 + i % 3)
        intervals.append((kind, s, s + d))
    b.write(tmp / "rank-0.json")
    with tracekit.open(tmp) as run:
        (r,) = per_rank(run)
    ref = _reference(intervals, 50, 300)
    assert r.idle_fraction * 250 == pytest.approx(ref["idle"], abs=1e-6)
    assert r.compute_fraction * 250 == pytest.approx(ref["compute"], abs=1e-6)
    assert r.comm_fraction * 250 == pytest.approx(ref["comm"], abs=1e-6)
    assert r.overlap_ms * 1000 == pytest.approx(ref["overlap"], abs=1e-6)


# ------------------------------------------------------------ HTA as the oracle


def _hta_breakdown(trace_dir):
    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.WARNING)
    try:
        ta = TraceAnalysis(trace_dir=str(trace_dir))
        tb = ta.get_temporal_breakdown(visualize=False).set_index("rank")
        ov = ta.get_comm_comp_overlap(visualize=False).set_index("rank")
    finally:
        logging.disable(logging.NOTSET)
    return tb, ov


@pytest.mark.parametrize("name", sorted(HTA_REFERENCE))
def test_matches_hta_within_half_a_point(name, shared_trace, tmp_path):
    src = shared_trace(name)
    pytest.importorskip("hta")
    # HTA wants a writable folder of rank files
    import shutil

    run = tmp_path / name
    shutil.copytree(src, run, ignore=shutil.ignore_patterns(".tracekit"))
    tb, ov = _hta_breakdown(run)
    with tracekit.open(run) as r:
        ours = {row.rank: row for row in per_rank(r, window="hta")}
    for rank, (idle, comp, noncomp, overlap) in HTA_REFERENCE[name].items():
        # the oracle itself still says what the README table says
        assert tb.loc[rank, "idle_time_pctg"] == pytest.approx(idle, abs=0.01)
        got = ours[rank]
        assert 100 * got.idle_fraction == pytest.approx(tb.loc[rank, "idle_time_pctg"], abs=0.5)
        assert 100 * got.compute_fraction == pytest.approx(
            tb.loc[rank, "compute_time_pctg"], abs=0.5
        )
        assert 100 * got.non_compute_fraction == pytest.approx(
            tb.loc[rank, "non_compute_time_pctg"], abs=0.5
        )
        assert 100 * got.comm_overlap_fraction == pytest.approx(
            ov.loc[rank, "comp_comm_overlap_pctg"], abs=0.5
        )
        assert (comp, noncomp, overlap) == pytest.approx(
            (
                100 * got.compute_fraction,
                100 * got.non_compute_fraction,
                100 * got.comm_overlap_fraction,
            ),
            abs=0.5,
        )


@pytest.mark.parametrize("name", sorted(HTA_REFERENCE))
def test_default_window_differs_from_hta_only_by_the_window(name, shared_trace):
    """The default (ProfilerStep) window keeps every step and ns precision; document how far
    it lands from HTA's numbers on these traces (README, "Windows")."""
    with tracekit.open(shared_trace(name)) as r:
        ours = {row.rank: row for row in per_rank(r)}
    for rank, (idle, *_rest) in HTA_REFERENCE[name].items():
        assert abs(100 * ours[rank].idle_fraction - idle) < 5
