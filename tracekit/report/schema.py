"""The report, typed: its encoding is the JSON report (`analyze --format json`), a public
contract whose keys only grow. `tracekit schema` prints its JSON Schema; every figure
field is typed with its figure (`tracekit.model.figures`), so the schema carries each
figure's label, unit, direction and definition.

A figure that cannot be known is null and `summary.null_reasons` says why. A report of
the breakdown alone (`--breakdown-only`) has `schema`, `tracekit_version`, `run`,
`window` and `ranks`; a full one adds the rest.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType, field

from tracekit.metrics.breakdown import RankBreakdown
from tracekit.metrics.samples import Samples
from tracekit.model import figures as F
from tracekit.report.schema_levels import (
    LEVEL_TYPES,
    CommunicationLevel,
    CommunicationMeasured,
    CommunicationPredicted,
    ComputeLevel,
    ComputeMeasured,
    ComputePredicted,
    Level,
    MemoryLevel,
    MemoryMeasured,
    MemoryPredicted,
    ScalingLevel,
    ScalingMeasured,
    ScalingPredicted,
    Verdict,
)
from tracekit.report.schema_rows import (
    CollectiveRow,
    ComputeRankRow,
    CriticalPath,
    FindingRow,
    KernelRow,
    OpRow,
    PathSegment,
    Region,
    Remedy,
    StepModelBlock,
    Struct,
    UncountedKernelRow,
    UncountedOpRow,
    WhatIf,
    WhatIfReport,
    known,
)

REPORT_SCHEMA = 1


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


# the report's types, its levels' and rows' included: `tracekit.report.schema` is the one
# import path for all of them
__all__ = [
    "LEVEL_TYPES",
    "REPORT_SCHEMA",
    "UNSET",
    "CollectiveRow",
    "CommunicationLevel",
    "CommunicationMeasured",
    "CommunicationPredicted",
    "ComputeLevel",
    "ComputeMeasured",
    "ComputePredicted",
    "ComputeRankRow",
    "CriticalPath",
    "DeviceLag",
    "FindingRow",
    "KernelRow",
    "Level",
    "MemoryLevel",
    "MemoryMeasured",
    "MemoryPredicted",
    "OpRow",
    "PathSegment",
    "RankRow",
    "RankSelection",
    "Region",
    "Remedy",
    "Report",
    "RunInfo",
    "ScalingLevel",
    "ScalingMeasured",
    "ScalingPredicted",
    "StepModelBlock",
    "Struct",
    "Summary",
    "UncountedKernelRow",
    "UncountedOpRow",
    "UnsetType",
    "Verdict",
    "WhatIf",
    "WhatIfReport",
    "Window",
    "decode",
    "encode",
    "json_schema",
    "known",
    "to_dict",
]
