"""The drill-down metrics: one per rank (its step time), per collective (its time and
bus bandwidth), per kernel and per region (its time per step, and its CPU time on a GPU
run). They share α (Bonferroni), so thirty of them do not give thirty chances to call
noise a regression: each side's entities are listed first, then each metric is judged
once at α divided among them. With one run a side, `drill_down_warnings` turns those
that moved beyond their family's prior into warnings while no headline metric
regressed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from tracekit.gate import metrics as M
from tracekit.gate import read as R
from tracekit.gate.judge import judge, runs_advice
from tracekit.gate.metrics import Threshold
from tracekit.gate.stats import runs_to_decide
from tracekit.gate.verdict import Verdict


@dataclass
class Case:
    """One drill-down metric before it is judged: its verdict to fill in, each side's
    per-run values and, one run a side, per-step samples."""

    verdict: Verdict
    base_runs: list[float]
    new_runs: list[float]
    base_steps: list[float] | None
    new_steps: list[float] | None
    noise: Threshold
    material: bool = True


def drill_down(
    bs: list[dict],
    ns: list[dict],
    th: dict[str, Threshold],
    noise: dict[str, Threshold],
    alpha: float,
    step_ms: float,
) -> list[Verdict]:
    """Every drill-down metric of the two sides, judged once at α shared among them."""
    cases = (
        _rank_cases(bs, ns, th["rank_step_time"], noise["rank_step_time"])
        + _collective_cases(bs, ns, th, noise, step_ms)
        + _kernel_cases(bs, ns, th["kernel_time"], noise["kernel_time"], step_ms)
        + _region_cases(bs, ns, th["region_time"], noise["region_time"], step_ms)
        + _region_cases(bs, ns, th["region_cpu_time"], noise["region_cpu_time"], step_ms,
                        cpu=True)
    )  # fmt: skip
    shared = len(cases)
    return [
        judge(c.verdict, c.base_runs, c.new_runs, c.base_steps, c.new_steps,
              alpha / max(shared, 1), c.noise, material=c.material, shared=shared)
        for c in cases
    ]  # fmt: skip


def _one(reports: list[dict]) -> dict | None:
    """The side's report when it is one run (the per-step test needs one run a side)."""
    return reports[0] if len(reports) == 1 else None


def _material(b_r: list[float], n_r: list[float], step_ms: float) -> bool:
    """A change matters when it is at least `MATERIAL_SHARE` of the base step."""
    moved = abs(fmean(n_r or [0.0]) - fmean(b_r or [0.0]))
    return not step_ms or moved >= M.MATERIAL_SHARE * step_ms


def _common(bs: list[dict], ns: list[dict], entities: Callable[[dict], Iterable]) -> list:
    """The base side's entities (in order, once each) that the new side has too."""
    keys: dict[Any, None] = {}
    for rep in bs:
        keys.update(dict.fromkeys(entities(rep)))
    in_new = {k for rep in ns for k in entities(rep)}
    return [k for k in keys if k in in_new]


def _case(
    bs: list[dict],
    ns: list[dict],
    v: Verdict,
    noise: Threshold,
    figure: Callable[[dict], float | None],
    series: Callable[[dict], list[float] | None],
) -> Case:
    """One entity's case: each run's figure and, one run a side, its per-step samples."""
    b1, n1 = _one(bs), _one(ns)
    both = b1 is not None and n1 is not None
    return Case(v, R.values(bs, figure), R.values(ns, figure),
                series(b1) if both else None, series(n1) if both else None, noise)  # fmt: skip


def _rank_cases(bs: list[dict], ns: list[dict], th: Threshold, noise: Threshold) -> list[Case]:
    if len(bs[0].get("ranks") or []) < 2:
        return []
    out = []
    ranks = _common(bs[:1], ns, lambda rep: [r.get("rank") for r in rep.get("ranks") or []])
    for rank in sorted(ranks, key=lambda x: (x is None, x)):
        v = Verdict(
            f"rank_step_time[rank {rank}]", "rank_step_time", f"rank {rank} step time", "ms",
            M.HIGHER_IS_WORSE, None, None, th, entity=rank,
        )  # fmt: skip
        out.append(_case(bs, ns, v, noise, lambda rep, rank=rank: R.rank_step(rep, rank),
                         lambda rep, rank=rank: R.rank_step_samples(rep).get(rank)))  # fmt: skip
    return out


