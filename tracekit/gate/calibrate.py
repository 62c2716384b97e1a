"""`tracekit gate calibrate`: from repeated runs of one job (same code, same options),
each gated run metric's run-to-run spread, and the thresholds that keep false failures
under a target while catching a given regression.

The model is the gate's own (`tracekit.gate.stats`): a run's figure is the job's value
plus a run-to-run deviation, normal with standard deviation σ; a comparison is one new
run against a baseline of n runs, judged by Student's t over run means at α and by the
threshold T (a failure needs both: the change beyond T and p < α).

- **Spread**: s, the sample standard deviation of the runs' figures (k − 1 degrees of
  freedom); and σ's upper one-sided 90% confidence bound s·√((k − 1)/χ²₀.₁₀(k − 1)) (the
  chi-square interval of a normal variance, e.g. NIST/SEMATECH e-Handbook of Statistical
  Methods §7.2.3) — the prior to state for one-run-a-side comparisons, so that a prior
  taken from a few runs is not too small.
- **Threshold for a false-failure target f**: with no change, the difference
  d = x_new − mean(baseline) is normal with sd σ·√(1 + 1/n), and only regressions fail,
  so P(d > T) ≤ f whatever the test gives T_f = z₁₋f · σᵤ · √(1 + 1/n).
- **Catch rate** of a regression R at that threshold: P(d > T and p < α) with d's mean
  R, simulated from the model with σ = s (fixed seed, 20 000 trials) — the t-test and
  the threshold are not independent, so it is counted rather than multiplied. Also the
  simulated false-failure rate (R = 0), and the baseline runs that would catch R four
  times in five at the threshold for that many runs.

Figures are the reports' own (each run's figure, as the gate reads it); nothing here
computes a figure of a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev
from typing import Any

from tracekit.errors import TracekitError
from tracekit.gate import metrics as M
from tracekit.gate.metrics import Threshold
from tracekit.gate.read import (
    STEP_MS,
    coll_figure,
    coll_label,
    collectives,
    kernel_figure,
    num,
    point,
    region_label,
    region_samples,
    region_series,
)

CONFIDENCE = 0.90  # of σ's upper bound
TRIALS = 20_000
POWER = 0.8
MAX_BASELINE_RUNS = 30
DEFAULT_CATCH = {"pct": Threshold("pct", 0.20), "pt": Threshold("pt", 0.05)}


@dataclass
class MetricSpread:
    """One metric's spread; for a family (per rank, collective, kernel), that of the
    entity that spreads most (`entity`), of those that matter (1% of the step or more)."""

    key: str
    label: str
    unit: str
    kind: str  # the threshold kind its spread is written in: "pct" or "pt"
    values: list[float]
    mean: float
    sd: float  # per run, absolute
    sd_upper: float  # σ's upper bound, absolute
    threshold: float | None = None  # in kind units (a fraction: 0.12 is 12% or 12pt)
    catch: Threshold | None = None
    catch_rate: float | None = None
    false_rate: float | None = None
    runs_to_catch: int | None = None
    entity: str | None = None
    entities: int = 0

    def units(self, x: float) -> float:
        """An absolute amount in the spread's unit (relative to the mean for %)."""
        return x / abs(self.mean) if self.kind == "pct" and self.mean else x

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.key,
            "label": self.label,
            "entity": self.entity,
            "entities": self.entities,
            "unit": self.unit,
            "runs": len(self.values),
            "values": self.values,
            "mean": self.mean,
            "sd": self.sd,
            "sd_in_units": self.units(self.sd),
            "sd_upper": self.sd_upper,
            "sd_upper_in_units": self.units(self.sd_upper),
            "units": "relative" if self.kind == "pct" else "points",
            "run_noise": fmt(self.kind, self.units(self.sd_upper), up=True),
            "threshold": fmt(self.kind, self.threshold, up=True) if self.threshold else None,
            "catch": str(self.catch) if self.catch else None,
            "catch_rate": self.catch_rate,
            "false_failure_rate": self.false_rate,
            "baseline_runs_to_catch": self.runs_to_catch,
        }


