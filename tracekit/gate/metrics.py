"""What the gate judges: a registry of the report's metrics, each read by key, with its
direction, unit, default threshold and where its per-step samples are.

A metric whose key a report lacks (an older report, a run without that level) is
listed as not compared, never an error. Adding a metric is one `Metric(...)` line.

Thresholds: `5%` (relative change), `2pt` (percentage points, for fractions), `3ms`
(absolute milliseconds), `off` (not gated).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracekit.errors import TracekitError

HIGHER_IS_WORSE, LOWER_IS_WORSE = 1, -1


@dataclass(frozen=True)
class Threshold:
    kind: str  # "pct" (relative), "pt" (points of a fraction), "ms" (absolute), "off"
    value: float = 0.0

    @classmethod
    def parse(cls, text: str, where: str = "") -> Threshold:
        t = str(text).strip().lower()
        if t in ("off", "none", "false"):
            return cls("off")
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(%|pt|pts|ms)", t)
        if not m:
            raise TracekitError(
                f"threshold {where}{text!r} is not one of N% (relative), Npt (points of a "
                "fraction), Nms or off"
            )
        unit = {"%": "pct", "pt": "pt", "pts": "pt", "ms": "ms"}[m.group(2)]
        v = float(m.group(1))
        return cls(unit, v / 100 if unit in ("pct", "pt") else v)

    def __str__(self) -> str:
        if self.kind == "off":
            return "off"
        if self.kind == "ms":
            return f"{self.value:g}ms"
        return f"{self.value * 100:g}{'%' if self.kind == 'pct' else 'pt'}"


@dataclass(frozen=True)
class Metric:
    """One gated figure of the report.

    `summary` is its key in `report["summary"]` (or, with `rank_key`, the mean of that
    key over `report["ranks"]` when the summary lacks it); `sample` its key in
    `samples.ranks[]` (per step, averaged over ranks); `test_from` borrows another
    metric's samples (MFU = FLOPs ÷ step time ÷ peak, the FLOPs the same every step);
    `exact` marks figures with no step-to-step noise (peak memory)."""

    key: str
    label: str
    unit: str  # "ms", "fraction", "bytes", "GB/s", "ratio"
    worse: int
    threshold: str
    summary: str | None = None
    rank_key: str | None = None
    sample: str | None = None
    test_from: str | None = None
    exact: bool = False
    doc: str = ""


# The run-level metrics, in the order they are shown.
# fmt: off
RUN_METRICS: tuple[Metric, ...] = (
    Metric("step_time", "step time", "ms", HIGHER_IS_WORSE, "5%", summary="step_time_ms",
           rank_key="step_time_ms", sample="step_time_ms", doc="mean ProfilerStep duration"),
    Metric("mfu", "MFU", "fraction", LOWER_IS_WORSE, "5%", summary="mfu", rank_key="mfu",
           test_from="step_time", doc="model FLOPs utilization"),
    # hfu moves with mfu, the exposure's parts with exposed_comm: shown, and gated only
    # when given a threshold, so one cause fails one metric
    Metric("hfu", "HFU", "fraction", LOWER_IS_WORSE, "off", summary="hfu", rank_key="hfu",
           test_from="step_time", doc="hardware FLOPs utilization"),
    Metric("exposed_comm", "exposed communication", "fraction", HIGHER_IS_WORSE, "2pt",
           summary="exposed_comm_fraction", rank_key="exposed_comm_fraction",
           sample="exposed_comm_fraction", doc="communication not overlapped by compute"),
    Metric("exposed_transfer", "exposed transfer", "fraction", HIGHER_IS_WORSE, "off",
           summary="exposed_transfer_fraction", rank_key="exposed_transfer_fraction",
           sample="exposed_transfer_fraction",
           doc="exposed communication less waiting for late peers"),
    Metric("comm_wait", "communication wait", "fraction", HIGHER_IS_WORSE, "off",
           summary="comm_wait_fraction", rank_key="comm_wait_fraction",
           sample="comm_wait_fraction", doc="time spent waiting for late peers"),
    Metric("idle", "idle", "fraction", HIGHER_IS_WORSE, "3pt", summary="idle_fraction",
           rank_key="idle_fraction", sample="idle_fraction",
           doc="step less the union of device activity"),
    Metric("host_bound", "host-bound", "fraction", HIGHER_IS_WORSE, "2pt",
           summary="host_bound_fraction", rank_key="host_bound_fraction",
           sample="host_bound_fraction", doc="device gaps waiting for kernel launches"),
    Metric("bubble", "pipeline bubble", "fraction", HIGHER_IS_WORSE, "3pt",
           summary="bubble_fraction", sample="bubble_fraction",
           doc="pipeline stages not computing"),
    Metric("peak_memory", "peak memory", "bytes", HIGHER_IS_WORSE, "5%",
           summary="peak_memory_bytes", exact=True,
           doc="largest allocated or reserved bytes on any rank"),
)
# fmt: on

# Families: one metric per collective, per kernel, per rank.
FAMILIES: dict[str, tuple[str, str, int, str, str]] = {
    # key: (label, unit, worse, default threshold, doc)
    "collective_time": ("time", "ms", HIGHER_IS_WORSE, "10%", "a collective's time per step"),
    "busbw": ("bus bandwidth", "GB/s", LOWER_IS_WORSE, "10%", "nccl-tests bus bandwidth"),
    "kernel_time": ("time", "ms", HIGHER_IS_WORSE, "10%", "a compute kernel's time per step"),
    "rank_step_time": ("step time", "ms", HIGHER_IS_WORSE, "5%", "one rank's step time"),
}

# A collective's or kernel's change must also be this share of the step to matter.
MATERIAL_SHARE = 0.01


def defaults() -> dict[str, Threshold]:
    out = {m.key: Threshold.parse(m.threshold) for m in RUN_METRICS}
    out.update({k: Threshold.parse(v[3]) for k, v in FAMILIES.items()})
    return out


def known_keys() -> list[str]:
    return [m.key for m in RUN_METRICS] + list(FAMILIES)


def unit_of(key: str) -> str:
    m = next((m for m in RUN_METRICS if m.key == key), None)
    return m.unit if m else FAMILIES[key][1]


def parse_spec(spec: str | dict | None, where: str = "--max-regression") -> dict[str, Threshold]:
    """`step_time=5%,exposed_comm=2pt` (or a dict from pyproject) → thresholds by key."""
    if not spec:
        return {}
    items = (
        spec.items()
        if isinstance(spec, dict)
        else (p.split("=", 1) if "=" in p else (p, "") for p in spec.split(",") if p.strip())
    )
    out = {}
    for key, value in items:
        key = key.strip()
        if key not in known_keys():
            raise TracekitError(
                f"{where}: no metric {key!r}; gated metrics: {', '.join(known_keys())}"
            )
        th = Threshold.parse(value, f"{where} {key}=")
        unit = unit_of(key)
        if (th.kind == "pt" and unit != "fraction") or (th.kind == "ms" and unit != "ms"):
            raise TracekitError(
                f"{where} {key}={value}: {key} is in {unit}; use N%"
                + (" or Nms" if unit == "ms" else " or Npt" if unit == "fraction" else "")
            )
        out[key] = th
    return out
