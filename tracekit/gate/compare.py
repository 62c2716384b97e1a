"""Compare two sides — each one run or several — metric by metric: regressed /
improved / unchanged / inconclusive, and name the cause of a step-time change.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from tracekit.errors import TracekitError
from tracekit.gate import metrics as M
from tracekit.gate.baseline import Side
from tracekit.gate.metrics import Threshold
from tracekit.gate.stats import (
    ALPHA,
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
from tracekit.ingest.ranksel import ranges_text

VERDICTS = ("regressed", "warning", "inconclusive", "improved", "unchanged", "not compared")


@dataclass
class Verdict:
    metric: str  # e.g. "step_time", "busbw[all_reduce 201.3 MB ×4]"
    family: str  # the threshold key
    label: str
    unit: str
    worse: int
    base: float | None
    new: float | None
    threshold: Threshold
    verdict: str = "not compared"
    confidence: str = ""  # exact, high, medium, low
    evidence: str = ""
    change: float | None = None  # in the threshold's kind (relative, points or ms)
    test: TestResult | None = None
    steps_to_decide: int | None = None
    cause: str | None = None
    gated: bool = True
    run_test: RunTest | None = None
    runs_to_decide: int | None = None
    alpha: float | None = None  # the level its p-values were compared with
    steps_agree: bool = False  # one run a side: the per-step test called it, this way

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "family": self.family,
            "label": self.label,
            "unit": self.unit,
            "direction": "lower is better" if self.worse > 0 else "higher is better",
            "base": self.base,
            "new": self.new,
            "change": self.change if self.change is None or math.isfinite(self.change) else None,
            "change_unit": self.threshold.kind if self.threshold.kind != "off" else None,
            "relative_change": _rel(self.base, self.new),
            "threshold": str(self.threshold),
            "verdict": self.verdict,
            "confidence": self.confidence,
            "evidence": self.evidence,
            "test": self.test.to_dict() if self.test else None,
            "steps_to_decide": self.steps_to_decide,
            "cause": self.cause,
            "gated": self.gated,
            "run_test": self.run_test.to_dict() if self.run_test else None,
            "runs_to_decide": self.runs_to_decide,
            "alpha": self.alpha,
        }


@dataclass
class Comparison:
    base: Side
    new: Side
    thresholds: dict[str, Threshold]
    alpha: float
    fail_on: str
    verdicts: list[Verdict] = field(default_factory=list)
    cause: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    run_noise: dict[str, Threshold] = field(default_factory=dict)
    strict: bool = False

    @property
    def noise(self) -> dict[str, Any]:
        """Which run-to-run noise the verdicts were judged against."""
        runs = [self.base.runs, self.new.runs]
        if max(runs) > 1:
            return {
                "kind": "measured",
                "runs": runs,
                "text": f"run-to-run noise measured between runs ({runs[0]} base, "
                f"{runs[1]} new): Student's t over run means, the spread never below the "
                "prior ([tool.tracekit.gate.run_noise])",
            }
        shown = ", ".join(
            f"{k} {v}" for k, v in self.run_noise.items() if k in ("step_time", "exposed_comm")
        )
        return {
            "kind": "prior",
            "runs": runs,
            "prior": {k: str(v) for k, v in self.run_noise.items()},
            "text": "one run a side cannot measure run-to-run noise: the noise of the steps "
            "within each run is tested, and the prior sd per run between runs "
            f"({shown}, …; [tool.tracekit.gate.run_noise]) stands in for the rest"
            + (
                ""
                if self.strict
                else "; a drill-down metric (per rank, collective, kernel) that moved "
                "while no headline metric regressed is a warning"
            ),
        }

    @property
    def failed(self) -> list[Verdict]:
        bad = ("regressed", "inconclusive") if self.fail_on == "inconclusive" else ("regressed",)
        return [v for v in self.verdicts if v.gated and v.verdict in bad]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def counts(self) -> dict[str, int]:
        return {k: sum(v.verdict == k for v in self.verdicts) for k in VERDICTS}

    def to_dict(self) -> dict[str, Any]:
        from tracekit.version import __version__

        return {
            "schema": 1,
            "tracekit_version": __version__,
            "result": "fail" if self.failed else "pass",
            "exit_code": self.exit_code,
            "fail_on": self.fail_on,
            "alpha": self.alpha,
            "base": self.base.describe(),
            "new": self.new.describe(),
            "thresholds": {k: str(v) for k, v in self.thresholds.items()},
            "noise": self.noise,
            "strict": self.strict,
            "counts": self.counts(),
            "cause": self.cause,
            "metrics": [v.to_dict() for v in self.verdicts],
            "notes": self.notes,
        }


def _rel(base: float | None, new: float | None) -> float | None:
    if base is None or new is None:
        return None
    if base == 0:
        return 0.0 if new == 0 else None
    return (new - base) / abs(base)


# ---------------------------------------------------------------- reading the reports


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def point(report: dict, m: M.Metric) -> float | None:
    """A run metric's value: the summary's key, or the mean over ranks of its per-rank key
    (the contract makes them the same). A metric with per-step samples takes the ranks'
    mean first, so its point value and its samples measure one quantity."""
    summary = _num((report.get("summary") or {}).get(m.summary)) if m.summary else None
    ranks = None
    if m.rank_key:
        vals = [_num(r.get(m.rank_key)) for r in report.get("ranks") or []]
        vals = [x for x in vals if x is not None]
        ranks = fmean(vals) if vals else None
    if m.sample and ranks is not None:
        return ranks
    return summary if summary is not None else ranks


def _sample_ranks(report: dict) -> list[dict]:
    return (report.get("samples") or {}).get("ranks") or []


def step_series(report: dict, key: str) -> list[float]:
    """Per step, the mean over ranks of a per-rank sample (the step's run-level value)."""
    by_step: dict[int, list[float]] = {}
    for r in _sample_ranks(report):
        for s, v in zip(r.get("step") or [], r.get(key) or [], strict=False):
            if _num(v) is not None:
                by_step.setdefault(s, []).append(v)
    return [fmean(v) for _, v in sorted(by_step.items())]


def _level_means(report: dict) -> dict[str, float]:
    """Mean per rank-step of each part of the step (ms)."""
    out = {}
    for key in ("step_time_ms", "compute_ms", "exposed_comm_ms", "other_ms", "idle_ms"):
        vals = [v for r in _sample_ranks(report) for v in r.get(key) or [] if _num(v) is not None]
        if vals:
            out[key] = fmean(vals)
    return out


def _mean_sample(report: dict, key: str) -> float | None:
    vals = [v for r in _sample_ranks(report) for v in r.get(key) or [] if _num(v) is not None]
    return fmean(vals) if vals else None


def _coll_key(c: dict) -> tuple:
    return (c.get("name"), c.get("group_size"), c.get("bytes"))


def coll_label(c: dict) -> str:
    size = f" {c['bytes'] / 1e6:.3g} MB" if c.get("bytes") else ""
    group = f" ×{c['group_size']}" if c.get("group_size") else ""
    return f"{c.get('name')}{size}{group}"


def _full_series(entry: dict, key: str, steps: list[int]) -> list[float]:
    """An entity's per-step values over all the run's steps (0 where it did not run)."""
    got = dict(zip(entry.get("step") or [], entry.get(key) or [], strict=False))
    if key == "busbw_GBps":
        return [v for s in steps if _num(v := got.get(s)) is not None]
    return [float(got.get(s) or 0.0) for s in steps]


# ---------------------------------------------------------------- judging one metric


def _change(th: Threshold, base: float, new: float) -> float | None:
    if th.kind == "pct":
        return _rel(base, new) if base != 0 else (0.0 if new == 0 else math.inf)
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
        v.change = _rel(v.base, v.new)
    beyond = v.change is not None and abs(v.change) > th.value and th.kind != "off"
    worse = v.change is not None and v.change * v.worse > 0
    several = max(len(base_runs), len(new_runs)) > 1
    a_text = _alpha_text(alpha, shared)
    test = None
    if base_s and new_s and not exact and not several:
        test = compare(base_s, new_s, alpha)
        v.test = test
    if not exact:
        if several and v.family in M.DRILL_DOWN and _noise_abs(noise, v.base, v.new) > 0:
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
            + _runs_advice(v.runs_to_decide)
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
            + _runs_advice(v.runs_to_decide)
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


def _runs_advice(n: int | None) -> str:
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


# ---------------------------------------------------------------- all metrics


def _values(reports: list[dict], get: Callable[[dict], float | None]) -> list[float]:
    """Each run's figure (runs without it left out)."""
    return [x for x in (get(r) for r in reports) if x is not None]


def run_compare(
    base: Side,
    new: Side,
    thresholds: dict[str, Threshold] | None = None,
    alpha: float = ALPHA,
    fail_on: str = "regression",
    run_noise: dict[str, Threshold] | None = None,
    strict: bool = False,
) -> Comparison:
    """`strict`: with one run a side a drill-down regression fails as a headline one does
    (no warnings)."""
    check_same_ranks(base, new)
    th = M.defaults()
    th.update(thresholds or {})
    noise = M.run_noise_defaults()
    noise.update(run_noise or {})
    cmp = Comparison(base, new, th, alpha, fail_on, run_noise=noise, strict=strict)
    bs_, ns_ = base.reports, new.reports
    single = base.runs == 1 and new.runs == 1
    for side in (base, new):
        if not side.has_samples:
            cmp.notes.append(
                f"{side.path}: no per-step samples (a report from an older tracekit, or a "
                "run without ProfilerSteps): verdicts beyond a threshold are inconclusive"
                if single
                else f"{side.path}: a run without per-step samples (the cause is not "
                "decomposed into levels)"
            )
    for m in M.RUN_METRICS:
        v = Verdict(m.key, m.key, m.label, m.unit, m.worse, None, None, th[m.key])
        src = M.RUN_METRICS[0] if m.test_from == "step_time" else m
        b_s = step_series(bs_[0], src.sample) if src.sample and single else None
        n_s = step_series(ns_[0], src.sample) if src.sample and single else None
        b_r = _values(bs_, lambda r, m=m: point(r, m))
        n_r = _values(ns_, lambda r, m=m: point(r, m))
        cmp.verdicts.append(
            judge(v, b_r, n_r, b_s, n_s, alpha, noise[m.key], exact=m.exact,
                  flip=bool(m.test_from))
        )  # fmt: skip
    step_ms = fmean(_values(bs_, lambda r: point(r, M.RUN_METRICS[0])) or [0.0])
    # the drill-down metrics (per rank, collective, kernel) share α (Bonferroni), so
    # thirty of them do not give thirty chances to call noise a regression
    count = len(_drill_down(bs_, ns_, th, noise, alpha, step_ms, 1))
    cmp.verdicts += _drill_down(bs_, ns_, th, noise, alpha / max(count, 1), step_ms, count)
    if single and not strict:
        drill_down_warnings(cmp.verdicts, alpha, noise)
    cmp.cause = explain(bs_, ns_)
    _attach_causes(cmp, bs_, ns_)
    cmp.notes += unknown_levels(bs_, ns_)
    if not single:
        cmp.notes.append(
            "each side's value is the mean over its runs of the run's figure; the cause "
            "compares those means"
        )
    return cmp


def _beyond_prior(v: Verdict, alpha: float) -> bool:
    """A drill-down metric that got worse beyond its threshold and by more than its
    family's run-to-run prior sd per run, the per-step test agreeing at the comparison's
    α (not the drill-down's shared α: a warning does not fail the gate, so it needs no
    protection against thirty chances)."""
    if v.family not in M.DRILL_DOWN or not v.gated or v.change is None:
        return False
    if v.verdict == "regressed":
        return True
    rt, test = v.run_test, v.test
    if v.verdict != "inconclusive" or rt is None or test is None or v.change * v.worse <= 0:
        return False
    if test.method == "mann-whitney":
        steps = test.p_value is not None and test.p_value < alpha
    else:
        steps = v.steps_agree
    return steps and abs(v.new - v.base) > rt.sd


def drill_down_warnings(
    verdicts: list[Verdict], alpha: float, noise: dict[str, Threshold]
) -> None:
    """One run a side: a drill-down metric (per rank, collective, kernel) has run-to-run
    noise of its own, larger than the headline's — a slow run moves every op at once, and
    the steps of one run are not samples of the next — which one run a side cannot see.
    While no headline metric regressed, such a metric that moved beyond its family's
    prior is a warning that names itself (exit 0), not a failure; with several runs a
    side it is judged on the run means like the headline (measured noise), and a
    headline regression keeps its drill-down regressions (they are its cause)."""
    if any(v.gated and v.verdict == "regressed" for v in verdicts if v.family not in
           M.DRILL_DOWN):  # fmt: skip
        return
    for v in verdicts:
        if not _beyond_prior(v, alpha):
            continue
        rt, test = v.run_test, v.test
        sd = rt.sd if rt else 0.0
        v.runs_to_decide = runs_to_decide(v.new - v.base, sd, 1, v.alpha or alpha) if sd else None
        steps = (
            f"Mann–Whitney U p = {test.p_value:.2g}, {test.n_base} vs {test.n_new} steps"
            if test and test.p_value is not None
            else "the steps' bootstrap interval"
        )
        prior = f"p = {rt.p_value:.2g} against " if rt else ""
        v.verdict, v.confidence = "warning", "low"
        v.evidence = (
            f"beyond {v.threshold} and beyond its family's run-to-run prior sd; noise used: "
            f"the steps within each run ({steps}) and between runs the prior ({prior}sd "
            f"{noise[v.family]} per run), which one run a side cannot measure. No headline "
            "metric regressed: a warning, not a failure"
            + _runs_advice(v.runs_to_decide)
        )


def unknown_levels(bs: list[dict], ns: list[dict]) -> list[str]:
    """A note per level whose verdict is unknown on one side and not the other: the gate
    judges figures, never verdicts, and a level that was not measured (ok → unknown, or
    back) is neither an improvement nor a regression — its figures are null on that side
    and not compared."""
    out = []

    def verdicts(reports: list[dict], name: str) -> tuple[set[str], str | None]:
        seen, why = set(), None
        for r in reports:
            for lv in r.get("levels") or []:
                if lv.get("level") == name:
                    seen.add(lv.get("verdict") or "")
                    why = why or lv.get("verdict_reason")
        return seen, why

    names = dict.fromkeys(lv.get("level") for r in bs + ns for lv in r.get("levels") or [])
    for name in names:
        (b, b_why), (n, n_why) = verdicts(bs, name), verdicts(ns, name)
        if ("unknown" in b) == ("unknown" in n) or not b or not n:
            continue
        side, why = ("new", n_why) if "unknown" in n else ("base", b_why)
        out.append(
            f"{name}: verdict {'/'.join(sorted(b))} in base, {'/'.join(sorted(n))} in new — "
            f"unknown in {side} ({why or 'its headline figures are unknown'}): not compared, "
            "neither an improvement nor a regression"
        )
    return out


def check_same_ranks(base: Side, new: Side) -> None:
    """A report of chosen ranks (`--ranks`, `--sample-ranks`: `run.rank_selection`)
    compares only with a report of the same ranks: its summary is a mean over those
    ranks, and the gate computes no figure of its own to re-average the other side. A
    `TracekitError` (exit 2) otherwise. Reports of every rank compare as before."""
    runs = [side.report.get("run") or {} for side in (base, new)]
    if not any(r.get("rank_selection") for r in runs):
        return
    ranks = [sorted(r.get("ranks") or []) for r in runs]
    if ranks[0] == ranks[1]:
        return

    def what(r: dict, rs: list) -> str:
        sel = r.get("rank_selection")
        if sel:
            return f"ranks {ranges_text(rs)} of {sel['of']} ({sel['option']} {sel['spec']})"
        return f"all {len(rs)} ranks"

    raise TracekitError(
        f"BASE analysed {what(runs[0], ranks[0])}, NEW {what(runs[1], ranks[1])}: a report "
        "of chosen ranks compares only with one of the same ranks; pass the same --ranks / "
        "--sample-ranks for both (a run folder side takes them), or neither"
    )


def _drill_down(
    bs: list[dict],
    ns: list[dict],
    th: dict[str, Threshold],
    noise: dict[str, Threshold],
    alpha: float,
    step_ms: float,
    shared: int,
) -> list[Verdict]:
    return (
        _rank_verdicts(bs, ns, th["rank_step_time"], noise["rank_step_time"], alpha, shared)
        + _collective_verdicts(bs, ns, th, noise, alpha, step_ms, shared)
        + _kernel_verdicts(bs, ns, th["kernel_time"], noise["kernel_time"], alpha, step_ms,
                           shared)
        + _region_verdicts(bs, ns, th["region_time"], noise["region_time"], alpha, step_ms,
                           shared)
        + _region_verdicts(bs, ns, th["region_cpu_time"], noise["region_cpu_time"], alpha,
                           step_ms, shared, cpu=True)
    )  # fmt: skip


def _one(reports: list[dict]) -> dict | None:
    """The side's report when it is one run (the per-step test needs one run a side)."""
    return reports[0] if len(reports) == 1 else None


def _rank_verdicts(
    bs: list[dict], ns: list[dict], th: Threshold, noise: Threshold, alpha: float, shared: int
) -> list[Verdict]:
    out: list[Verdict] = []

    def rank_value(rep: dict, rank: Any) -> float | None:
        row = next((r for r in rep.get("ranks") or [] if r.get("rank") == rank), None)
        return _num(row.get("step_time_ms")) if row else None

    base_ranks = [r.get("rank") for r in bs[0].get("ranks") or []]
    new_ranks = {r.get("rank") for rep in ns for r in rep.get("ranks") or []}
    if len(base_ranks) < 2:
        return out
    b1, n1 = _one(bs), _one(ns)
    b_s = {r["rank"]: r.get("step_time_ms") for r in _sample_ranks(b1)} if b1 else {}
    n_s = {r["rank"]: r.get("step_time_ms") for r in _sample_ranks(n1)} if n1 else {}
    for rank in sorted(set(base_ranks) & new_ranks, key=lambda x: (x is None, x)):
        v = Verdict(
            f"rank_step_time[rank {rank}]",
            "rank_step_time",
            f"rank {rank} step time",
            "ms",
            M.HIGHER_IS_WORSE,
            None,
            None,
            th,
        )
        b_r = _values(bs, lambda rep, rank=rank: rank_value(rep, rank))
        n_r = _values(ns, lambda rep, rank=rank: rank_value(rep, rank))
        out.append(judge(v, b_r, n_r, b_s.get(rank), n_s.get(rank), alpha, noise,
                         shared=shared))  # fmt: skip
    return out


def _collectives(rep: dict) -> tuple[dict, dict, list]:
    """(the report's collectives table by key, the samples' by key, the sampled steps)."""
    sam = {_coll_key(c): c for c in (rep.get("samples") or {}).get("collectives") or []}
    table = {_coll_key(c): c for c in rep.get("collectives") or []}
    return table, sam, (rep.get("samples") or {}).get("steps") or []


def _coll_figure(rep: dict, key: tuple, rep_key: str, sam_key: str) -> float | None:
    """A collective's figure in one run: the report's; the samples' mean only for a
    collective the report's table left out (a baseline keeps the top 20) — never in
    place of a null: where the report cannot know a figure, the gate does not judge it."""
    table, sam, steps = _collectives(rep)
    if key in table:
        return _num(table[key].get(rep_key))
    if key in sam:
        series = _full_series(sam[key], sam_key, steps)
        return fmean(series) if series else None
    return None


def _collective_verdicts(
    bs: list[dict],
    ns: list[dict],
    th: dict[str, Threshold],
    noise: dict[str, Threshold],
    alpha: float,
    step_ms: float,
    shared: int,
) -> list[Verdict]:
    out = []
    keys: dict[tuple, None] = {}  # in order, once each
    for rep in bs:
        table, sam, _ = _collectives(rep)
        keys.update(dict.fromkeys([*table, *sam]))
    in_new = {k for rep in ns for part in _collectives(rep)[:2] for k in part}
    b1, n1 = _one(bs), _one(ns)
    for key in [k for k in keys if k in in_new]:
        label = coll_label(dict(zip(("name", "group_size", "bytes"), key, strict=True)))
        for fam, rep_key, sam_key in (
            ("collective_time", "time_ms_per_step", "time_ms"),
            ("busbw", "busbw_GBps", "busbw_GBps"),
        ):
            f = M.FAMILIES[fam]
            b_r = _values(bs, lambda r, key=key, a=rep_key, b=sam_key: _coll_figure(r, key, a, b))
            n_r = _values(ns, lambda r, key=key, a=rep_key, b=sam_key: _coll_figure(r, key, a, b))
            b_s = n_s = None
            if b1 is not None and n1 is not None:
                (_, bsam, bsteps), (_, nsam, nsteps) = _collectives(b1), _collectives(n1)
                b_s = _full_series(bsam[key], sam_key, bsteps) if key in bsam else None
                n_s = _full_series(nsam[key], sam_key, nsteps) if key in nsam else None
            # a bandwidth matters when the collective's time does
            t_b = _values(bs, lambda r, key=key: _coll_figure(r, key, "time_ms_per_step",
                                                              "time_ms"))  # fmt: skip
            t_n = _values(ns, lambda r, key=key: _coll_figure(r, key, "time_ms_per_step",
                                                              "time_ms"))  # fmt: skip
            moved = abs(fmean(t_n or [0.0]) - fmean(t_b or [0.0]))
            material = not step_ms or moved >= M.MATERIAL_SHARE * step_ms
            v = Verdict(
                f"{fam}[{label}]", fam, f"{label} {f.label}", f.unit, f.worse, None, None,
                th[fam],
            )  # fmt: skip
            out.append(judge(v, b_r, n_r, b_s, n_s, alpha, noise[fam], material=material,
                             shared=shared))  # fmt: skip
    return out


def _kernel_figure(rep: dict, name: str) -> float | None:
    k = next((k for k in (rep.get("samples") or {}).get("kernels") or [] if k["name"] == name),
             None)  # fmt: skip
    if k is None:
        return None
    return fmean(_full_series(k, "time_ms", (rep.get("samples") or {}).get("steps") or []) or [0])


def _kernel_verdicts(
    bs: list[dict],
    ns: list[dict],
    th: Threshold,
    noise: Threshold,
    alpha: float,
    step_ms: float,
    shared: int,
) -> list[Verdict]:
    out = []
    names: dict[str, None] = {}  # in order, once each
    for rep in bs:
        names.update(dict.fromkeys(k["name"] for k in (rep.get("samples") or {}).get(
            "kernels") or []))  # fmt: skip
    in_new = {k["name"] for rep in ns for k in (rep.get("samples") or {}).get("kernels") or []}
    b1, n1 = _one(bs), _one(ns)
    for name in [k for k in names if k in in_new]:
        b_r = _values(bs, lambda r, name=name: _kernel_figure(r, name))
        n_r = _values(ns, lambda r, name=name: _kernel_figure(r, name))
        b_s = n_s = None
        if b1 is not None and n1 is not None:
            bk = {k["name"]: k for k in (b1.get("samples") or {}).get("kernels") or []}
            nk = {k["name"]: k for k in (n1.get("samples") or {}).get("kernels") or []}
            b_s = _full_series(bk[name], "time_ms", (b1.get("samples") or {}).get("steps") or [])
            n_s = _full_series(nk[name], "time_ms", (n1.get("samples") or {}).get("steps") or [])
        material = not step_ms or abs(fmean(n_r) - fmean(b_r)) >= M.MATERIAL_SHARE * step_ms
        short = name if len(name) <= 60 else name[:57] + "…"
        v = Verdict(
            f"kernel_time[{short}]", "kernel_time", f"{short} time", "ms",
            M.HIGHER_IS_WORSE, None, None, th,
        )  # fmt: skip
        out.append(judge(v, b_r, n_r, b_s, n_s, alpha, noise, material=material,
                         shared=shared))  # fmt: skip
    return out


def _region_samples(rep: dict) -> dict[tuple, dict]:
    """samples.regions by (kind, path)."""
    return {
        (g.get("kind"), tuple(g.get("path") or [])): g
        for g in (rep.get("samples") or {}).get("regions") or []
    }


def _region_series(rep: dict | None, key: tuple, cpu: bool = False) -> list[float] | None:
    """A region's time per step over all the run's steps: its device time, its CPU time
    where the run has no device time (a CPU run); None where the samples lack it. `cpu`:
    its CPU time on a GPU run (region_cpu_time), None on a CPU run (its region_time is
    already the CPU time)."""
    g = _region_samples(rep).get(key) if rep is not None else None
    if g is None:
        return None
    on_device = any(_num(x) is not None for x in g.get("device_ms") or [])
    if cpu and not on_device:
        return None
    col = "device_ms" if on_device and not cpu else "cpu_ms"
    return _full_series(g, col, (rep.get("samples") or {}).get("steps") or [])


def region_label(key: tuple) -> str:
    """A region's name in a metric: its own name first (a table cuts long names at the
    end), then the regions it is in, innermost first: `layers.2 in DDP.forward`."""
    *up, leaf = key[1] or [""]
    text = leaf + (" in " + " / ".join(reversed(up)) if up else "")
    return text if len(text) <= 60 else text[:59] + "…"


def _region_verdicts(
    bs: list[dict],
    ns: list[dict],
    th: Threshold,
    noise: Threshold,
    alpha: float,
    step_ms: float,
    shared: int,
    cpu: bool = False,
) -> list[Verdict]:
    """Per region of the samples (the report's top regions, `samples.regions`): its time
    per step, one metric each, judged as a kernel's. `cpu`: its CPU time on a GPU run
    (`region_cpu_time`; on a CPU run region_time is already CPU time)."""
    out = []
    keys: dict[tuple, None] = {}  # in order, once each
    for rep in bs:
        keys.update(dict.fromkeys(_region_samples(rep)))
    in_new = {k for rep in ns for k in _region_samples(rep)}
    b1, n1 = _one(bs), _one(ns)

    def figure(rep: dict, key: tuple) -> float | None:
        s = _region_series(rep, key, cpu)
        return fmean(s) if s else None

    family = "region_cpu_time" if cpu else "region_time"
    for key in [k for k in keys if k in in_new]:
        b_r = _values(bs, lambda r, key=key: figure(r, key))
        n_r = _values(ns, lambda r, key=key: figure(r, key))
        if cpu and not (b_r and n_r):
            continue  # CPU runs: region_time holds the CPU time
        b_s = _region_series(b1, key, cpu) if b1 is not None and n1 is not None else None
        n_s = _region_series(n1, key, cpu) if b1 is not None and n1 is not None else None
        material = not step_ms or abs(fmean(n_r or [0.0]) - fmean(b_r or [0.0])) >= (
            M.MATERIAL_SHARE * step_ms
        )
        label = region_label(key)
        what = "CPU time" if cpu else "time"
        v = Verdict(
            f"{family}[{label}]", family, f"region {label} {what}", "ms",
            M.HIGHER_IS_WORSE, None, None, th,
        )  # fmt: skip
        out.append(judge(v, b_r, n_r, b_s, n_s, alpha, noise, material=material,
                         shared=shared))  # fmt: skip
    return out


# ---------------------------------------------------------------- naming the cause

LEVELS = (
    ("compute_ms", "compute"),
    ("exposed_comm_ms", "exposed communication"),
    ("other_ms", "memcpy/memset"),
    ("idle_ms", "idle"),
)


def _ranks_text(ranks: list) -> str:
    ranks = sorted(r for r in ranks if r is not None)
    if not ranks:
        return ""
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}–{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _avg(reports: list[dict], get: Callable[[dict], float | None]) -> float | None:
    """The mean over a side's runs of one run's figure (None where no run has it)."""
    vals = _values(reports, get)
    return fmean(vals) if vals else None


def explain(bs: list[dict], ns: list[dict]) -> dict[str, Any]:
    """Decompose the step-time change into levels and name the top contributors (each
    side's figures: the mean over its runs of the run's report figure)."""
    step = M.RUN_METRICS[0]
    levels_b = [_level_means(r) for r in bs]
    levels_n = [_level_means(r) for r in ns]
    lb = {k: fmean(x[k] for x in levels_b) for k in levels_b[0] if all(k in x for x in levels_b)}
    ln = {k: fmean(x[k] for x in levels_n) for k in levels_n[0] if all(k in x for x in levels_n)}
    out: dict[str, Any] = {"levels": {}, "contributors": [], "text": None}
    if "step_time_ms" not in lb or "step_time_ms" not in ln:
        b_st = _avg(bs, lambda r: point(r, step))
        n_st = _avg(ns, lambda r: point(r, step))
        if b_st is not None and n_st is not None:
            out["step_ms_change"] = n_st - b_st
            out["text"] = f"step {n_st - b_st:+.2f} ms (no per-step samples to decompose it)"
        return out
    d_step = ln["step_time_ms"] - lb["step_time_ms"]
    out["step_ms_change"] = d_step
    out["step_ms"] = [lb["step_time_ms"], ln["step_time_ms"]]
    levels = {}
    for key, name in LEVELS:
        levels[name] = ln.get(key, 0.0) - lb.get(key, 0.0)
    # host-bound gaps are part of idle
    hb = [_avg(x, lambda r: _mean_sample(r, "host_bound_ms")) for x in (bs, ns)]
    if None not in hb:
        levels["idle"] -= hb[1] - hb[0]
        levels["host-bound"] = hb[1] - hb[0]
    bubble = next(m for m in M.RUN_METRICS if m.key == "bubble")
    bub = [_avg(x, lambda r: point(r, bubble)) for x in (bs, ns)]
    if None not in bub:  # a pipeline: idle and exposed send/recv are the bubble
        levels["bubble (idle + exposed send/recv)"] = levels.pop("idle") + levels.pop(
            "exposed communication"
        )
    out["levels"] = levels
    contributors = _collective_contributors(bs, ns) + _kernel_contributors(bs, ns)
    contributors += _rank_contributors(bs, ns)
    if None not in bub:
        contributors.append(
            {
                "kind": "bubble",
                "name": "pipeline bubble",
                "delta_ms": levels["bubble (idle + exposed send/recv)"],
                "text": f"pipeline bubble {bub[0] * 100:.1f}% → {bub[1] * 100:.1f}% of the step",
            }
        )
    floor = max(0.005 * lb["step_time_ms"], 0.1 * abs(d_step))  # what is worth naming
    contributors = [c for c in contributors if abs(c["delta_ms"]) >= floor]
    # a new straggler is the root of the waiting it causes: name it first
    contributors.sort(key=lambda c: (not c.get("straggler"), -abs(c["delta_ms"])))
    out["contributors"] = contributors[:6]
    parts = sorted(levels.items(), key=lambda kv: -abs(kv[1]))
    shown = [f"{k} {v:+.2f} ms" for k, v in parts if abs(v) >= max(0.05 * abs(d_step), 1e-3)]
    pct = d_step / lb["step_time_ms"] * 100 if lb["step_time_ms"] else 0.0
    text = f"step {d_step:+.2f} ms ({pct:+.1f}%)"
    if shown:
        text += ": " + ", ".join(shown[:3])
    top = [c for c in contributors if (c["delta_ms"] > 0) == (d_step > 0)][:2]
    if top:
        text += "; " + "; ".join(c["text"] for c in top)
    out["text"] = text
    return out


def _collective_contributors(bs: list[dict], ns: list[dict]) -> list[dict]:
    """A collective's exposed time, time and bus bandwidth: the report's figures (the
    table's `exposed_ms`, `time_ms_per_step`, `busbw_GBps` — the numbers the verdicts
    show), per rank the samples' exposure by rank."""
    keys: dict[tuple, None] = {}  # in order, once each
    for rep in ns:
        keys.update(dict.fromkeys(_coll_key(c) for c in (rep.get("samples") or {}).get(
            "collectives") or []))  # fmt: skip
    in_base = {k for rep in bs for k in _collectives(rep)[1]}
    out = []
    for key in [k for k in keys if k in in_base]:
        label = coll_label(dict(zip(("name", "group_size", "bytes"), key, strict=True)))

        def fig(side: list[dict], a: str, b: str, key: tuple = key) -> float:
            return _avg(side, lambda rep: _coll_figure(rep, key, a, b)) or 0.0

        exp_b, exp_n = fig(bs, "exposed_ms", "exposed_ms"), fig(ns, "exposed_ms", "exposed_ms")
        t_b, t_n = fig(bs, "time_ms_per_step", "time_ms"), fig(ns, "time_ms_per_step", "time_ms")
        d_exp, d_time = exp_n - exp_b, t_n - t_b

        def by_rank(side: list[dict], key: tuple = key) -> dict:
            acc: dict[Any, list[float]] = {}
            for rep in side:
                c = _collectives(rep)[1].get(key) or {}
                for r, x in zip(c.get("ranks") or [], c.get("exposed_ms_by_rank") or [],
                                strict=False):  # fmt: skip
                    acc.setdefault(r, []).append(x)
            return {r: fmean(x) for r, x in acc.items()}

        br, nr = by_rank(bs), by_rank(ns)
        per_rank = {r: nr[r] - br.get(r, 0.0) for r in nr}
        top = max((abs(x) for x in per_rank.values()), default=0)
        ranks = [r for r, x in per_rank.items() if top and abs(x) >= 0.5 * top]
        ob = 1 - exp_b / t_b if t_b else None
        on = 1 - exp_n / t_n if t_n else None
        if d_exp:
            ov = (
                f" (overlap {'lost' if on < ob else 'gained'}: {ob * 100:.0f}% → {on * 100:.0f}%)"
                if ob is not None and on is not None and abs(on - ob) >= 0.05
                else ""
            )
            out.append(
                {
                    "kind": "collective",
                    "name": label,
                    "delta_ms": d_exp,
                    "ranks": sorted(ranks),
                    "overlap": [ob, on],
                    "text": f"exposed {label} {d_exp:+.2f} ms/step on {_ranks_text(ranks)}{ov}",
                }
            )
        if d_time:
            bw = [_avg(x, lambda rep, key=key: _coll_figure(rep, key, "busbw_GBps",
                                                            "busbw_GBps"))
                  for x in (bs, ns)]  # fmt: skip
            bwt = ""
            if all(bw) and abs(bw[1] - bw[0]) <= 0.05 * bw[0] and d_time > 0:
                bwt = f", bus bandwidth unchanged ({bw[1]:.3g} GB/s): waiting for a late rank"
            elif all(bw):
                bwt = f", bus bandwidth {bw[0]:.3g} → {bw[1]:.3g} GB/s"
            out.append(
                {
                    "kind": "collective_time",
                    "name": label,
                    "delta_ms": d_time,
                    "busbw_GBps": bw,
                    "text": f"{label} {d_time:+.2f} ms/step{bwt}",
                }
            )
    return out


def _kernel_contributors(bs: list[dict], ns: list[dict]) -> list[dict]:
    names: set[str] = set()
    for rep in bs + ns:
        names |= {k["name"] for k in (rep.get("samples") or {}).get("kernels") or []}
    out = []
    for name in names:
        bv = fmean(_kernel_figure(r, name) or 0.0 for r in bs)
        nv = fmean(_kernel_figure(r, name) or 0.0 for r in ns)
        short = name if len(name) <= 60 else name[:57] + "…"
        rel = f" ({(nv - bv) / bv * 100:+.0f}%)" if bv else " (new)"
        out.append(
            {
                "kind": "kernel",
                "name": name,
                "delta_ms": nv - bv,
                "text": f"{short} {nv - bv:+.2f} ms/step{rel}",
            }
        )
    # nested CPU ops repeat their children's time: keep the largest few
    out.sort(key=lambda c: -abs(c["delta_ms"]))
    return out[:3]


def _compute_by_rank(side: list[dict]) -> dict:
    acc: dict[Any, list[float]] = {}
    for rep in side:
        for r in _sample_ranks(rep):
            acc.setdefault(r["rank"], []).append(fmean(r.get("compute_ms") or [0]))
    return {r: fmean(x) for r, x in acc.items() if len(x) == len(side)}


def _stragglers(side: list[dict]) -> list[set]:
    return [set((r.get("summary") or {}).get("straggler_ranks") or []) for r in side]


def _rank_contributors(bs: list[dict], ns: list[dict]) -> list[dict]:
    """A rank whose compute grew much more than the others' (a new straggler: one every
    new run flags and no base run does)."""
    out = []
    bc, nc = _compute_by_rank(bs), _compute_by_rank(ns)
    common = sorted(set(bc) & set(nc))
    if len(common) < 2:
        return out
    d = {r: nc[r] - bc[r] for r in common}
    worst = max(common, key=lambda r: d[r])
    rest = sorted(d[r] for r in common if r != worst)
    med = rest[len(rest) // 2]
    new_strag = set.intersection(*_stragglers(ns)) - set.union(*_stragglers(bs))
    if d[worst] - med > 0.02 * (bc[worst] or 1) and (d[worst] > 2 * max(med, 0) or new_strag):
        strag = " (a new straggler)" if worst in new_strag else ""
        out.append(
            {
                "kind": "rank",
                "name": f"rank {worst}",
                "delta_ms": d[worst] - med,
                "straggler": bool(strag),
                "text": f"rank {worst} computes {d[worst]:+.2f} ms/step, the others "
                f"{med:+.2f} ms{strag}",
            }
        )
    return out


def _attach_causes(cmp: Comparison, bs: list[dict], ns: list[dict]) -> None:
    cause = cmp.cause
    contributors = cause.get("contributors") or []

    def first(kind: str) -> str | None:
        return next((c["text"] for c in contributors if c["kind"] == kind), None)

    for v in cmp.verdicts:
        if v.verdict not in ("regressed", "improved", "inconclusive"):
            continue
        if v.family in ("step_time", "mfu", "hfu"):
            v.cause = cause.get("text")
        elif v.family == "exposed_comm":
            v.cause = first("collective") or cause.get("text")
        elif v.family in ("idle", "host_bound", "comm_wait"):
            v.cause = first("rank") or cause.get("text")
        elif v.family == "bubble":
            v.cause = " ; ".join(x for x in (first("bubble"), first("rank")) if x) or None
        elif v.family == "peak_memory":
            v.cause = _memory_cause(bs, ns)
        elif v.family in ("collective_time", "busbw"):
            name = v.metric.split("[", 1)[1].rstrip("]")
            v.cause = next(
                (c["text"] for c in contributors if c.get("name") == name),
                None,
            )
        elif v.family == "rank_step_time":
            v.cause = first("rank")
        elif v.family == "kernel_time":
            v.cause = next(
                (c["text"] for c in contributors if c["kind"] == "kernel" and
                 v.metric.startswith(f"kernel_time[{c['name'][:57]}")),
                None,
            )  # fmt: skip


def _memory_cause(bs: list[dict], ns: list[dict]) -> str | None:
    def peaks(side: list[dict]) -> dict:
        acc: dict[Any, list[float]] = {}
        for rep in side:
            for r in rep.get("ranks") or []:
                if _num(r.get("peak_reserved_bytes")) is not None:
                    acc.setdefault(r.get("rank"), []).append(r["peak_reserved_bytes"])
        return {r: fmean(x) for r, x in acc.items()}

    pb, pn = peaks(bs), peaks(ns)
    common = [r for r in pn if r in pb]
    if not common:
        return None
    r = max(common, key=lambda x: pn[x] - pb[x])
    return (
        f"peak reserved on rank {r}: {pb[r] / 1e9:.2f} → {pn[r] / 1e9:.2f} GB "
        f"({(pn[r] - pb[r]) / 1e9:+.2f} GB)"
    )
