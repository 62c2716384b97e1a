"""The fast breakdown paths against independent formulations, on every real trace.

- `sweep_sql` sums the segments materialized at ingest (`activity_segments`); the full
  sweep over the islands (`full_sweep_sql`, what HTA's window still uses) is the oracle:
  both must give the same integer ns for every window, per rank and per step.
- `hidden_by_compute_sql` reads the islands' running sum with ASOF lookups; the oracle is
  a plain interval intersection in Python.
- `device_activity.launch_ns` (joined at ingest, read by the host-bound figure) is the
  launching runtime call's start, looked up again here event by event.
- `op_flops` gives each launch to its op with an ASOF lookup; the oracle is the range join
  (every compute kernel launched between the op's start and end on its thread).
"""

from __future__ import annotations

import bisect
import shutil
from pathlib import Path

import pytest

import tracekit
from tests.conftest import shared_trace_names
from tests.synth import merge_intervals
from tracekit.metrics.breakdown import full_sweep_sql, hidden_by_compute_sql, sweep_sql

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
STEP_WINDOWS = "SELECT rank, step AS wid, ts_ns AS start_ns, end_ns FROM steps"
RANK_WINDOWS = """SELECT rank, 0 AS wid, min(ts_ns) AS start_ns, max(end_ns) AS end_ns
                  FROM activity_islands GROUP BY rank"""


def _cases() -> list:
    return [pytest.param("shared", n, id=n) for n in shared_trace_names()] + [
        pytest.param("sample", p.name, id=f"sample-{p.name}")
        for p in sorted(SAMPLES.iterdir())
        if p.is_dir()
    ]


@pytest.fixture
def open_case(shared_trace, tmp_path):
    def get(kind: str, name: str):
        if kind == "shared":
            return tracekit.open(shared_trace(name), allow_mixed=True)
        dest = tmp_path / name
        shutil.copytree(SAMPLES / name, dest, ignore=shutil.ignore_patterns(".tracekit"))
        return tracekit.open(dest, allow_mixed=True)

    return get


def _hidden_oracle(run, intervals, windows) -> dict[int, int]:
    islands: dict[int, list[tuple[int, int]]] = {}
    for rank, s, e in run.sql(
        "SELECT rank, ts_ns, end_ns FROM activity_islands WHERE category = 'computing' "
        "ORDER BY rank, ts_ns"
    ).fetchall():
        islands.setdefault(rank, []).append((s, e))
    starts = {r: [s for s, _ in v] for r, v in islands.items()}
    out = {}
    for i, (rank, s, e) in enumerate(intervals):
        total = 0
        for wr, ws, we in windows:
            a, b = max(s, ws), min(e, we)
            if wr != rank or b <= a:
                continue
            isl = islands.get(rank, [])
            j = max(bisect.bisect_right(starts.get(rank, []), a) - 1, 0)
            while j < len(isl) and isl[j][0] < b:
                total += max(0, min(b, isl[j][1]) - max(a, isl[j][0]))
                j += 1
        out[i] = total
    return out


