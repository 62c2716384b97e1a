"""Every figure of the report, declared once: its key, label, unit, direction and
definition.

A key means one quantity wherever it appears — `ranks[]`, `summary`, a level's
`measured` block, the text, the TUI, the gate. The report schema (`tracekit.report.schema`)
types each field with its figure (`F.mfu`), so the JSON Schema carries the label, unit
and definition; the renderers, the TUI and the gate take labels and units from here and
format through `tracekit.report.units`. Where the public contract gave one quantity a second
name inside a level block (`levels[compute].measured.peak_source` is
`summary.peak_flops_source`), the schema maps that JSON name onto the one figure.

Units: `fraction` (in [0, 1], shown as %), `ms`, `ns`, `bytes`, `flops`, `flops_per_s`,
`tflops` (TFLOP/s), `GBps`, `count`, `ratio`, `ranks` (a list of ranks), `text`, `bool`,
`map` (a mapping of a unit's values: FLOPs by dtype …).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

LOWER, HIGHER = "lower", "higher"


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    better: str | None  # "lower", "higher", or None (neither: a size, a count, a fact)
    doc: str
    of: str | None = None  # for unit "map": the unit of its values

    def type(self, py: Any) -> Any:
        """`py` annotated with this figure's metadata (for msgspec and its JSON Schema)."""
        extra = {"x-label": self.label, "x-unit": self.unit}
        if self.better:
            extra["x-better"] = self.better
        if self.of:
            extra["x-of"] = self.of
        return Annotated[
            py, msgspec.Meta(description=self.doc, extra_json_schema=extra, extra={"fig": self})
        ]


CATALOG: dict[str, Figure] = {}


def _f(key: str, label: str, unit: str, better: str | None, doc: str, of: str | None = None):
    fig = Figure(key, label, unit, better, doc, of)
    CATALOG[key] = fig
    return fig


def get(key: str) -> Figure | None:
    return CATALOG.get(key)


# fmt: off
# ---------------------------------------------------------------- the per-rank breakdown
STEP_TIME_MS = _f("step_time_ms", "step time", "ms", LOWER,
    "Mean ProfilerStep duration of the analysed steps (summary: mean over ranks).")
WINDOW_MS = _f("window_ms", "window", "ms", None,
    "Length of the analysed window on that rank: first selected ProfilerStep start to last "
    "end (`steps`), first to last device activity (`trace`), or HTA's window (`hta`).")
STEPS = _f("steps", "steps", "count", None, "ProfilerSteps analysed on that rank.")
WINDOW_START_NS = _f("window_start_ns", "window start", "ns", None,
    "Start of the analysed window, ns since the Unix epoch.")
BUSY_MS = _f("busy_ms", "busy", "ms", None,
    "Union of all device activity in the window (compute, communication, memcpy, memset).")
COMPUTE_MS = _f("compute_ms", "compute", "ms", None,
    "Union of compute activity in the window, less host waits for communication (CPU runs).")
COMM_MS = _f("comm_ms", "communication", "ms", None,
    "Union of communication in the window (CPU runs: host waits for it included).")
OVERLAP_MS = _f("overlap_ms", "comm/compute overlap", "ms", None,
    "Time compute and communication run together in the window.")
EXPOSED_COMM_MS = _f("exposed_comm_ms", "exposed communication", "ms", LOWER,
    "Communication no compute hides, over the whole window: comm_ms − overlap_ms.")
COMM_WAIT_MS = _f("comm_wait_ms", "waiting for peers", "ms", LOWER,
    "Exposed time inside matched collectives before their last peer arrived, over the window.")
IDLE_FRACTION = _f("idle_fraction", "idle", "fraction", LOWER,
    "Window less the union of all device activity, ÷ window (HTA's definition).")
COMPUTE_FRACTION = _f("compute_fraction", "compute", "fraction", HIGHER,
    "Union of compute activity ÷ window (HTA's definition; CPU runs: less host waits).")
NON_COMPUTE_FRACTION = _f("non_compute_fraction", "non-compute", "fraction", LOWER,
    "Busy time not under compute (communication, memcpy, memset) ÷ window.")
COMM_FRACTION = _f("comm_fraction", "communication", "fraction", None,
    "Union of communication ÷ window (CPU runs: host waits for communication included).")
COMM_OVERLAP_FRACTION = _f("comm_overlap_fraction", "comm/compute overlap", "fraction", HIGHER,
    "Time compute and communication run together ÷ communication time (HTA's comm/comp "
    "overlap); null without communication.")
