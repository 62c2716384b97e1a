"""Steps on the device (`device_steps`): a step's window runs to the end of the device work
its CPU span launched, windows do not overlap, a trailing stub without device work is left
out on GPU ranks, and an op's FLOPs count where its kernels run. Truths come from the
generator's own schedule (tests/tracegen.py), never from tracekit's tables."""

from __future__ import annotations

import msgspec
import pytest

import tracekit
from tests.helpers import full_report
from tests.tracegen import TraceBuilder
from tracekit.report.schema import RunInfo

K = 10  # kernels a step
D = 100.0  # µs each: 1,000 µs of device work a step


def _lagged(steps: int, lag: float, stub: bool = False) -> tuple[TraceBuilder, list]:
    """`steps` ProfilerSteps of 1,000 µs each back to back on the CPU; each launches K
    kernels of D µs on one stream; the first kernel of step 0 starts `lag` µs after the
    step's start, so every step's device work ends `lag` µs after its CPU span (15% of
    the step for lag 150). Returns the builder and each step's (cpu_ts, device ends)."""
    b = TraceBuilder(rank=0, world_size=1)
    sched = []
    prev_end = 0.0
    for s in range(steps):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 1000.0)
        first, last = None, None
        for i in range(K):
            launch = t0 + lag - 5 + 80 * i
            start = max(launch + 5, prev_end)
            b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", start, D, launch_ts=launch)
            prev_end = start + D
            first = start if first is None else first
            last = prev_end
        sched.append((t0, t0 + 1000.0, first, last))
    if stub:
        b.step(steps + 1, 1000.0 * steps + 1, 4.0)  # the profiler's trailing stub
    return b, sched


def _truth_windows(sched):
    """The windows the schedule gives: CPU start (no earlier than the end of the work
    before it: here the previous step's) to the later of CPU end and the end of the last
    work it launched."""
    out, prev = [], None
    for cpu_ts, cpu_end, _first, last in sched:
        start = cpu_ts if prev is None else max(cpu_ts, prev)
        end = max(cpu_end, last)
        out.append((start, end))
        prev = end
    return out


def _report(tmp_path, b, **options):
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        return full_report(run, **options)


@pytest.mark.parametrize("steps", [1, 5])
def test_a_lagging_device_step_is_the_work_it_launched(tmp_path, steps):
    b, sched = _lagged(steps, lag=150.0)
    wins = _truth_windows(sched)
    rep = _report(tmp_path, b)
    r = rep["ranks"][0]
    assert r["steps"] == steps
    mean_ms = sum(e - s for s, e in wins) / len(wins) / 1e3
    assert r["step_time_ms"] == pytest.approx(mean_ms, rel=0.005)
    # every launched kernel counts: busy = compute = K·D a step (the CPU cut dropped 150 µs)
    assert r["compute_ms"] == pytest.approx(steps * K * D / 1e3, rel=0.005)
    assert r["busy_ms"] == pytest.approx(steps * K * D / 1e3, rel=0.005)
    assert r["window_ms"] == pytest.approx((wins[-1][1] - wins[0][0]) / 1e3, rel=0.005)
    # samples use the same windows: each step's device work whole, windows apart
    smp = rep["samples"]["ranks"][0]
    assert smp["step_time_ms"] == pytest.approx([(e - s) / 1e3 for s, e in wins], rel=0.005)
    assert smp["compute_ms"] == pytest.approx([K * D / 1e3] * steps, rel=0.005)
    # the run block says how far the device runs behind
    (lag,) = rep["run"]["device_lag"]
    assert lag["rank"] == 0 and lag["steps"] == steps
    assert lag["lag_ms"] == pytest.approx(0.150, rel=0.005)
    assert lag["lag_fraction"] == pytest.approx(150 / 1150, rel=0.005)
    assert rep["run"]["unanalysed_steps"] == {}


def test_the_lag_line_is_in_the_text_report(tmp_path):
    b, _ = _lagged(1, lag=150.0)
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        from diagnosers.assemble import analyze
        from tracekit.report.render import header

        lines = header(analyze(run))
    assert any("device runs 0.1 ms (13" in x and "on rank 0" in x for x in lines), lines


def test_hta_and_trace_windows_keep_their_definitions(tmp_path):
    b, sched = _lagged(1, lag=150.0)
    rep = _report(tmp_path, b, window="trace")
    r = rep["ranks"][0]
    # trace: first to last device activity
    assert r["window_ms"] == pytest.approx((sched[0][3] - sched[0][2]) / 1e3, rel=1e-6)


