"""The critical path adds up and follows the device (issue 29, item 2).

G1: per analysed step and rank set, the path's kinds add to the replayed step (within 1%
or 0.05 ms); G2: its per-rank parts add to at most the step — on every shared trace (a
copy in tmp), every sample run and every synthetic run. Twins (tests/tracegen.py, truth
from their own schedules): a saturated GPU, a blocking copy of each API name, a graph
replay with a host sync. Figures are checked against the schedules, never against
tracekit's own output.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tracekit
from diagnosers import assemble
from diagnosers.context import Context
from tests import tracegen as T
from tests.conftest import SHARED_TRACES
from tests.synth import SCENARIOS, generate
from tracekit.analysis.whatif_plan import what_if
from tracekit.options import AnalysisOptions
from tracekit.stepmodel import replay as R

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
# ../shared/traces from the main checkout (conftest.SHARED_TRACES), ../../shared/traces from
# a worktree under wt/
SHARED = next(
    (p for p in (SHARED_TRACES, ROOT.parent.parent / "shared" / "traces") if p.is_dir()),
    SHARED_TRACES,
)
SHARED_RUNS = sorted(p.name for p in SHARED.iterdir() if p.is_dir()) if SHARED.is_dir() else []


def _model(path: Path):
    with tracekit.open(path) as run:
        return assemble.analyze(run, AnalysisOptions()).step_model


def _assert_adds_up(sm) -> None:
    """G1 and G2 on a report's step_model block."""
    assert sm is not None and sm.replayed_step_ms is not None
    step = sm.replayed_step_ms
    cp = sm.critical_path
    assert set(cp.by_kind) == set(R.KINDS)
    assert all(v >= 0 for v in cp.by_kind.values())
    assert sum(cp.by_kind.values()) == pytest.approx(step, rel=0.01, abs=0.05)  # G1
    assert sum(cp.by_rank.values()) <= step * 1.01 + 0.05  # G2
    assert all(v >= 0 for v in cp.by_rank.values())


@pytest.mark.slow
@pytest.mark.parametrize("name", SHARED_RUNS)
def test_every_shared_traces_path_adds_up_to_its_step(tmp_path, name):
    run = tmp_path / name
    shutil.copytree(SHARED / name, run)
    _assert_adds_up(_model(run))


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.iterdir() if p.is_dir()))
def test_every_sample_runs_path_adds_up_to_its_step(tmp_path, name):
    run = tmp_path / name
    shutil.copytree(SAMPLES / name, run)
    _assert_adds_up(_model(run))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_synthetic_runs_path_adds_up_to_its_step(tmp_path, name):
    sc, _kind = SCENARIOS[name]
    generate(sc, tmp_path)
    _assert_adds_up(_model(tmp_path))


def test_ranks_with_different_windows_add_up_to_the_mean_step(tmp_path):
    """Two ranks whose windows differ in length (their ProfilerSteps start apart): the
    replayed step is the mean of theirs, and so is the path's sum (the v100_dlrm_8rank
    shape: before, one rank's path from another's window start, 12.39 of 16.01 ms)."""
    for rank, lead in ((0, 0.0), (1, 700.0)):
        b = T.ddp_like_rank(rank, world=2, steps=1)
        for ev in b.events:
            if ev.get("name", "").startswith("ProfilerStep"):
                ev["ts"] -= lead
                ev["dur"] += lead
        b.write(tmp_path / f"rank-{rank}.json")
    sm = _model(tmp_path)
    _assert_adds_up(sm)
    # the truth from the schedule: windows of 1000 and 1700 µs
    assert sm.replayed_step_ms == pytest.approx(1.35, abs=0.01)


# ------------------------------------------------------------------ twins


def _twin(tmp_path: Path, built) -> tuple[object, dict, Path]:
    b, truth = built
    b.write(tmp_path / "rank-0.json")
    return _model(tmp_path), truth, tmp_path


