"""Judging one metric: regressed / improved / unchanged / inconclusive, with the
evidence (the noise it was judged against, the test, the α).

Verdict rules (per metric, change = new − base in the threshold's unit; a side's value
is the mean over its runs of each run's report figure):

- within the threshold → **unchanged**;
- beyond it, on a figure without step-to-step noise (peak memory) → **regressed** or
  **improved**, exact;
- beyond it, with several runs on a side: the spread between runs is measured and the
  change must stand out of it (Student's t over run means, p < α;
  `tracekit.gate.stats.between_runs` says why this test) → **regressed** or
  **improved**; else **inconclusive**, with the baseline runs that would decide;
- beyond it, with one run a side: the spread between runs cannot be seen, so a stated
  prior for it (`[tool.tracekit.gate.run_noise]`, `metrics.run_noise_defaults`) must be
  exceeded (normal p < α) — else **inconclusive — run the baseline N times** — and the
  per-step samples must agree (Mann–Whitney U p < α, or with few steps a 1 − α
  bootstrap interval of the difference that excludes zero, in the same direction) →
  **regressed** or **improved**; else **inconclusive** (too few steps, too much spread,
  or a report without samples), with the steps per run that would decide.

Each verdict's evidence names the noise it was judged against and the α its p-value
was compared with (the drill-down metrics share α: Bonferroni). A collective's or
kernel's change counts only when it is at least 1% of the base step. Everything is
read from the reports; the gate computes no figure of its own.
"""

from __future__ import annotations

import math
from statistics import fmean

from tracekit.gate import metrics as M
from tracekit.gate.metrics import Threshold
from tracekit.gate.stats import (
    MAX_RUNS,
    RunTest,
    TestResult,
    against_prior,
    between_runs,
    compare,
    moderated,
    runs_to_decide,
    steps_to_decide,
)
from tracekit.gate.verdict import Verdict, rel


def _change(th: Threshold, base: float, new: float) -> float | None:
    if th.kind == "pct":
        return rel(base, new) if base != 0 else (0.0 if new == 0 else math.inf)
    if th.kind == "pt":
        return new - base
    return new - base  # ms, or off (relative shown anyway)


def _fmt_change(th: Threshold, ch: float | None) -> str:
    if ch is None:
        return "—"
    if math.isinf(ch):
        return "new"
    if th.kind in ("pct", "off"):
        return f"{ch * 100:+.1f}%"
    if th.kind == "pt":
        return f"{ch * 100:+.1f}pt"
    return f"{ch:+.2f}ms"


def _alpha_text(alpha: float, shared: int) -> str:
    text = f"α = {alpha:.2g}"
    return text + (f" (0.05-level shared by {shared} drill-down metrics)" if shared > 1 else "")


def _noise_abs(noise: Threshold | None, base: float, new: float) -> float:
    """A run-noise prior in the figure's own units (0: none). A relative prior is of
    the mean of the two values, so that swapping base and new gives the same p (of the
    base alone, a base run that happened to be fast would make any new run look slow)."""
    if noise is None or noise.kind == "off":
        return 0.0
    return noise.value * (abs(base) + abs(new)) / 2 if noise.kind == "pct" else noise.value


def _in_units(v: Verdict, x: float) -> float:
    """An absolute difference in the threshold's unit."""
    if v.threshold.kind in ("pct", "off") and v.base:
        return x / abs(v.base)
    return x