EXPOSED_COMM_FRACTION = _f("exposed_comm_fraction", "exposed communication", "fraction", LOWER,
    "Communication not overlapped by compute ÷ window = comm_fraction × (1 − "
    "comm_overlap_fraction); its parts are exposed_transfer_fraction and comm_wait_fraction.")
EXPOSED_TRANSFER_FRACTION = _f("exposed_transfer_fraction", "exposed transfer", "fraction", LOWER,
    "exposed_comm_fraction − comm_wait_fraction: the transfer itself (and, for collectives not "
    "matched across ranks, any waiting the trace cannot tell apart).")
COMM_WAIT_FRACTION = _f("comm_wait_fraction", "waiting for peers", "fraction", LOWER,
    "The exposed part inside matched collectives before their last peer arrived ÷ window.")
EXPOSED_SLOW_FRACTION = _f("exposed_slow_fraction", "slow excess", "fraction", LOWER,
    "Exposed time slow collectives spend beyond their α-β prediction ÷ step.")

# ---------------------------------------------------------------- compute
MFU = _f("mfu", "MFU (model FLOPs)", "fraction", HIGHER,
    "Model FLOPs utilization: each dtype's model FLOPs (3 × forward; recompute not counted) "
    "÷ that dtype's peak, ÷ window; the work tracekit can count (ops with a FLOPs formula "
    "and shapes).")
HFU = _f("hfu", "HFU (hardware FLOPs)", "fraction", HIGHER,
    "Hardware FLOPs utilization: the FLOPs the counted ops executed (recompute included) ÷ "
    "peak per dtype, ÷ window.")
GEMM_EFFICIENCY = _f("gemm_efficiency", "GEMM efficiency", "fraction", HIGHER,
    "Time at peak of the counted ops that have device time ÷ that device time: how fast the "
    "kernels themselves run.")
PEAK_FLOPS_SOURCE = _f("peak_flops_source", "peak source", "text", None,
    "Where the peak FLOP/s came from (device table, calibration, --peak-tflops).")
PEAK_FLOPS_BY_DTYPE = _f("peak_flops_by_dtype", "peak FLOP/s by dtype", "map", None,
    "The peak FLOP/s used per dtype class (fp32, tf32, bf16, fp16, fp8).", of="flops_per_s")
FLOPS_PER_STEP = _f("flops_per_step", "executed FLOPs / step", "flops", None,
    "Hardware FLOPs the counted ops executed per step, all ranks.")
MODEL_FLOPS_PER_STEP = _f("model_flops_per_step", "model FLOPs / step", "flops", None,
    "Model FLOPs per step, all ranks: 3 × the forward's (the forward alone without backward).")
PREDICTED_FLOPS_PER_STEP = _f("predicted_flops_per_step", "predicted model FLOPs / step",
    "flops", None, "tokens per step × (6N + 6·h·V + 12·L·H·Q·T, attention halved when causal) "
    "from job.json (PaLM app. B; logits: Chinchilla app. F).")
FLOPS_BY_DTYPE = _f("flops_by_dtype", "FLOPs / step by dtype", "map", None,
    "Executed FLOPs per step by dtype class, all ranks.", of="flops")
UNCOUNTED_OPS_PER_STEP = _f("uncounted_ops_per_step", "ops not counted / step", "count", LOWER,
    "Ops of the FLOPs table whose FLOPs the trace cannot give (a missing argument), per step.")
UNCOUNTED_COMPUTE_FRACTION = _f("uncounted_compute_fraction", "compute not counted", "fraction",
    LOWER, "Device time of GEMM/attention/convolution work whose FLOPs tracekit cannot know "
    "— graph replays and op-less kernels that are matmul-class by kernel name, ops without a "
    "FLOP formula whose kernel or op name is matmul-class, table ops whose shapes lack an "
    "argument — ÷ device time of all compute kernels in the window (plain sums). "
    "Elementwise, norm, embedding, optimizer and copy time is not in it (no model FLOPs). "
    "CPU runs: time of table ops without FLOPs and of matmul-class ops outside the table "
    "÷ compute time.")
HOST_BOUND_FRACTION = _f("host_bound_fraction", "host-bound", "fraction", LOWER,
    "Device gaps that end with a kernel launched only after the previous work had ended "
    "(the device waited for the host) ÷ window; gaps across a step start left out; GPU runs.")

# ---------------------------------------------------------------- communication
UNEXPLAINED_EXPOSED_FRACTION = _f("unexplained_exposed_fraction", "unexplained", "fraction",
    LOWER, "Exposed communication no straggler, slow collective or pipeline explains ÷ step, "
    "mean over ranks (what communication.exposed reports).")