@pytest.mark.parametrize("sync", [*T.SYNC_CALLS, None])
def test_a_saturated_gpus_path_is_the_devices_work(tmp_path, sync):
    """The device busy 99.5% of the step: the path is its kernels (≥ 90% compute), the
    host's wait is a "sync" segment named by its call and the kernel it waited for, and
    compute 2× faster saves half the device time (the schedule: 8,000 of 8,038 µs). Without
    a sync (the host's last op ends 7.6 ms before the device's last kernel, the DeepSeek-V3
    H800 shape: before, the path was the host's tail and compute 2× faster saved nothing)
    the same."""
    sm, truth, run = _twin(tmp_path, T.saturated_rank(sync=sync))
    _assert_adds_up(sm)
    step_us = sm.replayed_step_ms * 1e3
    assert step_us == pytest.approx(truth["step_us"], rel=0.005)
    cp = sm.critical_path
    device_us = (cp.by_kind["compute"] + cp.by_kind["communication"]) * 1e3
    assert device_us >= 0.9 * step_us
    assert device_us == pytest.approx(truth["device_us"], rel=0.01)
    assert cp.by_kind["idle"] * 1e3 < 1.0
    syncs = [s for s in cp.segments if s.kind == "sync"]
    if sync is not None:
        assert syncs
        assert all(s.name.startswith(f"{sync} (waits for sm90_xmma_gemm") for s in syncs)
    else:
        assert not syncs
    with tracekit.open(run) as r:
        o = what_if(Context(r, AnalysisOptions()), ["compute-speed=2"])
    assert o.saved_ms * 1e3 == pytest.approx(truth["device_us"] / 2, rel=0.05)


@pytest.mark.parametrize("sync_event", [False, True])
def test_a_sync_call_only_kinetos_cuda_sync_event_names_is_a_host_wait(tmp_path, sync_event):
    """A stream sync under a name the graph does not know (`cuStreamSynchronize_ptsz`):
    with Kineto's `Stream Sync` event naming the call by its correlation the host waits
    for the last kernel and the path is the device's; without it the call is host work."""
    sm, truth, _run = _twin(
        tmp_path, T.saturated_rank(sync="cuStreamSynchronize_ptsz", sync_event=sync_event)
    )
    _assert_adds_up(sm)
    compute_us = sm.critical_path.by_kind["compute"] * 1e3
    if sync_event:
        assert compute_us == pytest.approx(truth["device_us"], rel=0.01)
        assert sm.critical_path.by_kind["sync"] > 0
    else:
        assert compute_us < 0.1 * truth["device_us"]


@pytest.mark.parametrize("api", T.BLOCKING_COPIES)
def test_a_blocking_copy_is_a_sync_on_the_path_not_idle(tmp_path, api):
    """A blocking device-to-host copy that starts 3 ms after its call with nothing in the
    trace to say why (the SGLang decode shape: 463 of 474 ms in one hipMemcpyWithStream,
    which the path filed as idle): the whole call is "sync", named by its API."""
    sm, truth, _run = _twin(tmp_path, T.blocking_copy_rank(api))
    _assert_adds_up(sm)
    assert sm.replayed_step_ms * 1e3 == pytest.approx(truth["step_us"], rel=0.005)
    cp = sm.critical_path
    assert cp.by_kind["sync"] * 1e3 == pytest.approx(truth["call_us"], rel=0.01)
    assert cp.by_kind["idle"] * 1e3 < 1.0
    assert {s.name for s in cp.segments if s.kind == "sync"} == {api}


