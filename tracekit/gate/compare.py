"""Compare two sides — each one run or several — metric by metric: regressed /
improved / unchanged / inconclusive, and name the cause of a step-time change. A short
composition of the gate's parts:

- `read`      — the report keys each metric's figure is read from
- `judge`     — one metric's verdict against the noise (the verdict rules)
- `drilldown` — the per-rank, collective, kernel and region metrics (α shared) and their
  warnings
- `causes`    — the step-time change decomposed, its contributors, each verdict's cause
- `verdict`   — `Verdict` and `Comparison`, what the renderers read
"""

from __future__ import annotations

from statistics import fmean

from tracekit.errors import TracekitError
from tracekit.gate import metrics as M
from tracekit.gate import read as R
from tracekit.gate.baseline import Side
from tracekit.gate.causes import attach_causes, explain, unknown_levels
from tracekit.gate.drilldown import drill_down, drill_down_warnings
from tracekit.gate.judge import judge
from tracekit.gate.metrics import Threshold
from tracekit.gate.stats import ALPHA
from tracekit.gate.verdict import Comparison, Verdict
from tracekit.ingest.ranksel import ranges_text

__all__ = ["Comparison", "Verdict", "check_same_ranks", "run_compare"]


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
        b_s = R.step_series(bs_[0], src.sample) if src.sample and single else None
        n_s = R.step_series(ns_[0], src.sample) if src.sample and single else None
        b_r = R.values(bs_, lambda r, m=m: R.point(r, m))
        n_r = R.values(ns_, lambda r, m=m: R.point(r, m))
        cmp.verdicts.append(
            judge(v, b_r, n_r, b_s, n_s, alpha, noise[m.key], exact=m.exact,
                  flip=bool(m.test_from))
        )  # fmt: skip
    step_ms = fmean(R.values(bs_, lambda r: R.point(r, M.RUN_METRICS[0])) or [0.0])
    # the drill-down metrics (per rank, collective, kernel, region) share α (Bonferroni)
    cmp.verdicts += drill_down(bs_, ns_, th, noise, alpha, step_ms)
    if single and not strict:
        drill_down_warnings(cmp.verdicts, alpha, noise)
    cmp.cause, contributors = explain(bs_, ns_)
    attach_causes(cmp.verdicts, cmp.cause, contributors, bs_, ns_)
    cmp.notes += unknown_levels(bs_, ns_)
    if not single:
        cmp.notes.append(
            "each side's value is the mean over its runs of the run's figure; the cause "
            "compares those means"
        )
    return cmp


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