def _collective_cases(
    bs: list[dict], ns: list[dict], th: dict[str, Threshold], noise: dict[str, Threshold],
    step_ms: float,
) -> list[Case]:  # fmt: skip
    out = []
    for key in _common(bs, ns, lambda rep: [k for part in R.collectives(rep)[:2] for k in part]):
        label = R.coll_label(key)
        # a bandwidth matters when the collective's time does
        t_b = R.values(bs, lambda r, key=key: R.coll_figure(r, key, "collective_time"))
        t_n = R.values(ns, lambda r, key=key: R.coll_figure(r, key, "collective_time"))
        material = _material(t_b, t_n, step_ms)
        for fam in ("collective_time", "busbw"):
            f = M.FAMILIES[fam]
            v = Verdict(
                f"{fam}[{label}]", fam, f"{label} {f.label}", f.unit, f.worse, None, None,
                th[fam], entity=key,
            )  # fmt: skip
            case = _case(bs, ns, v, noise[fam],
                         lambda r, key=key, fam=fam: R.coll_figure(r, key, fam),
                         lambda r, key=key, fam=fam: R.coll_series(r, key, fam))  # fmt: skip
            case.material = material
            out.append(case)
    return out


def _kernel_cases(
    bs: list[dict], ns: list[dict], th: Threshold, noise: Threshold, step_ms: float
) -> list[Case]:
    out = []
    for name in _common(bs, ns, R.kernels):
        short = R.kernel_label(name)
        v = Verdict(
            f"kernel_time[{short}]", "kernel_time", f"{short} time", "ms",
            M.HIGHER_IS_WORSE, None, None, th, entity=name,
        )  # fmt: skip
        case = _case(bs, ns, v, noise, lambda r, name=name: R.kernel_figure(r, name),
                     lambda r, name=name: R.kernel_series(r, name))  # fmt: skip
        case.material = _material(case.base_runs, case.new_runs, step_ms)
        out.append(case)
    return out


def _region_cases(
    bs: list[dict], ns: list[dict], th: Threshold, noise: Threshold, step_ms: float,
    cpu: bool = False,
) -> list[Case]:  # fmt: skip
    """Per region of the samples (the report's top regions, `samples.regions`): its time
    per step, one metric each, judged as a kernel's. `cpu`: its CPU time on a GPU run
    (`region_cpu_time`; on a CPU run region_time is already CPU time)."""
    out = []

    def figure(rep: dict, key: tuple) -> float | None:
        s = R.region_series(rep, key, cpu)
        return fmean(s) if s else None

    family = "region_cpu_time" if cpu else "region_time"
    what = "CPU time" if cpu else "time"
    for key in _common(bs, ns, R.region_samples):
        label = R.region_label(key)
        v = Verdict(
            f"{family}[{label}]", family, f"region {label} {what}", "ms",
            M.HIGHER_IS_WORSE, None, None, th, entity=key,
        )  # fmt: skip
        case = _case(bs, ns, v, noise, lambda r, key=key: figure(r, key),
                     lambda r, key=key: R.region_series(r, key, cpu))  # fmt: skip
        if cpu and not (case.base_runs and case.new_runs):
            continue  # CPU runs: region_time holds the CPU time
        case.material = _material(case.base_runs, case.new_runs, step_ms)
        out.append(case)
    return out


# ---------------------------------------------------------------- warnings


def _beyond_prior(v: Verdict, alpha: float) -> bool:
    """A drill-down metric that got worse beyond its threshold and by more than its
    family's run-to-run prior sd per run, the per-step test agreeing at the comparison's
    α (not the drill-down's shared α: a warning does not fail the gate, so it needs no
    protection against thirty chances)."""
    if not v.drill_down or not v.gated or v.change is None:
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
    if any(v.gated and v.verdict == "regressed" for v in verdicts if not v.drill_down):
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
            + runs_advice(v.runs_to_decide)
        )