@pytest.mark.parametrize(("kind", "name"), _cases())
def test_fast_paths_equal_their_oracles(kind, name, open_case):
    with open_case(kind, name) as run:
        for windows in (STEP_WINDOWS, RANK_WINDOWS):
            fast = sorted(run.sql(f"SELECT * FROM ({sweep_sql(windows)})").fetchall())
            full = sorted(
                run.sql(f"SELECT * FROM ({full_sweep_sql(windows, 'activity_islands')})").fetchall()
            )
            assert fast == full
        ((wrong_launch,),) = run.sql(
            """SELECT count(*) FROM device_activity a
               WHERE a.kind IN ('kernel', 'memcpy', 'memset')
                 AND a.launch_ns IS DISTINCT FROM (
                     SELECT min(r.ts_ns) FROM events r WHERE r.rank = a.rank
                       AND r.kind = 'runtime' AND r.correlation = a.correlation)"""
        ).fetchall()
        assert wrong_launch == 0
        by_range = sorted(
            run.sql(
                """SELECT o.rank, o.tid, o.ts_ns, count(k.dur_ns), coalesce(sum(k.dur_ns), 0)
                   FROM op_flops o
                   LEFT JOIN events r ON r.rank = o.rank AND r.tid = o.tid
                        AND r.kind = 'runtime' AND r.ts_ns BETWEEN o.ts_ns AND o.ts_ns + o.dur_ns
                   LEFT JOIN events k ON k.rank = r.rank AND k.correlation = r.correlation
                        AND k.kind = 'kernel' AND EXISTS (
                            SELECT 1 FROM kernel_classes c WHERE c.rank = k.rank
                              AND c.name = k.name::VARCHAR AND c.category = 'compute')
                   GROUP BY ALL"""
            ).fetchall()
        )
        by_asof = sorted(
            run.sql(
                "SELECT rank, tid, ts_ns, kernels, coalesce(kernel_ns, 0) FROM op_flops"
            ).fetchall()
        )
        assert by_asof == by_range
        intervals = run.sql(
            "SELECT rank, ts_ns, end_ns FROM collectives "
            "UNION ALL SELECT rank, ts_ns, end_ns FROM steps ORDER BY ALL"
        ).fetchall()
        windows = run.sql("SELECT rank, ts_ns, end_ns FROM steps").fetchall()
        if not windows:
            windows = run.sql(
                "SELECT rank, min(ts_ns), max(end_ns) FROM activity_islands GROUP BY rank"
            ).fetchall()
        values = ", ".join(f"({i}, {r}, {s}, {e})" for i, (r, s, e) in enumerate(intervals))
        if not values:
            return
        wv = ", ".join(f"({r}, {s}, {e})" for r, s, e in windows)
        got = dict(
            run.sql(
                f"""SELECT i, hidden FROM ({
                    hidden_by_compute_sql(
                        f"SELECT * FROM (VALUES {values}) t(i, rank, s, e)",
                        f"SELECT * FROM (VALUES {wv}) w(rank, start_ns, end_ns)",
                    )
                })"""
            ).fetchall()
        )
        assert got == _hidden_oracle(run, intervals, windows)


# traces where rows tie (one size of two dtypes, equal times) or sums run over many ranks
DETERMINISM = ["a100_recsys_rank3_of8", "v100_recsys_rank1_of2", "mi300_resnet_ddp4_merged"]


@pytest.mark.parametrize("name", DETERMINISM)
def test_report_is_the_same_with_or_without_materialized_views(name, shared_trace, monkeypatch):
    """`Run.materialize` only caches the cross-rank views, and the report does not
    depend on the order DuckDB returns rows in: both reports are equal, value for value."""
    from tests.helpers import full_report
    from tracekit.store import run as store

    src = shared_trace(name)
    with tracekit.open(src, allow_mixed=True) as run:
        fast = full_report(run)
    monkeypatch.setattr(store.Run, "materialize", lambda self: None)
    with tracekit.open(src, allow_mixed=True) as run:
        plain = full_report(run)
    assert fast == plain


def _computing_oracle(compute, waits) -> list[tuple[int, int]]:
    """Compute time less host waits, as maximal intervals of positive length."""
    out: list[tuple[int, int]] = []
    w = merge_intervals(waits)
    for s, e in merge_intervals(compute):
        cur = s
        for ws, we in w:
            if we <= cur or ws >= e:
                continue
            if ws > cur:
                out.append((cur, ws))
            cur = max(cur, we)
        if cur < e:
            out.append((cur, e))
    return [(s, e) for s, e in merge_intervals(out)]  # touching pieces joined


@pytest.mark.parametrize(("kind", "name"), _cases())
def test_computing_islands_are_compute_less_host_waits(kind, name, open_case):
    """activity_islands' `computing` rows (a sweep on ranks with host waits, the compute
    islands themselves elsewhere) against the interval arithmetic of device_activity."""
    with open_case(kind, name) as run:
        rows = run.sql(
            "SELECT rank, category, ts_ns, end_ns FROM device_activity "
            "WHERE category IN ('compute', 'host_wait')"
        ).fetchall()
        got = run.sql(
            "SELECT rank, ts_ns, end_ns FROM activity_islands WHERE category = 'computing'"
        ).fetchall()
    by_rank: dict[int, tuple[list, list]] = {}
    for rank, cat, s, e in rows:
        by_rank.setdefault(rank, ([], []))[cat == "host_wait"].append((s, e))
    want = sorted(
        (rank, s, e) for rank, (c, w) in by_rank.items() for s, e in _computing_oracle(c, w)
    )
    assert sorted(got) == want
