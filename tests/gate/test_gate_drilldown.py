"""The gate's drill-down: each metric judged once at the shared α, and each moved
verdict's cause found by its entity's key — two kernels whose names share a prefix, two
collectives whose labels read alike, each gets its own cause. Reports are written by
hand: the truth is the schedule below, not tracekit's output."""

from __future__ import annotations

import pytest

from tracekit.gate import drilldown
from tracekit.gate.baseline import Side
from tracekit.gate.compare import run_compare

STEPS = list(range(1, 9))
# a small deterministic jitter so the per-step tests see spread
JITTER = [0.0, 0.1, -0.1, 0.05, -0.05, 0.08, -0.08, 0.02]


def _series(ms: float) -> list[float]:
    return [ms + j for j in JITTER]


def _report(step_ms: float, kernels: dict[str, float], colls: dict[tuple, float]) -> dict:
    """One rank; per step `step_ms`, each kernel `kernels[name]` ms, each collective
    (name, group size, bytes) `colls[key]` ms, all of it compute but the collectives."""
    rank = {"rank": 0, "step": STEPS, "step_time_ms": _series(step_ms),
            "compute_ms": _series(step_ms - sum(colls.values()))}  # fmt: skip
    kernel_rows = [{"name": n, "step": STEPS, "time_ms": _series(ms)} for n, ms in kernels.items()]
    coll_rows = [
        {"name": k[0], "group_size": k[1], "bytes": k[2], "step": STEPS, "time_ms": _series(ms)}
        for k, ms in colls.items()
    ]
    samples = {"steps": STEPS, "ranks": [rank], "kernels": kernel_rows, "collectives": coll_rows}
    return {
        "summary": {"step_time_ms": step_ms},
        "ranks": [{"rank": 0, "step_time_ms": step_ms}],
        "samples": samples,
    }


def _compare(base: dict, new: dict, **kw):
    return run_compare(Side("base", "report", [base]), Side("new", "report", [new]), **kw)


def test_a_kernel_named_like_the_start_of_another_gets_its_own_cause():
    """`aten::mm` moved +10 ms, `aten::mm_out` +2 ms: the second's cause is its own
    (a label prefix once matched it to the first)."""
    base = _report(100.0, {"aten::mm": 10.0, "aten::mm_out": 5.0}, {})
    new = _report(112.0, {"aten::mm": 20.0, "aten::mm_out": 7.0}, {})
    cmp = _compare(base, new, strict=True)
    by_entity = {v.entity: v for v in cmp.verdicts if v.family == "kernel_time"}
    assert by_entity["aten::mm"].cause.startswith("aten::mm +10.00 ms/step")
    mm_out = by_entity["aten::mm_out"]
    assert mm_out.verdict in ("regressed", "inconclusive")
    assert mm_out.cause.startswith("aten::mm_out +2.00 ms/step"), mm_out.cause


def test_collectives_whose_labels_read_alike_each_get_their_own_cause():
    """Two all-reduces of 201.30 MB and 201.34 MB print alike (`201 MB`): each verdict
    carries its collective's key, so each names its own change."""
    a, b = ("all_reduce", 2, 201_300_000), ("all_reduce", 2, 201_340_000)
    base = _report(100.0, {}, {a: 10.0, b: 5.0})
    new = _report(109.0, {}, {a: 16.0, b: 8.0})
    cmp = _compare(base, new, strict=True)
    times = {v.entity: v for v in cmp.verdicts if v.family == "collective_time"}
    assert times[a].metric == times[b].metric  # the labels are the same
    assert "+6.00 ms/step" in times[a].cause
    assert "+3.00 ms/step" in times[b].cause, times[b].cause


@pytest.mark.parametrize("strict", [False, True])
def test_each_drill_down_metric_is_judged_once_at_the_shared_alpha(monkeypatch, strict):
    calls = []
    judge = drilldown.judge

    def counting(v, *args, **kw):
        calls.append(v.metric)
        return judge(v, *args, **kw)

    monkeypatch.setattr(drilldown, "judge", counting)
    coll = ("all_reduce", 2, 4_000_000)
    base = _report(100.0, {"aten::mm": 10.0, "aten::add": 3.0}, {coll: 10.0})
    new = _report(104.0, {"aten::mm": 12.0, "aten::add": 3.0}, {coll: 12.0})
    cmp = _compare(base, new, strict=strict)
    drill = [v for v in cmp.verdicts if v.drill_down]
    # two kernels, a collective's time and bandwidth; one rank: no per-rank metric
    assert len(drill) == 4
    assert calls == [v.metric for v in drill]
    assert all(v.alpha == pytest.approx(0.05 / 4) for v in drill)
    assert all(v.alpha == 0.05 for v in cmp.verdicts if not v.drill_down)