def judge(
    v: Verdict,
    base_runs: list[float],
    new_runs: list[float],
    base_s: list[float] | None,
    new_s: list[float] | None,
    alpha: float,
    noise: Threshold | None = None,
    exact: bool = False,
    flip: bool = False,
    material: bool = True,
    shared: int = 1,
) -> Verdict:
    """Fill in v's verdict from each side's per-run values and, with one run a side,
    its per-step samples and the run-noise prior `noise`.

    `flip`: the samples move opposite to the metric (MFU vs step time). `shared`: the
    number of metrics α was divided among (shown in the evidence)."""
    th = v.threshold
    v.gated = th.kind != "off"
    v.alpha = alpha
    if not base_runs or not new_runs:
        missing = "base" if not base_runs else "new"
        v.verdict, v.evidence, v.gated = "not compared", f"not in the {missing} report", False
        return v
    v.base, v.new = fmean(base_runs), fmean(new_runs)
    v.change = _change(th, v.base, v.new)
    if th.kind == "off":
        v.change = rel(v.base, v.new)
    beyond = v.change is not None and abs(v.change) > th.value and th.kind != "off"
    worse = v.change is not None and v.change * v.worse > 0
    several = max(len(base_runs), len(new_runs)) > 1
    a_text = _alpha_text(alpha, shared)
    test = None
    if base_s and new_s and not exact and not several:
        test = compare(base_s, new_s, alpha)
        v.test = test
    if not exact:
        if several and v.drill_down and _noise_abs(noise, v.base, v.new) > 0:
            # the family's prior is its noisiest entity's: moderate, not floor (stats)
            prior_df = M.PRIORS[v.family].runs - 1 if v.family in M.PRIORS else 1
            v.run_test = moderated(
                base_runs, new_runs, alpha, _noise_abs(noise, v.base, v.new), prior_df
            )
        elif several:
            floor = _noise_abs(noise, v.base, v.new)
            v.run_test = between_runs(base_runs, new_runs, alpha, floor)
        elif _noise_abs(noise, v.base, v.new) > 0:
            sd = _noise_abs(noise, v.base, v.new)
            v.run_test = against_prior(v.base, v.new, sd, alpha)
    rt = v.run_test
    n = f"{test.n_base} vs {test.n_new} steps" if test else ""
    if th.kind == "off":
        v.verdict, v.confidence, v.evidence = "unchanged", "", "not gated (threshold off)"
        return v
    if not beyond or not material:
        v.verdict = "unchanged"
        if not material:
            v.confidence, v.evidence = "high", "below 1% of the step"
        elif exact:
            v.confidence, v.evidence = "exact", f"within {th}"
        elif several:
            lo, hi = (_in_units(v, x) for x in rt.ci)
            tight = max(abs(lo), abs(hi)) <= th.value
            v.confidence = "high" if tight else "low"
            v.evidence = (
                f"within {th}; {(1 - alpha) * 100:.3g}% interval over runs "
                f"{_fmt_change(th, lo)}…{_fmt_change(th, hi)} ({_runs_noise(rt, v)})"
            )
        elif test and test.ci is not None:
            lo, hi = _ci_in_threshold_units(v, test, fmean(base_s), flip)
            tight = max(abs(lo), abs(hi)) <= th.value
            v.confidence = "high" if tight else "low"
            v.evidence = (
                f"within {th}; {(1 - alpha) * 100:.3g}% interval "
                f"{_fmt_change(th, lo)}…{_fmt_change(th, hi)}"
            )
            if not tight:
                v.evidence += " (noisy)"
        else:
            v.confidence = "low"
            v.evidence = f"within {th}; point values only"
        return v
    direction = "regressed" if worse else "improved"
    if exact:
        v.verdict, v.confidence, v.evidence = direction, "exact", "a figure without step noise"
        return v
    if several:
        if rt.p_value < alpha:
            v.verdict = direction
            v.confidence = "high" if rt.p_value < alpha / 10 else "medium"
            v.evidence = f"{_method(rt)} p = {rt.p_value:.2g} < {a_text}; " + (
                _runs_noise(rt, v)
            )
            return v
        v.verdict, v.confidence = "inconclusive", "low"
        v.runs_to_decide = runs_to_decide(v.new - v.base, rt.sd, len(new_runs), alpha)
        v.evidence = (
            f"beyond {th}, but inside the run-to-run noise ({_method(rt)} "
            f"p = {rt.p_value:.2g} ≥ {a_text}; {_runs_noise(rt, v)})"
            + runs_advice(v.runs_to_decide)
        )
        return v
    prior = (
        f"; beyond the run-to-run prior (sd {noise} per run: p = {rt.p_value:.2g})" if rt else ""
    )
    if test is None or test.method == "none":
        v.verdict, v.confidence = "inconclusive", "low"
        v.evidence = (
            f"beyond {th} on point values, but "
            + ("there are no per-step samples of it" if test is None else f"only {n}")
            + " to test it"
        )
        v.steps_to_decide = 5 if test is None else max(5, test.n_base + 1, test.n_new + 1)
        return v
    moved_up = (fmean(new_s) - fmean(base_s)) > 0
    agrees = test.significant and (moved_up != flip) == (v.change > 0)
    v.steps_agree = agrees
    if agrees and rt is not None and rt.p_value >= alpha:
        # the steps agree, but one run a side cannot see the noise between runs
        v.verdict, v.confidence = "inconclusive", "low"
        v.runs_to_decide = runs_to_decide(v.new - v.base, rt.sd, 1, alpha)
        v.evidence = (
            f"beyond {th} and the steps agree, but inside the noise between runs, which one "
            f"run a side cannot measure (prior sd {noise} per run: p = {rt.p_value:.2g} ≥ "
            f"{a_text})"
            + runs_advice(v.runs_to_decide)
        )
        return v
    if agrees:
        used = "; noise used: the steps within each run" + (
            ", and between runs the prior" if rt else " (no prior between runs)"
        )
        v.verdict = direction
        if test.method == "mann-whitney":
            v.confidence = "high" if test.p_value < alpha / 10 else "medium"
            v.evidence = f"Mann–Whitney U p = {test.p_value:.2g} < {a_text}, {n}{prior}{used}"
        else:
            v.confidence = "medium"
            v.evidence = (
                f"bootstrap {(1 - alpha) * 100:.3g}% interval excludes 0, {n}{prior}{used}"
            )
        return v
    v.verdict, v.confidence = "inconclusive", "low"
    v.steps_to_decide = steps_to_decide(base_s, new_s, alpha)
    why = (
        f"Mann–Whitney U p = {test.p_value:.2g} ≥ {a_text}"
        if test.p_value is not None
        else f"the {(1 - alpha) * 100:.3g}% bootstrap interval includes 0"
    )
    v.evidence = (
        f"beyond {th}, but the steps do not agree ({why}, {n}; noise: the steps within "
        "each run)"
    )
    if v.steps_to_decide and v.steps_to_decide > 1000:
        v.evidence += "; more than 1000 steps per run would be needed to decide it"
    elif v.steps_to_decide:
        v.evidence += f"; ≈{v.steps_to_decide} steps per run would decide it"
    return v


