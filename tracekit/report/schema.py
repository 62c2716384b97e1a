"""The report, typed: its encoding is the JSON report (`analyze --format json`), a public
contract whose keys only grow. `tracekit schema` prints its JSON Schema; every figure
field is typed with its figure (`tracekit.model.figures`), so the schema carries each
figure's label, unit, direction and definition.

A figure that cannot be known is null and `summary.null_reasons` says why. A report of
the breakdown alone (`--breakdown-only`) has `schema`, `tracekit_version`, `run`,
`window` and `ranks`; a full one adds the rest.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType, field

from tracekit.metrics.breakdown import RankBreakdown
from tracekit.metrics.samples import Samples
from tracekit.model import figures as F

REPORT_SCHEMA = 1


class Struct(msgspec.Struct, kw_only=True):
    pass


class RankSelection(Struct, kw_only=True):
    option: str
    spec: str
    ranks: list[int]
    of: int


class DeviceLag(Struct, kw_only=True):
    """How far a rank's device runs behind its CPU (`device_steps`): the last work a step
    launched ends `lag_ms` after the step's CPU span, on average over its steps."""

    rank: int
    steps: int  # analysed steps that launched device work
    lag_ms: float  # mean of max(device end − CPU end, 0)
    max_lag_ms: float
    # lag_ms ÷ the mean step from its CPU start to its device end: the step's share that
    # a window cut at the CPU's end would drop
    lag_fraction: float | None


class RunInfo(Struct, kw_only=True):
    """The run analysed and what the figures do not cover (its health)."""

    path: str
    world_size: int
    ranks: list[int]
    backend: str | list[str] | None
    device: str | list[str] | None
    steps: list[int]
    unreadable: list[dict[str, str]] = field(default_factory=list)
    missing_ranks: list[int] = field(default_factory=list)
    skipped_events: dict[str, int] = field(default_factory=dict)
    mixed: list[str] = field(default_factory=list)
    clock_offsets_ns: dict[str, int] = field(default_factory=dict)
    rank_selection: RankSelection | None = None
    # the device behind the CPU: ranks whose steps' device work ends after their CPU span
    device_lag: list[DeviceLag] = field(default_factory=list)
    # rank → ProfilerSteps left out: no device work launched on a GPU rank (a trailing stub)
    unanalysed_steps: dict[str, list[int]] = field(default_factory=dict)


class Window(Struct, kw_only=True):
    kind: str  # steps, trace or hta
    steps: str  # all, N or A-B


class RankRow(RankBreakdown, kw_only=True):
    """`ranks[]`: the breakdown over the rank's window, and what the levels add."""

    mfu: F.MFU.type(float | None) | UnsetType = UNSET
    hfu: F.HFU.type(float | None) | UnsetType = UNSET
    host_bound_fraction: F.HOST_BOUND_FRACTION.type(float | None) | UnsetType = UNSET
    peak_memory_fraction: F.PEAK_MEMORY_FRACTION.type(float | None) | UnsetType = UNSET
    peak_reserved_bytes: F.PEAK_RESERVED_BYTES.type(int | None) | UnsetType = UNSET
    exposed_slow_fraction: F.EXPOSED_SLOW_FRACTION.type(float | None) | UnsetType = UNSET
    uncounted_compute_fraction: F.UNCOUNTED_COMPUTE_FRACTION.type(float | None) | UnsetType = UNSET


