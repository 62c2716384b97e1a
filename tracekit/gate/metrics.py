"""What the gate judges: a registry of the report's metrics, each read by key, with its
direction, unit, default threshold and where its per-step samples are.

A metric whose key a report lacks (an older report, a run without that level) is
listed as not compared, never an error. Adding a metric is one `Metric(...)` line.

Thresholds: `5%` (relative change), `2pt` (percentage points, for fractions), `3ms`
(absolute milliseconds), `off` (not gated).

Run noise (`run_noise`): the prior for the run-to-run standard deviation of one run's
figure, in the same units (`4%` of the figure, `1pt`, `2ms`), used where each side of a
comparison is a single run and nothing measures the spread between runs. The defaults
come from repeated runs of `tracekit run ddp -n 2 --steps 6` on a shared 2-core machine
(docs/ci-gate.md, `tracekit gate calibrate`); set yours in `[tool.tracekit.gate.run_noise]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracekit.errors import TracekitError
from tracekit.model import figures as F

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
    """One gated figure of the report: its label, unit, direction and definition are the
    figure's (`tracekit.model.figures`), so the gate names a figure as the report does.

    `figure` is its key in `report["summary"]`; `per_rank` reads it, when the summary
    lacks it, as the mean of the same key over `report["ranks"]`; `sampled` says its
    per-step samples are that key in `samples.ranks[]` (per step, averaged over ranks);
    `test_from` borrows another metric's samples (MFU = FLOPs ÷ step time ÷ peak, the
    FLOPs the same every step); `exact` marks figures with no step-to-step noise (peak
    memory)."""

    key: str
    figure: F.Figure
    threshold: str
    run_noise: str
    per_rank: bool = False
    sampled: bool = False
    test_from: str | None = None
    exact: bool = False

    @property
    def label(self) -> str:
        return self.figure.label

    @property
    def unit(self) -> str:
        return self.figure.unit

    @property
    def worse(self) -> int:
        return LOWER_IS_WORSE if self.figure.better == F.HIGHER else HIGHER_IS_WORSE

    @property
    def doc(self) -> str:
        return self.figure.doc

    @property
    def summary(self) -> str:
        return self.figure.key

    @property
    def rank_key(self) -> str | None:
        return self.figure.key if self.per_rank else None

    @property
    def sample(self) -> str | None:
        return self.figure.key if self.sampled else None


# The run-level metrics, in the order they are shown.
RUN_METRICS: tuple[Metric, ...] = (
    Metric("step_time", F.STEP_TIME_MS, "5%", "4%", per_rank=True, sampled=True),
    Metric("mfu", F.MFU, "5%", "4%", per_rank=True, test_from="step_time"),
    # hfu moves with mfu, the exposure's parts with exposed_comm: shown, and gated only
    # when given a threshold, so one cause fails one metric
    Metric("hfu", F.HFU, "off", "4%", per_rank=True, test_from="step_time"),
    Metric("exposed_comm", F.EXPOSED_COMM_FRACTION, "2pt", "3pt", per_rank=True, sampled=True),
    Metric(
        "exposed_transfer", F.EXPOSED_TRANSFER_FRACTION, "off", "3pt", per_rank=True, sampled=True
    ),
    Metric("comm_wait", F.COMM_WAIT_FRACTION, "off", "3pt", per_rank=True, sampled=True),
    Metric("idle", F.IDLE_FRACTION, "3pt", "3pt", per_rank=True, sampled=True),
    Metric("host_bound", F.HOST_BOUND_FRACTION, "2pt", "2pt", per_rank=True, sampled=True),
    Metric("bubble", F.BUBBLE_FRACTION, "3pt", "1pt", sampled=True),
    Metric("peak_memory", F.PEAK_MEMORY_BYTES, "5%", "0%", exact=True),
)


@dataclass(frozen=True)
class Family:
    """One metric per collective, per kernel, per rank: a figure of a report table."""

    figure: F.Figure
    threshold: str
    run_noise: str

    @property
    def label(self) -> str:
        return self.figure.label

    @property
    def unit(self) -> str:
        return self.figure.unit

    @property
    def worse(self) -> int:
        return LOWER_IS_WORSE if self.figure.better == F.HIGHER else HIGHER_IS_WORSE


FAMILIES: dict[str, Family] = {
    # collectives[].time_ms_per_step
    "collective_time": Family(F.TIME_MS_PER_STEP, "10%", "4%"),
    "busbw": Family(F.BUSBW_GBPS, "10%", "4%"),  # collectives[].busbw_GBps
    "kernel_time": Family(F.TIME_MS_PER_STEP, "10%", "4%"),  # top_kernels[].time_ms_per_step
    "rank_step_time": Family(F.STEP_TIME_MS, "5%", "4%"),  # ranks[].step_time_ms
    # samples.regions[]: device time per step (CPU time on CPU runs); not yet calibrated:
    # kernel_time's prior, the nearest measured family (a region's time is its kernels')
    "region_time": Family(F.TIME_MS_PER_STEP, "10%", "8.5%"),
    # samples.regions[]: CPU time per step on GPU runs (a host-bound region's regression
    # is host time: a layer slowed on an H200 moved its device time 0.03 ms, its CPU time
    # 1.4 ms); the same borrowed prior
    "region_cpu_time": Family(F.TIME_MS_PER_STEP, "10%", "8.5%"),
}

# A collective's or kernel's change must also be this share of the step to matter.
MATERIAL_SHARE = 0.01


def defaults() -> dict[str, Threshold]:
    out = {m.key: Threshold.parse(m.threshold) for m in RUN_METRICS}
    out.update({k: Threshold.parse(f.threshold) for k, f in FAMILIES.items()})
    return out


@dataclass(frozen=True)
class Prior:
    """A family's default run-to-run prior (sd per run, one run a side; the floor under
    a measured spread) and the measurement it rests on: `measured` is the sample sd per
    run that `tracekit gate calibrate` printed, over `runs` runs; `noise` its σ upper
    90% bound (calibrate's `run_noise` line), rounded up to 0.5."""

    noise: str
    measured: str
    runs: int


# The calibrated defaults, for a dedicated runner: `tracekit gate calibrate
# --baseline-runs 3` over six runs of the reference job `tracekit run ddp --world-size 2
# --steps 6` recorded with nothing else running (tests/fixtures/gate_noise_quiet/,
# 2026-11-25). Step time keeps 4%: the six low-load runs spread by 3.8% (more than
# these, 0.99%), and a rank's step moves with it. A loaded runner needs far larger priors
# (docs/ci-gate.md: 40% for step time on the shared machine): calibrate yours. A family
# without a row keeps its Metric/Family `run_noise` (per-region time, "region_time", has
# none yet: its Family borrows kernel_time's).
PRIORS: dict[str, Prior] = {
    "step_time": Prior("4%", "0.99%", 6),
    "rank_step_time": Prior("4%", "1.3%", 6),
    "mfu": Prior("21%", "12%", 6),  # MFU's peak FLOP/s is measured anew by each run
    "exposed_comm": Prior("3.5pt", "1.7pt", 6),
    "idle": Prior("1.5pt", "0.68pt", 6),
    "collective_time": Prior("33.5%", "19%", 6),
    "busbw": Prior("69%", "39%", 6),
    "kernel_time": Prior("8.5%", "4.6%", 6),
}

# Per-entity metrics (one per rank, collective, kernel, region): with one run a side they
# warn rather than fail while no headline metric regressed.
DRILL_DOWN = ("rank_step_time", "collective_time", "busbw", "kernel_time", "region_time",
              "region_cpu_time")  # fmt: skip


def run_noise_defaults() -> dict[str, Threshold]:
    """The prior run-to-run standard deviation of each metric (one run a side): the
    calibrated `PRIORS` row where there is one, else the metric's own."""
    out = {m.key: Threshold.parse(m.run_noise) for m in RUN_METRICS}
    out.update({k: Threshold.parse(f.run_noise) for k, f in FAMILIES.items()})
    out.update({k: Threshold.parse(p.noise) for k, p in PRIORS.items()})
    return out


def known_keys() -> list[str]:
    return [m.key for m in RUN_METRICS] + list(FAMILIES)

def unit_of(key: str) -> str:
    m = next((m for m in RUN_METRICS if m.key == key), None)
    return m.unit if m else FAMILIES[key].unit


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