STRAGGLER_WAIT_FRACTION = _f("straggler_wait_fraction", "straggler's wait", "fraction", LOWER,
    "Exposed waiting for peers charged to a straggler ÷ step, mean over ranks.")
EXPOSED_PIPELINE_FRACTION = _f("exposed_pipeline_fraction", "pipeline send/recv", "fraction",
    LOWER, "Exposed point-to-point time of a pipeline (the bubble's) ÷ step; pipelines only.")
# exposed_comm_fraction broken down two ways, each adding to it (a null part does not
# apply: a run without a pipeline has no pipeline send/recv). By what: each rank's exposed
# communication is transfer or waiting for peers. By cause: the finding each part is
# charged to — a slow collective's excess, a straggler's wait, a pipeline's send/recv,
# and what none explains (communication.exposed's).
EXPOSED_PARTS: dict[str, tuple[str, ...]] = {
    "by what": ("exposed_transfer_fraction", "comm_wait_fraction"),
    "by cause": ("exposed_slow_fraction", "straggler_wait_fraction",
                 "exposed_pipeline_fraction", "unexplained_exposed_fraction"),
}
PREDICTED_EXPOSED_COMM_FRACTION = _f("predicted_exposed_comm_fraction",
    "predicted exposed communication", "fraction", LOWER,
    "What the model expects exposed: 0 (all communication hidden).")
BUSBW_BY_COLLECTIVE = _f("busbw_by_collective", "bus bandwidth", "map", HIGHER,
    "Bus bandwidth (nccl-tests) of the five collectives with the most time, by name.",
    of="GBps")
PREDICTED_BUSBW_BY_COLLECTIVE = _f("predicted_busbw_by_collective", "predicted bus bandwidth",
    "map", None, "The α-β model's bus bandwidth of the same collectives, by name.", of="GBps")

# ---------------------------------------------------------------- scaling
BUBBLE_FRACTION = _f("bubble_fraction", "pipeline bubble", "fraction", LOWER,
    "Pipeline runs: mean over stages of 1 − compute fraction.")
PREDICTED_BUBBLE_FRACTION = _f("predicted_bubble_fraction", "bubble formula", "fraction", LOWER,
    "(P−1)/(M+P−1), interleaved (P−1)/(V·M+P−1).")
MODELED_BUBBLE_FRACTION = _f("modeled_bubble_fraction", "modeled bubble", "fraction", LOWER,
    "The schedule run with the measured per-stage times, hops and host time, plus the time "
    "outside the pipeline.")
STRAGGLER_RANKS = _f("straggler_ranks", "stragglers", "ranks", LOWER,
    "Ranks raised as stragglers (scaling.straggler); null with one rank analysed.")
PROJECTED_EFFICIENCY_2X = _f("projected_efficiency_2x", "efficiency at 2× ranks", "fraction",
    HIGHER, "Weak-scaling efficiency projected at twice the world size (α-β model).")
PROJECTED_EFFICIENCY_8X = _f("projected_efficiency_8x", "efficiency at 8× ranks", "fraction",
    HIGHER, "Weak-scaling efficiency projected at eight times the world size (α-β model).")

# ---------------------------------------------------------------- memory
PEAK_MEMORY_FRACTION = _f("peak_memory_fraction", "peak memory", "fraction", LOWER,
    "Peak reserved (or allocated) ÷ device capacity; summary: the mean over ranks.")
MAX_PEAK_MEMORY_FRACTION = _f("max_peak_memory_fraction", "peak memory (worst rank)",
    "fraction", LOWER, "The worst rank's peak ÷ its device capacity.")
PEAK_MEMORY_BYTES = _f("peak_memory_bytes", "peak bytes", "bytes", LOWER,
    "The largest of peak allocated and peak reserved on any rank.")
PEAK_ALLOCATED_BYTES = _f("peak_allocated_bytes", "peak allocated", "bytes", LOWER,
    "Largest allocator total allocated on any rank.")
PEAK_RESERVED_BYTES = _f("peak_reserved_bytes", "peak reserved", "bytes", LOWER,
    "Largest allocator total reserved (per rank in ranks[]; largest of any rank in a level).")
CAPACITY_BYTES = _f("capacity_bytes", "capacity", "bytes", None,
    "Device memory capacity of the worst rank.")
PREDICTED_MEMORY_BYTES = _f("predicted_memory_bytes", "predicted memory", "bytes", None,
    "Model states (16Ψ mixed precision, 8Ψ 16-bit without master weights; sharded by "
    "ZeRO/FSDP, ÷ tp·pp) + activations (Korthikanti et al.) + fp32 logits.")