def test_a_trailing_stub_is_not_an_analysed_step(tmp_path):
    b, sched = _lagged(3, lag=10.0, stub=True)
    wins = _truth_windows(sched)
    rep = _report(tmp_path, b)
    r = rep["ranks"][0]
    assert r["steps"] == 3  # not 4: the stub would take a quarter off the mean step
    assert r["step_time_ms"] == pytest.approx(
        sum(e - s for s, e in wins) / len(wins) / 1e3, rel=0.005
    )
    assert rep["run"]["unanalysed_steps"] == {"0": [4]}
    assert rep["samples"]["steps"] == [1, 2, 3]
    from tracekit.report.render import device_step_lines

    assert device_step_lines(msgspec.convert(rep["run"], RunInfo)) == [
        "left out ProfilerStep 4 on rank 0: no device work launched"
    ]


def test_cpu_steps_without_device_work_stay(tmp_path):
    b = TraceBuilder(rank=0, world_size=1, device_name=None, backend="gloo")
    for s in range(3):
        b.step(s + 1, 1000.0 * s, 1000.0)
        b.cpu_op("aten::add", 1000.0 * s + 10, 500.0)
    b.step(4, 3001.0, 4.0)
    rep = _report(tmp_path, b)
    assert rep["ranks"][0]["steps"] == 4
    assert rep["run"]["unanalysed_steps"] == {} and rep["run"]["device_lag"] == []


def test_an_op_launched_before_a_step_goes_by_its_launch(tmp_path):
    """aten::mm starts 20 µs before ProfilerStep#1 and its kernel runs 300–800 µs, after
    the step's CPU start: it is not the step's work, so the step's window starts where it
    ends, and neither its kernel's time nor its FLOPs count (before: its time counted,
    its FLOPs did not). The mm launched inside the step counts, both."""
    n = 4096
    b = TraceBuilder(rank=0, world_size=1)
    b.step(1, 100.0, 10_000.0)
    mm = {"Input Dims": [[n, n], [n, n]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    b.cpu_op("aten::mm", 80, 30, **mm)  # before the step
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 300, 500.0, launch_ts=90)
    b.cpu_op("aten::mm", 1000, 30, **mm)  # inside it
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 1100, 500.0, launch_ts=1010)
    rep = _report(tmp_path, b)
    r, s = rep["ranks"][0], rep["summary"]
    window = (10_100 - 800) * 1e-6
    assert r["window_ms"] == pytest.approx(window * 1e3)
    assert r["compute_ms"] == pytest.approx(0.5)
    flops = 2.0 * n**3
    assert s["flops_per_step"] == pytest.approx(flops)
    assert s["mfu"] == pytest.approx(flops / 989.4e12 / window, rel=1e-3)


def test_work_running_when_the_first_step_starts_is_not_its_own(tmp_path):
    """The profiler starts while the device still runs earlier work (kernels whose launch
    precedes the trace): the first step's window starts where that work ends."""
    b, sched = _lagged(2, lag=150.0)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 0.0, 140.0)  # launched before the trace
    rep = _report(tmp_path, b)
    wins = _truth_windows(sched)
    wins[0] = (140.0, wins[0][1])
    r = rep["ranks"][0]
    assert r["window_ms"] == pytest.approx((wins[-1][1] - wins[0][0]) / 1e3, rel=0.005)
    assert r["step_time_ms"] == pytest.approx(
        sum(e - s for s, e in wins) / len(wins) / 1e3, rel=0.005
    )
    assert r["compute_ms"] == pytest.approx(2 * K * D / 1e3, rel=0.005)


def test_a_graph_replay_belongs_to_the_step_that_launched_it(tmp_path):
    """A cudaGraphLaunch near the step's CPU end: the graph's kernels carry the launch's
    correlation and run past the CPU span; the step's window runs to their end."""
    b = TraceBuilder(rank=0, world_size=1)
    b.step(1, 0.0, 1000.0)
    b.step(2, 1000.0, 1000.0)
    for s, t0 in ((1, 0.0), (2, 1000.0)):
        corr = 9000 + s
        b.x("cudaGraphLaunch", "cuda_runtime", t0 + 800, 10.0, correlation=corr)
        for i in range(5):  # 5 kernels of 80 µs from 810 µs: they end 1,210 µs in
            b.x("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel", t0 + 810 + 80 * i + 210 * (s - 1),
                80.0, pid=0, tid=7, device=0, stream=7, correlation=corr)
    rep = _report(tmp_path, b)
    r = rep["ranks"][0]
    # step 1: 0 → 1,210; step 2: 1,210 (the work before it) → 2,000 + 420 (its graph's end)
    assert r["window_ms"] == pytest.approx(2.420)
    assert r["compute_ms"] == pytest.approx(0.8)
    assert rep["samples"]["ranks"][0]["step_time_ms"] == pytest.approx([1.210, 1.210])