def _method(rt: RunTest) -> str:
    return "Student's t over run means" if rt.method == "student-t over runs" else (
        "moderated t over run means")  # fmt: skip


def _runs_noise(rt: RunTest, v: Verdict) -> str:
    """The measured noise, named: its sd per run in the threshold's unit and the runs."""
    sd = _in_units(v, rt.sd)
    kind = v.threshold.kind
    sd_text = (
        f"{sd * 100:.2g}%" if kind in ("pct", "off") else
        f"{sd * 100:.2g}pt" if kind == "pt" else f"{sd:.3g} ms"
    )  # fmt: skip
    runs = f"{rt.n_base} base + {rt.n_new} new runs"
    if rt.floored:
        return f"noise between runs: sd {sd_text}, the prior, above the spread of {runs}"
    if rt.method == "moderated t over runs":
        return (
            f"noise between runs: sd {sd_text}, the spread of {runs} moderated towards "
            f"the family's prior (df {rt.df:g})"
        )
    return f"noise between runs: sd {sd_text} measured over {runs}"


def runs_advice(n: int | None) -> str:
    if n is None:
        return f"; more than {MAX_RUNS} baseline runs would be needed to decide it"
    return (
        f" — run the baseline {n} times "
        f"(`tracekit baseline save RUN… -o base.json`) to decide it"
    )


def _ci_in_threshold_units(
    v: Verdict, test: TestResult, base_mean: float, flip: bool
) -> tuple[float, float]:
    """The samples' interval in the threshold's unit (relative to the samples' own base
    mean for a % threshold; a borrowed test moves opposite to the metric)."""
    lo, hi = test.ci
    if v.threshold.kind == "pct" and base_mean:
        lo, hi = lo / abs(base_mean), hi / abs(base_mean)
    return (-hi, -lo) if flip else (lo, hi)
