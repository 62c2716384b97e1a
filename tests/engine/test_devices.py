"""Graphs and devices (issue 29 item 6, issue 34's kinds): a step that captures CUDA graphs
counts no FLOPs and is named a capture step; device events of an accelerator tracekit does
not model are named with their count; a device is known by its name (H800, MI250 as ROCm
writes it) or, when the name is new or missing, by its properties. Every truth comes from
the generator (tests/tracegen.py): the shapes and durations it wrote."""

from __future__ import annotations

import pytest

import tracekit
from tests.helpers import full_report
from tests.tracegen import MAIN_TID, TraceBuilder
from tracekit.errors import TracekitError
from tracekit.model import hardware

M = K = N = 4096
MM_FLOPS = 2 * M * K * N
MM_ARGS = {"Input Dims": [[M, K], [K, N]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
STEP_US = 10_000.0
KERNEL_US = 400.0


def _mm(b: TraceBuilder, ts: float, kernel_ts: float | None) -> None:
    """One bf16 aten::mm at `ts`: its kernel runs at `kernel_ts`, or (None) its launch is
    recorded into a graph under capture and no kernel runs."""
    b.cpu_op("aten::mm", ts, 20.0, **MM_ARGS)
    if kernel_ts is not None:
        b.kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn", kernel_ts, KERNEL_US,
                 launch_ts=ts + 5)  # fmt: skip
    else:
        corr = b._id()
        b.x("cudaLaunchKernel", "cuda_runtime", ts + 5, 2.0, correlation=corr,
            **{"External id": corr})  # fmt: skip


def _eager_steps(b: TraceBuilder, steps: int, per_step: int) -> None:
    for s in range(steps):
        t0 = s * STEP_US
        b.step(s + 1, t0, STEP_US)
        for i in range(per_step):
            _mm(b, t0 + 100 + i * 500, t0 + 200 + i * 500)


def test_a_capture_step_counts_no_flops_and_is_named(tmp_path):
    """Step 1 runs 4 GEMMs; step 2 captures 6 into a CUDA graph (launches recorded,
    kernels not run). Truth: only step 1's 4 × 2·M·K·N FLOPs were done."""
    b = TraceBuilder(rank=0, world_size=1)
    _eager_steps(b, 1, 4)
    t0 = STEP_US
    b.step(2, t0, STEP_US)
    b.x("cudaStreamBeginCapture", "cuda_runtime", t0 + 50, 3.0)
    for i in range(6):
        _mm(b, t0 + 100 + i * 500, None)
    b.x("cudaStreamEndCapture", "cuda_runtime", t0 + 4000, 3.0)
    b.x("cudaGraphInstantiate", "cuda_runtime", t0 + 4010, 500.0)
    b.write(tmp_path / "cap" / "rank0.json")
    with tracekit.open(tmp_path / "cap") as run:
        (total, n), = run.sql("SELECT sum(flops), count(*) FROM op_flops").fetchall()
        report = full_report(run)
    assert (n, total) == (4, 4 * MM_FLOPS)
    notes = [x for x in report["levels"][1]["notes"] if "graph capture" in x]
    assert len(notes) == 1
    assert "step 2" in notes[0] and "6 kernel launches" in notes[0]
    assert "capture step" in notes[0]
    s = report["summary"]
    # the capture step launched no device work: it is left out of the analysed steps
    # (named in the run block), so MFU is step 1's FLOPs (forward only) over step 1 alone
    assert report["run"]["unanalysed_steps"] == {"0": [2]}
    window_s = STEP_US * 1e-6
    assert s["flops_per_step"] == 4 * MM_FLOPS
    assert s["mfu"] == pytest.approx(4 * MM_FLOPS / 989.4e12 / window_s, rel=1e-6)


def _device_report(tmp_path, name: str | None, props: dict) -> dict:
    b = TraceBuilder(rank=0, world_size=1, device_name=name, device_props=props)
    _eager_steps(b, 2, 4)
    b.write(tmp_path / "dev" / "rank0.json")
    with tracekit.open(tmp_path / "dev") as run:
        return full_report(run)


@pytest.mark.parametrize(
    ("name", "props", "spec", "bf16_tflops"),
    [
        ("NVIDIA H800", {"totalGlobalMem": 85_045_000_000}, "H800 SXM", 989.4),
        # a name the table does not know: H100-class by compute capability 9.0, 132 SMs
        ("NVIDIA H20-Next", {"totalGlobalMem": 85_045_000_000}, "H100 SXM", 989.4),
        (None, {"name": "", "totalGlobalMem": 85_045_000_000}, "H100 SXM", 989.4),
        # MI300X by its properties: 304 CUs, 192 GiB, gfx942 (HIP reports 9.4)
        (None, {"name": "", "computeMajor": 9, "computeMinor": 4, "numSms": 304,
                "totalGlobalMem": 206_141_652_992, "warpSize": 64}, "MI300X", 1307.4),
        ("gfx942", {"computeMajor": 9, "computeMinor": 4, "numSms": 304,
                    "totalGlobalMem": 206_141_652_992}, "MI300X", 1307.4),
        # MI250 as ROCm writes it: one string for MI250X and MI250, the CUs tell them apart
        ("AMD Instinct MI250X / MI250", {"computeMajor": 9, "computeMinor": 0, "numSms": 104,
                                         "totalGlobalMem": 68_702_699_520}, "MI250 GCD", 181.0),
        ("AMD Instinct MI250X / MI250", {"computeMajor": 9, "computeMinor": 0, "numSms": 110,
                                         "totalGlobalMem": 68_702_699_520}, "MI250X GCD", 191.5),
        ("gfx90a", {"computeMajor": 9, "computeMinor": 0, "numSms": 110,
                    "totalGlobalMem": 68_702_699_520}, "MI250X GCD", 191.5),
    ],
)  # fmt: skip
def test_a_device_is_known_by_its_name_or_its_properties(tmp_path, name, props, spec, bf16_tflops):
    report = _device_report(tmp_path, name, props)
    s = report["summary"]
    assert s["device_spec"].startswith(spec + " (")
    assert s["peak_flops_by_dtype"]["bf16"] == pytest.approx(bf16_tflops * 1e12)
    # MFU truth: the generator's 4 GEMMs a step, forward only, over its 10 ms steps
    assert s["mfu"] == pytest.approx(4 * MM_FLOPS / (bf16_tflops * 1e12) / (STEP_US * 1e-6),
                                     rel=0.02)  # fmt: skip


def test_unknown_properties_leave_the_device_unknown():
    assert hardware.lookup("Mystery Accelerator", 1e11, "12.3", 7) is None
    assert hardware.lookup(None, None, None, None) is None


def test_device_events_of_an_unmodeled_accelerator_are_named_with_their_count(tmp_path):
    """An MTIA-like trace (Kineto `mtia_ccp_events` on the device, `mtia_runtime` on the
    host, no CUDA kernels): the device events are not dropped in silence — the run says
    how many there are and of which kind, and the text report warns."""
    b = TraceBuilder(rank=0, world_size=1, device_name=None)
    n_dev = 0
    for s in range(2):
        t0 = s * STEP_US
        b.step(s + 1, t0, STEP_US)
        for i in range(5):
            b.cpu_op("aten::mm", t0 + 100 + i * 500, 20.0, **MM_ARGS)
            b.x("mtiaLaunchKernel", "mtia_runtime", t0 + 105 + i * 500, 2.0, tid=MAIN_TID)
            b.x("mtia_gemm_kernel", "mtia_ccp_events", t0 + 200 + i * 500, KERNEL_US,
                pid=1, tid=7)  # fmt: skip
            n_dev += 1
    b.write(tmp_path / "mtia" / "rank0.json")
    with tracekit.open(tmp_path / "mtia") as run:
        report = full_report(run)
    reason = "device events of a kind tracekit does not model (mtia_ccp_events)"
    assert report["run"]["skipped_events"] == {reason: n_dev}
    assert report["run"]["device"].startswith("mtia (not modeled")


def test_a_trace_that_only_captures_is_refused(tmp_path):
    """One step that captures 6 GEMMs into a graph, no device events at all (the kernels
    never ran): nothing of the device can be measured, and read as a CPU run its figures
    would be the host's. One line says so (and to profile steps that replay the graphs);
    `tracekit analyze` exits 2 on it (tests/e2e/test_gpu_traces.py)."""
    b = TraceBuilder(rank=0, world_size=1)
    b.step(1, 0.0, STEP_US)
    b.x("cudaStreamBeginCapture", "cuda_runtime", 50.0, 3.0)
    for i in range(6):
        _mm(b, 100 + i * 500, None)
    b.x("cudaStreamEndCapture", "cuda_runtime", 4000.0, 3.0)
    b.write(tmp_path / "caponly" / "rank0.json")
    with pytest.raises(TracekitError, match=r"6 kernel launches but no kernel.*graph capture"):
        tracekit.open(tmp_path / "caponly")


def test_modeled_categories_are_never_unmodeled_device_events():
    """The skipped-events query leaves the categories tracekit models out of its regular
    expressions (`tables.CAT_KIND`, as Kineto spells them): that holds only while none of
    them is a device category it does not model (their host calls are kept)."""
    import re

    from tracekit.ingest.tables import CAT_KIND, UNMODELED_DEVICE, UNMODELED_HOST

    for cat in CAT_KIND:
        assert not (re.search(UNMODELED_DEVICE, cat) and not re.search(UNMODELED_HOST, cat)), cat
