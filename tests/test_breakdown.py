"""Per-rank breakdown: golden values, union arithmetic, and HTA as the oracle."""

from __future__ import annotations

import logging

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit
from tests.conftest import HTA_REFERENCE
from tests.tracegen import ddp_like_rank
from tracekit.breakdown import StepSelection, per_rank
from tracekit.errors import TracekitError


@pytest.fixture
def ddp_run(tmp_path):
    for r in range(2):
        ddp_like_rank(r, steps=3).write(tmp_path / f"rank-{r}.json.gz")
    with tracekit.open(tmp_path) as run:
        yield run


def test_golden_fractions_over_steps(ddp_run):
    rows = per_rank(ddp_run)
    assert [r["rank"] for r in rows] == [0, 1]
    for r in rows:
        assert r["steps"] == 3
        assert r["step_time_ms"] == pytest.approx(1.0)
        assert r["window_ms"] == pytest.approx(3.0)
        # per 1000 µs step: compute 600, comm 300, overlap 100, busy 800
        assert r["idle_fraction"] == pytest.approx(0.2)
        assert r["compute_fraction"] == pytest.approx(0.6)
        assert r["non_compute_fraction"] == pytest.approx(0.2)
        assert r["comm_fraction"] == pytest.approx(0.3)
        assert r["comm_overlap_fraction"] == pytest.approx(1 / 3)
        assert r["exposed_comm_fraction"] == pytest.approx(0.2)


def test_step_selection(ddp_run):
    (r, _) = per_rank(ddp_run, steps="2-3")
    assert r["steps"] == 2 and r["window_ms"] == pytest.approx(2.0)
    (r, _) = per_rank(ddp_run, steps="1")
    assert r["steps"] == 1
    with pytest.raises(TracekitError, match="no ProfilerStep in that range"):
        per_rank(ddp_run, steps="40-50")


@pytest.mark.parametrize("spec", ["x", "5-2", "1-2-3"])
def test_bad_step_selection(spec):
    with pytest.raises(TracekitError):
        StepSelection.parse(spec)


def test_trace_window_is_first_to_last_device_event(ddp_run):
    r = per_rank(ddp_run, window="trace")[0]
    assert r["window_ms"] == pytest.approx(2.8)  # 100 µs … 2900 µs (last comm kernel end)


def _union_sql(intervals: list[tuple[int, int]]) -> int:
    """Drive the breakdown's union expression on its own."""
    con = duckdb.connect()
    con.execute("CREATE TABLE sets (rank INT, grp VARCHAR, s BIGINT, e BIGINT)")
    if intervals:
        con.executemany("INSERT INTO sets VALUES (0, 'g', ?, ?)", intervals)
    (v,) = con.execute(
        "SELECT coalesce(sum(greatest(0, e - greatest(s, coalesce(prev_end, s)))), 0) FROM ("
        "SELECT *, max(e) OVER (PARTITION BY rank, grp ORDER BY s, e "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end FROM sets)"
    ).fetchall()[0]
    return int(v)


def _union_reference(intervals: list[tuple[int, int]]) -> int:
    covered = set()
    for s, e in intervals:
        covered.update(range(s, e))
    return len(covered)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=25))
def test_union_length_matches_reference(spans):
    intervals = [(s, s + d) for s, d in spans]
    assert _union_sql(intervals) == _union_reference(intervals)


def _breakdown_source() -> str:
    import inspect

    from tracekit import breakdown

    return inspect.getsource(breakdown._breakdown_sql)


def test_union_expression_is_the_one_the_breakdown_uses():
    # the property test above exercises this exact expression
    assert "greatest(0, e - greatest(s, coalesce(prev_end, s)))" in _breakdown_source()


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
    shutil.copytree(src, run)
    tb, ov = _hta_breakdown(run)
    with tracekit.open(run) as r:
        ours = {row["rank"]: row for row in per_rank(r, window="hta")}
    for rank, (idle, comp, noncomp, overlap) in HTA_REFERENCE[name].items():
        # the oracle itself still says what the README table says
        assert tb.loc[rank, "idle_time_pctg"] == pytest.approx(idle, abs=0.01)
        got = ours[rank]
        assert 100 * got["idle_fraction"] == pytest.approx(tb.loc[rank, "idle_time_pctg"], abs=0.5)
        assert 100 * got["compute_fraction"] == pytest.approx(
            tb.loc[rank, "compute_time_pctg"], abs=0.5
        )
        assert 100 * got["non_compute_fraction"] == pytest.approx(
            tb.loc[rank, "non_compute_time_pctg"], abs=0.5
        )
        assert 100 * got["comm_overlap_fraction"] == pytest.approx(
            ov.loc[rank, "comp_comm_overlap_pctg"], abs=0.5
        )
        assert (comp, noncomp, overlap) == pytest.approx(
            (
                100 * got["compute_fraction"],
                100 * got["non_compute_fraction"],
                100 * got["comm_overlap_fraction"],
            ),
            abs=0.5,
        )


@pytest.mark.parametrize("name", sorted(HTA_REFERENCE))
def test_default_window_differs_from_hta_only_by_the_window(name, shared_trace):
    """The default (ProfilerStep) window keeps every step and ns precision; document how far
    it lands from HTA's numbers on these traces (README, "Windows")."""
    with tracekit.open(shared_trace(name)) as r:
        ours = {row["rank"]: row for row in per_rank(r)}
    for rank, (idle, *_rest) in HTA_REFERENCE[name].items():
        assert abs(100 * ours[rank]["idle_fraction"] - idle) < 5