class Summary(Struct, kw_only=True):
    """Run-level figures: a per-rank key's summary is its mean over ranks."""

    step_time_ms: F.STEP_TIME_MS.type(float | None)
    mfu: F.MFU.type(float | None)
    hfu: F.HFU.type(float | None)
    gemm_efficiency: F.GEMM_EFFICIENCY.type(float | None)
    peak_flops_source: F.PEAK_FLOPS_SOURCE.type(str | None)
    peak_flops_by_dtype: F.PEAK_FLOPS_BY_DTYPE.type(dict[str, float] | None)
    flops_per_step: F.FLOPS_PER_STEP.type(float | None)
    model_flops_per_step: F.MODEL_FLOPS_PER_STEP.type(float | None)
    predicted_flops_per_step: F.PREDICTED_FLOPS_PER_STEP.type(float | None)
    flops_by_dtype: F.FLOPS_BY_DTYPE.type(dict[str, float] | None)
    uncounted_ops_per_step: F.UNCOUNTED_OPS_PER_STEP.type(float | None)
    idle_fraction: F.IDLE_FRACTION.type(float | None)
    host_bound_fraction: F.HOST_BOUND_FRACTION.type(float | None)
    comm_fraction: F.COMM_FRACTION.type(float | None)
    compute_fraction: F.COMPUTE_FRACTION.type(float | None)
    non_compute_fraction: F.NON_COMPUTE_FRACTION.type(float | None)
    comm_overlap_fraction: F.COMM_OVERLAP_FRACTION.type(float | None)
    exposed_comm_fraction: F.EXPOSED_COMM_FRACTION.type(float | None)
    exposed_transfer_fraction: F.EXPOSED_TRANSFER_FRACTION.type(float | None)
    comm_wait_fraction: F.COMM_WAIT_FRACTION.type(float | None)
    exposed_slow_fraction: F.EXPOSED_SLOW_FRACTION.type(float | None)
    unexplained_exposed_fraction: F.UNEXPLAINED_EXPOSED_FRACTION.type(float | None)
    bubble_fraction: F.BUBBLE_FRACTION.type(float | None)
    predicted_bubble_fraction: F.PREDICTED_BUBBLE_FRACTION.type(float | None)
    modeled_bubble_fraction: F.MODELED_BUBBLE_FRACTION.type(float | None)
    # null where no straggler can be measured (one rank analysed)
    straggler_ranks: F.STRAGGLER_RANKS.type(list[int] | None)
    peak_memory_fraction: F.PEAK_MEMORY_FRACTION.type(float | None)
    max_peak_memory_fraction: F.MAX_PEAK_MEMORY_FRACTION.type(float | None)
    peak_memory_bytes: F.PEAK_MEMORY_BYTES.type(int | float | None)
    predicted_memory_bytes: F.PREDICTED_MEMORY_BYTES.type(float | None)
    projected_efficiency_2x: F.PROJECTED_EFFICIENCY_2X.type(float | None)
    projected_efficiency_8x: F.PROJECTED_EFFICIENCY_8X.type(float | None)
    device_spec: str | None  # the spec-table row used (null on CPU or unknown devices)
    manifest: bool  # the run has a job.json
    null_reasons: dict[str, str] = field(default_factory=dict)
    uncounted_compute_fraction: F.UNCOUNTED_COMPUTE_FRACTION.type(float | None) = None


# ---------------------------------------------------------------- levels
# Each level's `measured` / `predicted` blocks. Where the contract named a figure
# differently inside a level (peak_fraction is max_peak_memory_fraction), the attribute
# is the figure's key and `name=` keeps the JSON key.


class MemoryMeasured(Struct, kw_only=True):
    peak_allocated_bytes: F.PEAK_ALLOCATED_BYTES.type(int | None) = None
    peak_reserved_bytes: F.PEAK_RESERVED_BYTES.type(int | None) = None
    peak_memory_bytes: F.PEAK_MEMORY_BYTES.type(int | float | None) = field(
        default=None, name="peak_bytes"
    )
    capacity_bytes: F.CAPACITY_BYTES.type(int | float | None) = None
    max_peak_memory_fraction: F.MAX_PEAK_MEMORY_FRACTION.type(float | None) = field(
        default=None, name="peak_fraction"
    )


class MemoryPredicted(Struct, kw_only=True):
    states_bytes: F.STATES_BYTES.type(float | None) | UnsetType = UNSET
    activations_bytes: F.ACTIVATIONS_BYTES.type(float | None) | UnsetType = UNSET
    predicted_memory_bytes: F.PREDICTED_MEMORY_BYTES.type(float | None) = field(
        default=None, name="total_bytes"
    )
    zero: F.ZERO.type(int | None) | UnsetType = UNSET
    sequence_parallel: F.SEQUENCE_PARALLEL.type(bool | None) | UnsetType = UNSET


