"""The report's rows (`tracekit.report.schema` gathers them): its tables — collectives,
ops, kernels, regions, findings —, the step model's block, and the fact rows the levels'
`metrics` hold (`ComputeRankRow`). `Struct` is the base of every type of the report."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType, field

from tracekit.model import figures as F


class Struct(msgspec.Struct, kw_only=True):
    pass


def known(value: Any) -> Any:
    """A row's value, None where the row lacks it (UNSET: a key the JSON omits)."""
    return None if value is UNSET else value


# ---------------------------------------------------------------- tables


class CollectiveRow(Struct, kw_only=True):
    """`collectives[]`: one row per (name, group size, bytes), most time first."""

    name: str | None
    group_size: int | None
    bytes: F.COLL_BYTES.type(int | None)
    dtype: str | None
    count: int
    count_per_step: F.COUNT_PER_STEP.type(float)
    transfer_ms: F.TRANSFER_MS.type(float)
    predicted_ms: F.PREDICTED_MS.type(float | None)
    busbw_GBps: F.BUSBW_GBPS.type(float | None)
    predicted_busbw_GBps: F.PREDICTED_BUSBW_GBPS.type(float | None)
    inter_node: bool | None
    time_ms_per_step: F.TIME_MS_PER_STEP.type(float)
    exposed_ms: F.EXPOSED_MS.type(float)
    exposed_wait_ms: F.EXPOSED_WAIT_MS.type(float)
    matched: bool  # every instance matched across its whole group


class OpRow(Struct, kw_only=True):
    """`top_ops[]`: the counted ops with the most device time."""

    name: str | None  # from the trace: null where its event has none
    dtype: str | None
    count: int
    flops: F.FLOPS_PER_STEP.type(float | None)
    device_ms: F.DEVICE_MS.type(float)
    not_counted: int
    achieved_tflops: F.ACHIEVED_TFLOPS.type(float | None)
    op_peak_fraction: F.OP_PEAK_FRACTION.type(float | None) = field(name="peak_fraction")
    # why its FLOPs are unknown (null: counted, or not matmul work — an op without a
    # formula whose kernels and name are not GEMM/attention/conv, flops null): graph_replay,
    # op_without_formula, op_without_flops, no_op (tracekit/analysis/uncounted.py)
    uncounted: str | None = None


class UncountedOpRow(Struct, kw_only=True):
    """`top_uncounted_ops[]`: the ops (graph launches for replays) whose GEMM/attention/
    convolution kernels have no FLOPs, most device time first — what
    `uncounted_compute_fraction` is made of (elementwise/norm ops are not in it)."""

    name: str | None  # from the trace: null where its event has none
    why: str  # graph_replay, op_without_formula, op_without_flops or no_op
    note: str | None = None  # op_without_flops: the missing argument
    count: int  # ops (graph launches) with kernels in the window, all ranks
    device_ms: F.DEVICE_MS.type(float)


class UncountedKernelRow(Struct, kw_only=True):
    """`top_uncounted_kernels[]`: matmul-class compute kernels without FLOPs (and every
    kernel of a table op without FLOPs), most time first."""

    name: str | None  # from the trace: null where its event has none
    why: str
    op: str | None  # the op or graph launch they belong to
    count_per_step: F.COUNT_PER_STEP.type(float)
    time_ms_per_step: F.TIME_MS_PER_STEP.type(float)


class KernelRow(Struct, kw_only=True):
    """`top_kernels[]`: the compute kernels (CPU ops on CPU runs) with the most device
    time over the window; the samples' kernel series are the same figure per step."""

    name: str | None  # from the trace: null where its event has none
    count_per_step: F.COUNT_PER_STEP.type(float)
    time_ms_per_step: F.TIME_MS_PER_STEP.type(float)



class ComputeRankRow(Struct, kw_only=True):
    """`levels[compute].metrics.ranks[]`: a rank's compute figures over its window
    (`tracekit.analysis.compute`). The FLOPs figures, `flops_per_step` to
    `uncounted_device_ms_per_step`, are absent (UNSET) on a rank without a counted op."""

    rank: int
    uncounted_compute_fraction: F.UNCOUNTED_COMPUTE_FRACTION.type(float | None) = None
    flops_per_step: F.FLOPS_PER_STEP.type(float) | UnsetType = UNSET
    model_flops_per_step: F.MODEL_FLOPS_PER_STEP.type(float) | UnsetType = UNSET
    flops_by_dtype: F.FLOPS_BY_DTYPE.type(dict[str, float]) | UnsetType = UNSET
    mfu: F.MFU.type(float | None) | UnsetType = UNSET
    hfu: F.HFU.type(float | None) | UnsetType = UNSET
    gemm_efficiency: F.GEMM_EFFICIENCY.type(float | None) | UnsetType = UNSET
    at_peak_ms_per_step: float | UnsetType = UNSET  # the executed FLOPs at peak, per step
    uncounted_ops_per_step: F.UNCOUNTED_OPS_PER_STEP.type(float) | UnsetType = UNSET
    uncounted_device_ms_per_step: float | UnsetType = UNSET  # those ops' device time
    idle_fraction: F.IDLE_FRACTION.type(float | None) = None
    compute_fraction: F.COMPUTE_FRACTION.type(float | None) = None
    host_bound_fraction: F.HOST_BOUND_FRACTION.type(float | None) = None
    host_bound_ms_per_step: float | None = None
    host_gaps_per_step: float | None = None
    median_kernel_us: float | None = None


