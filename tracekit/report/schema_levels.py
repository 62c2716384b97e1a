"""The report's levels (`tracekit.report.schema` gathers them): each level's measured and
predicted blocks, typed with their figures, its verdict, metrics and notes."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType, field

from tracekit.model import figures as F
from tracekit.report.schema_rows import Struct

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