STATES_BYTES = _f("states_bytes", "model states", "bytes", None,
    "Predicted parameter, gradient and optimizer bytes per device (DDP: + its gradient "
    "buckets).")
ACTIVATIONS_BYTES = _f("activations_bytes", "activations", "bytes", None,
    "Predicted activation bytes per device (Korthikanti et al.; no a·s² scores with fused "
    "attention) + the last stage's fp32 logits (4·s·b·V).")
ZERO = _f("zero", "ZeRO stage", "count", None, "The sharding stage the prediction assumes.")
SEQUENCE_PARALLEL = _f("sequence_parallel", "sequence parallelism", "bool", None,
    "Whether the activation equation assumes sequence parallelism (TP runs).")

# ---------------------------------------------------------------- collectives table
COLL_BYTES = _f("bytes", "size", "bytes", None,
    "nccl-tests' S: max(in, out elements) × element size.")
COUNT_PER_STEP = _f("count_per_step", "per step", "count", None, "Instances per step.")
TRANSFER_MS = _f("transfer_ms", "transfer", "ms", LOWER,
    "Median over instances of the shortest duration across matched ranks (waiting left out).")
PREDICTED_MS = _f("predicted_ms", "predicted", "ms", None, "α + S·f/B (α-β model).")
BUSBW_GBPS = _f("busbw_GBps", "bus bandwidth", "GBps", HIGHER,
    "nccl-tests bus bandwidth S·f/t from the transfer time; null unless every instance is "
    "matched across a group of known size.")
PREDICTED_BUSBW_GBPS = _f("predicted_busbw_GBps", "predicted bus bandwidth", "GBps", None,
    "The α-β model's bus bandwidth for this size and group.")
TIME_MS_PER_STEP = _f("time_ms_per_step", "time / step", "ms", LOWER,
    "Union of each rank's instances clipped to its window, per step, mean over all ranks.")
EXPOSED_MS = _f("exposed_ms", "exposed / step", "ms", LOWER,
    "The part of time_ms_per_step no compute hides.")
EXPOSED_WAIT_MS = _f("exposed_wait_ms", "exposed wait / step", "ms", LOWER,
    "The part of exposed_ms spent waiting for late peers (matched instances).")

# ---------------------------------------------------------------- ops and kernels
DEVICE_MS = _f("device_ms", "device time", "ms", None,
    "Device time of the op's kernels over the window, all ranks.")
ACHIEVED_TFLOPS = _f("achieved_tflops", "achieved", "tflops", HIGHER,
    "Counted FLOPs ÷ the device time of the ops that have both, TFLOP/s.")
OP_PEAK_FRACTION = _f("op_peak_fraction", "% of peak", "fraction", HIGHER,
    "Time at peak ÷ device time for the op (null above 100%: a suspect count).")
# fmt: on


def label(key: str, default: str | None = None) -> str:
    fig = CATALOG.get(key)
    return fig.label if fig else (default or key.replace("_", " "))


def unit(key: str) -> str | None:
    fig = CATALOG.get(key)
    return fig.unit if fig else None


# fmt: off
# ---------------------------------------------------------------- the step model (issue 18)
MEASURED_STEP_MS = _f("measured_step_ms", "measured step", "ms", LOWER,
    "The step the step model replays: each rank's analysed window ÷ its steps, mean over "
    "ranks (tracekit.stepmodel.replay).")
REPLAYED_STEP_MS = _f("replayed_step_ms", "replayed step", "ms", LOWER,
    "The step of the dependency graph run forward unchanged, mean over ranks.")
REPLAY_ERROR = _f("replay_error", "replay error", "relative", None,
    "replayed_step_ms ÷ measured_step_ms − 1: how completely the graph explains the step "
    "(0: every start explained by a dependency the trace shows).")
PREDICTED_STEP_MS = _f("predicted_step_ms", "predicted step", "ms", LOWER,
    "The step of the graph replayed with the what-if change applied.")
SAVED_MS = _f("saved_ms", "saved", "ms", HIGHER,
    "replayed_step_ms − predicted_step_ms: the step time the change wins.")
CRITICAL_PATH_MS = _f("critical_path_ms", "critical path", "map", None,
    "Time on the critical path per step (the chain of dependencies that sets the step, "
    "backtracked from its end across ranks), by kind or by rank: each rank's path, from "
    "its window start to its replayed end, ÷ its steps, the mean over ranks — so the kinds "
    "add to the replayed step, and so do the ranks.", of="ms")