class Region(Struct, kw_only=True):
    """`regions[]`: one region of the model (an annotated range or an nn.Module), matched
    across ranks by its path; figures per step over the analysed steps, mean over the ranks
    holding it (`tracekit/analysis/regions.py`). On CPU runs the device figures are null."""

    path: list[str]  # names from the root (ProfilerStep left out) to the leaf, the leaf last
    kind: str  # module or annotation
    ranks: list[int]  # the ranks holding it
    count_per_step: F.COUNT_PER_STEP.type(float)
    cpu_ms_per_step: F.CPU_MS_PER_STEP.type(float)
    device_ms_per_step: F.DEVICE_MS_PER_STEP.type(float | None)
    device_self_ms_per_step: F.DEVICE_SELF_MS_PER_STEP.type(float | None)
    flops_per_step: F.FLOPS_PER_STEP.type(float | None)
    achieved_tflops: F.ACHIEVED_TFLOPS.type(float | None)
    device_ms_by_rank: F.DEVICE_MS_BY_RANK.type(dict[int, float]) = {}
    # the ranks with the least, the median and the most device time (CPU time on CPU runs)
    min_rank: int | None = None
    median_rank: int | None = None
    max_rank: int | None = None


class Remedy(Struct, kw_only=True):
    """`findings[].remedies[]`: one candidate change of a finding, replayed."""

    change: str  # a `tracekit whatif --change` spec
    predicted_step_ms: F.PREDICTED_STEP_MS.type(float)
    saved_ms: F.SAVED_MS.type(float)


class FindingRow(Struct, kw_only=True):
    kind: str
    code: str
    level: str
    severity: str  # info, warning or critical
    title: str
    ranks: list[int]
    measured: Any = None
    predicted: Any = None
    impact_ms: float | None = None  # time a fix would win per step
    remedy: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    # the rule's candidate changes replayed by the step model, best first; impact_ms is
    # the first one's saving (≥ 0)
    remedies: list[Remedy] = field(default_factory=list)


class PathSegment(Struct, kw_only=True):
    """`step_model.critical_path.segments[]`: one stretch of the critical path on one rank
    and of one kind (consecutive pieces merged, named by the name with the most time)."""

    rank: int
    kind: str  # compute, communication, waiting, sync, host or idle
    name: str | None  # from the trace: null where its event has none
    start_ms: float  # from the earliest analysed window start of any rank
    ms: float
    parts: int = 1  # pieces (ops, kernels, gaps) merged into it
    name_ms: float | None = None  # time of the pieces named `name` (null: one piece)
    name_parts: int = 1  # how many of its pieces are named `name`


class CriticalPath(Struct, kw_only=True):
    """The chain of dependencies that sets the step, ms per step."""

    by_kind: F.CRITICAL_PATH_MS.type(dict[str, float])
    by_rank: F.CRITICAL_PATH_MS.type(dict[str, float])
    segments: list[PathSegment] = field(default_factory=list)


class WhatIf(Struct, kw_only=True):
    """`step_model.what_if[]`: a finding's remedy replayed (its `impact_ms` is `saved_ms`)."""

    finding: str  # the finding's code
    change: list[str]
    predicted_step_ms: F.PREDICTED_STEP_MS.type(float)
    saved_ms: F.SAVED_MS.type(float)


class StepModelBlock(Struct, kw_only=True):
    """`step_model`: the dependency graph of the analysed steps across ranks, replayed
    (tracekit.stepmodel; docs/step-model.md)."""

    measured_step_ms: F.MEASURED_STEP_MS.type(float | None) = None
    replayed_step_ms: F.REPLAYED_STEP_MS.type(float | None) = None
    replay_error: F.REPLAY_ERROR.type(float | None) = None
    critical_path: CriticalPath | None = None
    what_if: list[WhatIf] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # per collective: median over its matched instances of how much later it could start
    # without delaying the step (0: on the critical path)
    collective_slack_ms: F.COLLECTIVE_SLACK_MS.type(dict[str, float]) = field(default_factory=dict)
    path_origin_ns: F.PATH_ORIGIN_NS.type(int | None) = None  # segments' time zero


class WhatIfReport(Struct, kw_only=True):
    """`tracekit whatif RUN --change C … --format json`."""

    change: list[str]
    measured_step_ms: F.MEASURED_STEP_MS.type(float)
    replayed_step_ms: F.REPLAYED_STEP_MS.type(float)
    predicted_step_ms: F.PREDICTED_STEP_MS.type(float)
    saved_ms: F.SAVED_MS.type(float)
    critical_path: CriticalPath
    # what a change modeled outside the graph did (microbatches=M: the operations' split
    # and the schedule's span), a line each
    notes: list[str] = []