def fmt(kind: str, x: float | None, up: bool = False) -> str:
    """A threshold or prior as the config writes it; `up`: rounded up to 0.5."""
    if x is None:
        return "—"
    v = x * 100
    v = math.ceil(v * 2 - 1e-9) / 2 if up else float(f"{v:.2g}")
    return f"{v:g}{'%' if kind == 'pct' else 'pt'}"


def sd_upper(s: float, k: int, confidence: float = CONFIDENCE) -> float:
    """σ's upper one-sided confidence bound from the sd s of k runs (chi-square)."""
    from scipy.stats import chi2

    return s * math.sqrt((k - 1) / chi2.ppf(1 - confidence, k - 1))


def false_fail_threshold(sd: float, baseline_runs: int, target: float) -> float:
    """T with P(d > T) = target for d ~ N(0, sd²(1 + 1/n)): one new run, n baseline runs."""
    return NormalDist().inv_cdf(1 - target) * sd * math.sqrt(1 + 1 / baseline_runs)


def simulate(
    sd: float, shift: float, threshold: float, baseline_runs: int, alpha: float, seed: int = 0
) -> float:
    """The share of simulated comparisons that fail: one new run (mean `shift`) against
    `baseline_runs` runs (mean 0), both with run-to-run sd `sd`; a failure is
    d > threshold and Student's t p < α (the gate's rule with a measured baseline)."""
    import numpy as np
    from scipy.stats import t as student_t

    rng = np.random.default_rng(seed)
    n = baseline_runs
    base = rng.normal(0.0, sd, size=(TRIALS, n))
    new = rng.normal(shift, sd, size=TRIALS)
    d = new - base.mean(axis=1)
    s = base.std(axis=1, ddof=1)  # the new side's one run adds no spread
    with np.errstate(divide="ignore", invalid="ignore"):
        t = d / (s * math.sqrt(1 + 1 / n))
    p = 2 * student_t.sf(np.abs(t), n - 1)
    return float(np.mean((d > threshold) & (p < alpha)))


def spreads(
    reports: list[dict],
    false_target: float = 0.01,
    catch: dict[str, Threshold] | None = None,
    baseline_runs: int | None = None,
    alpha: float = 0.05,
) -> list[MetricSpread]:
    """Each gated run metric's spread over the runs' reports, and its thresholds."""
    if len(reports) < 2:
        raise TracekitError("calibrate needs two runs or more of the same job")
    n = baseline_runs or max(len(reports) - 1, 2)
    if n < 2:
        raise TracekitError("--baseline-runs must be 2 or more (one run measures no spread)")
    out = []
    for m in M.RUN_METRICS:
        th = M.Threshold.parse(m.threshold)
        if m.exact or th.kind == "off":
            continue
        values = [point(r, m) for r in reports]
        if any(v is None for v in values):
            continue
        kind = th.kind if th.kind in ("pct", "pt") else "pct"
        ms = _spread(m.key, m.label, m.unit, kind, values)
        out.append(_thresholds(ms, (catch or {}).get(m.key), n, false_target, alpha))
    for fam, entities in _families(reports).items():
        f = M.FAMILIES[fam]
        rows = [_spread(fam, f.label, f.unit, "pct", vals) for vals in entities.values()]
        if not rows:
            continue
        worst = max(range(len(rows)), key=lambda i: rows[i].units(rows[i].sd))
        ms = rows[worst]
        ms.entity, ms.entities = list(entities)[worst], len(rows)
        out.append(_thresholds(ms, (catch or {}).get(fam), n, false_target, alpha))
    return out


def _spread(key: str, label: str, unit: str, kind: str, values: list[float]) -> MetricSpread:
    s = stdev(values)
    return MetricSpread(key, label, unit, kind, values, fmean(values), s,
                        sd_upper(s, len(values)))  # fmt: skip


def _thresholds(
    ms: MetricSpread, want: Threshold | None, n: int, false_target: float, alpha: float
) -> MetricSpread:
    want = want or DEFAULT_CATCH[ms.kind]
    ms.catch = want
    shift = want.value * abs(ms.mean) if want.kind == "pct" else want.value
    if ms.sd > 0:
        t_abs = false_fail_threshold(ms.sd_upper, n, false_target)
        ms.threshold = ms.units(t_abs)
        ms.catch_rate = simulate(ms.sd, shift, t_abs, n, alpha)
        ms.false_rate = simulate(ms.sd, 0.0, t_abs, n, alpha, seed=1)
        for k in range(2, MAX_BASELINE_RUNS + 1):
            t_k = false_fail_threshold(ms.sd_upper, k, false_target)
            if simulate(ms.sd, shift, t_k, k, alpha, seed=2) >= POWER:
                ms.runs_to_catch = k
                break
    return ms