COLLECTIVE_SLACK_MS = _f("collective_slack_ms", "collective slack", "map", None,
    "Per collective: the median over its instances (matched across ranks) of how much "
    "later it could start without delaying the step's end, from a backward pass over the "
    "step model's graph; 0 on the critical path.", of="ms")
PATH_ORIGIN_NS = _f("path_origin_ns", "critical path origin", "ns", None,
    "Time zero of the critical path's segments (their `start_ms`): the earliest start of "
    "the windows the step model replayed — each rank's last steps only where the model "
    "covers those (its note says so) — ns since the Unix epoch on the run's aligned clock.")
# fmt: on

# fmt: off
# ---------------------------------------------------------------- regions (issue 30)
CPU_MS_PER_STEP = _f("cpu_ms_per_step", "CPU time / step", "ms", None,
    "The region's CPU span per step (its instances summed), mean over the ranks holding it.")
DEVICE_MS_PER_STEP = _f("device_ms_per_step", "device time / step", "ms", LOWER,
    "Device time of the work the region launched (kernels, copies, sets whose runtime call "
    "ran inside its span on its thread; children included), per step, mean over the ranks "
    "holding it.")
DEVICE_SELF_MS_PER_STEP = _f("device_self_ms_per_step", "device self / step", "ms", LOWER,
    "The part of device_ms_per_step launched outside every child region.")
DEVICE_MS_BY_RANK = _f("device_ms_by_rank", "device time by rank", "map", None,
    "device_ms_per_step on each rank holding the region.", of="ms")
# fmt: on


# ---------------------------------------------------------------- the summary, from the levels
@dataclass(frozen=True)
class From:
    """Where a summary figure comes from. `level` is a level (memory, compute,
    communication, scaling): its `block` (measured, predicted or metrics), read at `path`
    (attributes and keys in turn; empty: the figure's own key, as the schema's blocks
    name their attributes); or `ranks`: the mean over `ranks[]` of the figure's key; or
    `run`: the run's step (each rank's step, or its window without steps, mean over ranks)."""

    level: str
    block: str | None = None
    path: tuple[str, ...] = ()


# The summary, figure by figure: `diagnosers.assemble` derives it from this table and the
# levels alone. A per-rank figure's summary is its mean over ranks; a level's headline
# figure is the level's own.
SUMMARY_FROM: dict[Figure, From] = {
    STEP_TIME_MS: From("run"),
    MFU: From("compute", "measured"),
    HFU: From("compute", "measured"),
    GEMM_EFFICIENCY: From("compute", "measured"),
    PEAK_FLOPS_SOURCE: From("compute", "measured"),
    PEAK_FLOPS_BY_DTYPE: From("compute", "metrics"),
    FLOPS_PER_STEP: From("compute", "measured"),
    MODEL_FLOPS_PER_STEP: From("compute", "measured"),
    PREDICTED_FLOPS_PER_STEP: From("compute", "predicted"),
    FLOPS_BY_DTYPE: From("compute", "measured"),
    UNCOUNTED_OPS_PER_STEP: From("compute", "measured"),
    UNCOUNTED_COMPUTE_FRACTION: From("compute", "measured"),
    HOST_BOUND_FRACTION: From("compute", "measured"),
    IDLE_FRACTION: From("ranks"),
    COMM_FRACTION: From("ranks"),
    COMPUTE_FRACTION: From("ranks"),
    NON_COMPUTE_FRACTION: From("ranks"),
    COMM_OVERLAP_FRACTION: From("ranks"),
    EXPOSED_COMM_FRACTION: From("ranks"),
    EXPOSED_TRANSFER_FRACTION: From("ranks"),
    COMM_WAIT_FRACTION: From("ranks"),
    EXPOSED_SLOW_FRACTION: From("ranks"),
    UNEXPLAINED_EXPOSED_FRACTION: From("communication", "measured"),
    BUBBLE_FRACTION: From("scaling", "measured"),
    PREDICTED_BUBBLE_FRACTION: From("scaling", "predicted"),
    MODELED_BUBBLE_FRACTION: From("scaling", "predicted"),
    STRAGGLER_RANKS: From("scaling", "measured"),
    PROJECTED_EFFICIENCY_2X: From("scaling", "predicted", ("projection", "2x", "efficiency")),
    PROJECTED_EFFICIENCY_8X: From("scaling", "predicted", ("projection", "8x", "efficiency")),
    PEAK_MEMORY_FRACTION: From("ranks"),
    MAX_PEAK_MEMORY_FRACTION: From("memory", "measured"),
    PEAK_MEMORY_BYTES: From("memory", "measured"),
    PREDICTED_MEMORY_BYTES: From("memory", "predicted"),
}