@pytest.mark.parametrize(
    "launch, sync",
    [("cudaGraphLaunch", "cudaStreamSynchronize"), ("hipGraphLaunch", "hipMemcpyWithStream")],
)
def test_a_graph_replay_with_a_host_sync_follows_the_graphs_kernels(tmp_path, launch, sync):
    """One graph launch whose kernels carry its correlation, then a host sync (a stream
    sync, or a blocking copy queued behind the graph): the path is the graph's kernels,
    then the wait in the sync call; compute 2× faster saves half the kernels' time."""
    sm, truth, run = _twin(tmp_path, T.graph_replay_rank(launch, sync))
    _assert_adds_up(sm)
    cp = sm.critical_path
    device_us = (cp.by_kind["compute"] + cp.by_kind["sync"]) * 1e3
    assert device_us >= 0.9 * sm.replayed_step_ms * 1e3
    assert cp.by_kind["compute"] * 1e3 == pytest.approx(10 * 300.0, rel=0.01)
    assert cp.by_kind["idle"] * 1e3 < 1.0
    assert all(s.name.startswith(sync) for s in cp.segments if s.kind == "sync")
    with tracekit.open(run) as r:
        o = what_if(Context(r, AnalysisOptions()), ["compute-speed=2"])
    assert o.saved_ms * 1e3 == pytest.approx(truth["device_us"] / 2, rel=0.05)


def test_one_colour_per_kind_in_every_chart_that_draws_the_path():
    """The HTML report's path charts and the TUI's path rows take their colours from one
    mapping (tracekit.stepmodel.replay.COLOURS), one for each kind."""
    from tracekit.report import charts_detail as html
    from tracekit.report.schema import CriticalPath, PathSegment, StepModelBlock
    from tui.widgets import timeline

    assert set(R.COLOURS) == set(R.KINDS)
    assert len(set(R.COLOURS.values())) == len(R.KINDS)
    model = StepModelBlock(
        critical_path=CriticalPath(
            by_kind={k: 1.0 for k in R.KINDS},
            by_rank={},
            segments=[
                PathSegment(rank=0, kind=k, name=k, start_ms=i, ms=1.0)
                for i, k in enumerate(R.KINDS)
            ],
        )
    )
    for chart in html.charts_step_model(model):
        scale = chart.spec["encoding"]["color"]["scale"]
        assert dict(zip(scale["domain"], scale["range"], strict=True)) == {
            k: R.COLOURS[k] for k in scale["domain"]
        }
    assert {k: timeline.PATH_STYLES[k] for k in R.KINDS} == {
        k: f"bold {c}" for k, c in R.COLOURS.items()
    }


@pytest.mark.parametrize("record_call", [True, False])
def test_a_stream_wait_event_call_joins_the_producer_to_the_path(tmp_path, record_call):
    """No CUDA sync events: a GEMM on stream 7 (100 µs), then `cudaStreamWaitEvent` and a
    kernel on stream 20 that starts 60 µs after the GEMM ends (the schedule: it waited for
    the GEMM). With the `cudaEventRecord` call, or without one (older traces: the work
    launched last on another stream), the path runs through the GEMM: compute 150 µs, and
    compute 2× faster saves 75 µs (before: an unexplained wait, 25 µs)."""
    b = T.TraceBuilder(world_size=1)
    b.step(1, 0.0, 300.0)
    b.cpu_op("aten::mm", 5.0, 8.0)
    b.kernel("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n", 12.0, 100.0, stream=7, launch_ts=10.0)
    if record_call:
        b.x("cudaEventRecord", "cuda_runtime", 14.0, 1.0, correlation=9001)
    b.x("cudaStreamWaitEvent", "cuda_runtime", 16.0, 1.0, correlation=9002)
    b.cpu_op("aten::add", 17.0, 4.0)
    b.kernel("vectorized_elementwise_kernel", 172.0, 50.0, stream=20, launch_ts=18.0)
    b.x("cudaDeviceSynchronize", "cuda_runtime", 22.0, 205.0)
    b.write(tmp_path / "rank-0.json")
    sm = _model(tmp_path)
    _assert_adds_up(sm)
    assert sm.critical_path.by_kind["compute"] * 1e3 == pytest.approx(150.0, abs=2.0)
    with tracekit.open(tmp_path) as r:
        o = what_if(Context(r, AnalysisOptions()), ["compute-speed=2"])
    assert o.saved_ms * 1e3 == pytest.approx(75.0, abs=1.0)