def _families(reports: list[dict]) -> dict[str, dict[str, list[float]]]:
    """Per family, each entity's figure in every run (entities every run has, and that
    are at least 1% of the mean step: the gate's own materiality)."""
    step = fmean(point(r, M.RUN_METRICS[0]) or 0.0 for r in reports)
    floor = M.MATERIAL_SHARE * step
    out: dict[str, dict[str, list[float]]] = {}

    def keep(fam: str, name: str, vals: list, size: list | None = None) -> None:
        if all(v is not None for v in vals) and fmean(size or vals) >= floor:
            out.setdefault(fam, {})[name] = vals

    ranks = [r.get("rank") for r in reports[0].get("ranks") or []]
    for rank in ranks:
        vals = [next((num(x.get(STEP_MS)) for x in r.get("ranks") or []
                      if x.get("rank") == rank), None) for r in reports]  # fmt: skip
        keep("rank_step_time", f"rank {rank}", vals)
    for key in collectives(reports[0])[0]:
        label = coll_label(key)
        t = [coll_figure(r, key, "collective_time") for r in reports]
        keep("collective_time", label, t)
        if all(x is not None for x in t):
            keep("busbw", label, [coll_figure(r, key, "busbw") for r in reports], t)
    for k in (reports[0].get("samples") or {}).get("kernels") or []:
        keep("kernel_time", k["name"], [kernel_figure(r, k["name"]) for r in reports])
    for key in region_samples(reports[0]):
        series = [region_series(r, key) for r in reports]
        keep("region_time", region_label(key), [fmean(s) if s else None for s in series])
        cpu = [region_series(r, key, cpu=True) for r in reports]
        if all(cpu):  # GPU runs: the region's CPU time too
            keep("region_cpu_time", region_label(key), [fmean(s) for s in cpu])
    return out


def to_text(rows: list[MetricSpread], runs: int, n: int, target: float, alpha: float) -> str:
    lines = [
        f"run-to-run spread of {runs} runs of one job; thresholds for one new run against "
        f"a baseline of {n} runs, false failures ≤ {target * 100:g}% (α = {alpha:g})",
        "",
        f"  {'metric':14} {'mean':>10} {'sd/run':>8} {'sd ≤(90%)':>9} {'threshold':>9} "
        f"{'catch':>6} {'caught':>7} {'false':>6}  baseline runs to catch 80%",
    ]
    from tracekit.report import units

    for r in rows:
        caught = f"{r.catch_rate * 100:.0f}%" if r.catch_rate is not None else "—"
        false = f"{r.false_rate * 100:.1f}%" if r.false_rate is not None else "—"
        need = str(r.runs_to_catch) if r.runs_to_catch else f"> {MAX_BASELINE_RUNS}"
        if r.entity:
            need += f"   (most spread of {r.entities}: {r.entity[:40]})"
        lines.append(
            f"  {r.key:14} {units.fmt(r.mean, r.unit):>10} {fmt(r.kind, r.units(r.sd)):>8} "
            f"{fmt(r.kind, r.units(r.sd_upper)):>9} {fmt(r.kind, r.threshold, up=True):>9} "
            f"{r.catch!s:>6} {caught:>7} {false:>6}  {need}"
        )
    lines += [
        "",
        "# pyproject.toml: the prior for one run a side (sd ≤ 90% bound) and the thresholds",
        "[tool.tracekit.gate.run_noise]",
        *(f'{r.key} = "{fmt(r.kind, r.units(r.sd_upper), up=True)}"' for r in rows),
        "",
        "[tool.tracekit.gate.max_regression]",
        *(f'{r.key} = "{fmt(r.kind, r.threshold, up=True)}"' for r in rows if r.threshold),
    ]
    return "\n".join(lines) + "\n"