class ComputeMeasured(Struct, kw_only=True):
    mfu: F.MFU.type(float | None) = None
    hfu: F.HFU.type(float | None) = None
    gemm_efficiency: F.GEMM_EFFICIENCY.type(float | None) = None
    peak_flops_source: F.PEAK_FLOPS_SOURCE.type(str | None) = field(
        default=None, name="peak_source"
    )
    flops_per_step: F.FLOPS_PER_STEP.type(float | None) = None
    model_flops_per_step: F.MODEL_FLOPS_PER_STEP.type(float | None) = None
    flops_by_dtype: F.FLOPS_BY_DTYPE.type(dict[str, float] | None) = None
    uncounted_ops_per_step: F.UNCOUNTED_OPS_PER_STEP.type(float | None) = None
    idle_fraction: F.IDLE_FRACTION.type(float | None) = None
    host_bound_fraction: F.HOST_BOUND_FRACTION.type(float | None) = None
    uncounted_compute_fraction: F.UNCOUNTED_COMPUTE_FRACTION.type(float | None) = None


class ComputePredicted(Struct, kw_only=True):
    predicted_flops_per_step: F.PREDICTED_FLOPS_PER_STEP.type(float | None) = field(
        default=None, name="model_flops_per_step"
    )


class CommunicationMeasured(Struct, kw_only=True):
    exposed_comm_fraction: F.EXPOSED_COMM_FRACTION.type(float | None) = None
    exposed_transfer_fraction: F.EXPOSED_TRANSFER_FRACTION.type(float | None) = None
    comm_wait_fraction: F.COMM_WAIT_FRACTION.type(float | None) = None
    exposed_slow_fraction: F.EXPOSED_SLOW_FRACTION.type(float | None) = None
    comm_fraction: F.COMM_FRACTION.type(float | None) = None
    comm_overlap_fraction: F.COMM_OVERLAP_FRACTION.type(float | None) = None
    busbw_by_collective: F.BUSBW_BY_COLLECTIVE.type(dict[str, float | None]) = field(
        default_factory=dict, name="busbw_GBps"
    )
    straggler_wait_fraction: F.STRAGGLER_WAIT_FRACTION.type(float | None) = None
    exposed_pipeline_fraction: F.EXPOSED_PIPELINE_FRACTION.type(float | None) = None
    unexplained_exposed_fraction: F.UNEXPLAINED_EXPOSED_FRACTION.type(float | None) = None


class CommunicationPredicted(Struct, kw_only=True):
    predicted_busbw_by_collective: F.PREDICTED_BUSBW_BY_COLLECTIVE.type(dict[str, float | None]) = (
        field(default_factory=dict, name="busbw_GBps")
    )
    predicted_exposed_comm_fraction: F.PREDICTED_EXPOSED_COMM_FRACTION.type(float | None) = field(
        default=0.0, name="exposed_comm_fraction"
    )


class ScalingMeasured(Struct, kw_only=True):
    bubble_fraction: F.BUBBLE_FRACTION.type(float | None) = None
    straggler_ranks: F.STRAGGLER_RANKS.type(list[int] | None) = field(default_factory=list)


class ScalingPredicted(Struct, kw_only=True):
    predicted_bubble_fraction: F.PREDICTED_BUBBLE_FRACTION.type(float | None) = field(
        default=None, name="bubble_fraction"
    )
    modeled_bubble_fraction: F.MODELED_BUBBLE_FRACTION.type(float | None) = None
    # step time and efficiency at 2× and 8× the world size: {"2x": {...}, "8x": {...}}
    projection: dict[str, dict[str, Any]] | UnsetType | None = UNSET


# a level's verdict: the worst finding charged to it, else ok — or unknown where its
# headline figures cannot be known
Verdict = Literal["ok", "warning", "critical", "unknown"]


class _Level(Struct, kw_only=True, tag_field="level"):
    """A level: its figures measured beside predicted, a verdict — warning or critical:
    the worst finding charged to it; else ok, or unknown when its headline figures
    cannot be known (`verdict_reason` says why; diagnosers.levels.HEADLINE) — the
    supporting tables (`metrics`: per-rank rows, the pipeline model …) and notes (why a
    figure is null, or disagrees)."""

    @property
    def level(self) -> str:
        return self.__struct_config__.tag


class MemoryLevel(_Level, kw_only=True, tag="memory"):
    verdict: Verdict = "ok"
    measured: MemoryMeasured = field(default_factory=MemoryMeasured)
    predicted: MemoryPredicted = field(default_factory=MemoryPredicted)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    verdict_reason: str | None = None  # why the verdict is unknown


class ComputeLevel(_Level, kw_only=True, tag="compute"):
    verdict: Verdict = "ok"
    measured: ComputeMeasured = field(default_factory=ComputeMeasured)
    predicted: ComputePredicted = field(default_factory=ComputePredicted)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    verdict_reason: str | None = None  # why the verdict is unknown


class CommunicationLevel(_Level, kw_only=True, tag="communication"):
    verdict: Verdict = "ok"
    measured: CommunicationMeasured = field(default_factory=CommunicationMeasured)
    predicted: CommunicationPredicted = field(default_factory=CommunicationPredicted)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    verdict_reason: str | None = None  # why the verdict is unknown


class ScalingLevel(_Level, kw_only=True, tag="scaling"):
    verdict: Verdict = "ok"
    measured: ScalingMeasured = field(default_factory=ScalingMeasured)
    predicted: ScalingPredicted = field(default_factory=ScalingPredicted)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    verdict_reason: str | None = None  # why the verdict is unknown


Level = MemoryLevel | ComputeLevel | CommunicationLevel | ScalingLevel
LEVEL_TYPES = {"memory": MemoryLevel, "compute": ComputeLevel,
               "communication": CommunicationLevel, "scaling": ScalingLevel}  # fmt: skip


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


class Report(Struct, kw_only=True):
    schema: int = REPORT_SCHEMA
    tracekit_version: str
    run: RunInfo
    window: Window
    ranks: list[RankRow]
    summary: Summary | UnsetType = UNSET
    levels: list[Level] | UnsetType = UNSET
    collectives: list[CollectiveRow] | UnsetType = UNSET
    top_ops: list[OpRow] | UnsetType = UNSET
    top_kernels: list[KernelRow] | UnsetType = UNSET
    findings: list[FindingRow] | UnsetType = UNSET
    samples: Samples | UnsetType = UNSET
    top_uncounted_ops: list[UncountedOpRow] | UnsetType = UNSET
    top_uncounted_kernels: list[UncountedKernelRow] | UnsetType = UNSET
    step_model: StepModelBlock | UnsetType = UNSET
    regions: list[Region] | UnsetType = UNSET

    @property
    def full(self) -> bool:
        """The levels are in it (not the breakdown alone)."""
        return self.levels is not UNSET

    def level(self, name: str) -> Level | None:
        if self.levels is UNSET:
            return None
        return next((lv for lv in self.levels if lv.level == name), None)

    def to_json(self) -> str:
        return encode(self)


def encode(report: Report) -> str:
    """The JSON report, indented (what `--format json` prints)."""
    return msgspec.json.format(msgspec.json.encode(report), indent=2).decode() + "\n"


def decode(text: str | bytes) -> Report:
    """A JSON report back to its type (a stored report, the report cache)."""
    return msgspec.json.decode(text, type=Report)


def to_dict(report: Report) -> dict[str, Any]:
    """The report as plain JSON values (what a JSON reader of it sees)."""
    return msgspec.to_builtins(report)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the report (`tracekit schema`)."""
    schema = msgspec.json.schema(Report)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "tracekit report"
    schema["description"] = __doc__.split("\n\n")[0].replace("\n", " ")
    return schema
