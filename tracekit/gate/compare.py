"""Compare two reports metric by metric: regressed / improved / unchanged / inconclusive,
and name the cause of a step-time change.

Verdict rules (per metric, change = new − base in the threshold's unit):

- within the threshold → **unchanged**;
- beyond it, on a figure without step-to-step noise (peak memory) → **regressed** or
  **improved**, exact;
- beyond it, and the per-step samples agree (Mann–Whitney U p < α, or with few steps
  a 1 − α (95%) bootstrap interval of the difference that excludes zero, in the same
  direction) → **regressed** or **improved**;
- beyond it, and the samples do not agree — too few steps, too much spread, or a
  report without samples → **inconclusive**, with the steps per run that would decide.

A collective's or kernel's change counts only when it is at least 1% of the base step.
Everything is read from the two reports; the gate computes no figure of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from tracekit.errors import TracekitError
from tracekit.gate import metrics as M
from tracekit.gate.baseline import Side
from tracekit.gate.metrics import Threshold
from tracekit.gate.stats import ALPHA, TestResult, compare, steps_to_decide
from tracekit.ingest.ranksel import ranges_text

VERDICTS = ("regressed", "inconclusive", "improved", "unchanged", "not compared")


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


def judge(
    v: Verdict,
    base_s: list[float] | None,
    new_s: list[float] | None,
    alpha: float,
    exact: bool = False,
    flip: bool = False,
    material: bool = True,
) -> Verdict:
    """Fill in v's verdict from its point values and per-step samples.

    `flip`: the samples move opposite to the metric (MFU vs step time)."""
    th = v.threshold
    v.gated = th.kind != "off"
    if v.base is None or v.new is None:
        missing = "base" if v.base is None else "new"
        v.verdict, v.evidence, v.gated = "not compared", f"not in the {missing} report", False
        return v
    v.change = _change(th, v.base, v.new)
    if th.kind == "off":
        v.change = _rel(v.base, v.new)
    beyond = v.change is not None and abs(v.change) > th.value and th.kind != "off"
    worse = v.change is not None and v.change * v.worse > 0
    test = None
    if base_s and new_s and not exact:
        test = compare(base_s, new_s, alpha)
        v.test = test
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
    if agrees:
        v.verdict = direction
        if test.method == "mann-whitney":
            v.confidence = "high" if test.p_value < alpha / 10 else "medium"
            v.evidence = f"Mann–Whitney U p = {test.p_value:.2g}, {n}"
        else:
            v.confidence = "medium"
            v.evidence = f"bootstrap {(1 - alpha) * 100:.3g}% interval excludes 0, {n}"
        return v
    v.verdict, v.confidence = "inconclusive", "low"
    v.steps_to_decide = steps_to_decide(base_s, new_s, alpha)
    why = (
        f"Mann–Whitney U p = {test.p_value:.2g}"
        if test.p_value is not None
        else f"the {(1 - alpha) * 100:.3g}% bootstrap interval includes 0"
    )
    v.evidence = f"beyond {th}, but the steps do not agree ({why}, {n})"
    if v.steps_to_decide and v.steps_to_decide > 1000:
        v.evidence += "; more than 1000 steps per run would be needed to decide it"
    elif v.steps_to_decide:
        v.evidence += f"; ≈{v.steps_to_decide} steps per run would decide it"
    return v


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


def run_compare(
    base: Side,
    new: Side,
    thresholds: dict[str, Threshold] | None = None,
    alpha: float = ALPHA,
    fail_on: str = "regression",
) -> Comparison:
    check_same_ranks(base, new)
    th = M.defaults()
    th.update(thresholds or {})
    cmp = Comparison(base, new, th, alpha, fail_on)
    b, n = base.report, new.report
    for side in (base, new):
        if not side.has_samples:
            cmp.notes.append(
                f"{side.path}: no per-step samples (a report from an older tracekit, or a "
                "run without ProfilerSteps): verdicts beyond a threshold are inconclusive"
            )
    series = {}
    for m in M.RUN_METRICS:
        v = Verdict(m.key, m.key, m.label, m.unit, m.worse, point(b, m), point(n, m), th[m.key])
        src = M.RUN_METRICS[0] if m.test_from == "step_time" else m
        bs = step_series(b, src.sample) if src.sample else None
        ns = step_series(n, src.sample) if src.sample else None
        series[m.key] = (bs, ns)
        cmp.verdicts.append(judge(v, bs, ns, alpha, exact=m.exact, flip=bool(m.test_from)))
    step_ms = point(b, M.RUN_METRICS[0]) or 0.0
    # the drill-down metrics (per rank, collective, kernel) share α (Bonferroni), so
    # thirty of them do not give thirty chances to call noise a regression
    count = len(_drill_down(b, n, th, alpha, step_ms))
    cmp.verdicts += _drill_down(b, n, th, alpha / max(count, 1), step_ms)
    cmp.cause = explain(b, n)
    _attach_causes(cmp, b, n)
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


def _drill_down(
    b: dict, n: dict, th: dict[str, Threshold], alpha: float, step_ms: float
) -> list[Verdict]:
    return (
        _rank_verdicts(b, n, th["rank_step_time"], alpha)
        + _collective_verdicts(b, n, th, alpha, step_ms)
        + _kernel_verdicts(b, n, th["kernel_time"], alpha, step_ms)
    )


def _rank_verdicts(b: dict, n: dict, th: Threshold, alpha: float) -> list[Verdict]:
    out = []
    base_ranks = {r.get("rank"): r for r in b.get("ranks") or []}
    new_ranks = {r.get("rank"): r for r in n.get("ranks") or []}
    bs = {r["rank"]: r.get("step_time_ms") for r in _sample_ranks(b)}
    ns = {r["rank"]: r.get("step_time_ms") for r in _sample_ranks(n)}
    if len(base_ranks) < 2:
        return out
    for rank in sorted(set(base_ranks) & set(new_ranks), key=lambda x: (x is None, x)):
        v = Verdict(
            f"rank_step_time[rank {rank}]",
            "rank_step_time",
            f"rank {rank} step time",
            "ms",
            M.HIGHER_IS_WORSE,
            _num(base_ranks[rank].get("step_time_ms")),
            _num(new_ranks[rank].get("step_time_ms")),
            th,
        )
        out.append(judge(v, bs.get(rank), ns.get(rank), alpha))
    return out


def _collective_verdicts(
    b: dict, n: dict, th: dict[str, Threshold], alpha: float, step_ms: float
) -> list[Verdict]:
    out = []
    bsam = {_coll_key(c): c for c in (b.get("samples") or {}).get("collectives") or []}
    nsam = {_coll_key(c): c for c in (n.get("samples") or {}).get("collectives") or []}
    brep = {_coll_key(c): c for c in b.get("collectives") or []}
    nrep = {_coll_key(c): c for c in n.get("collectives") or []}
    bsteps = (b.get("samples") or {}).get("steps") or []
    nsteps = (n.get("samples") or {}).get("steps") or []
    keys = [k for k in list(brep) + [k for k in bsam if k not in brep] if k in nrep or k in nsam]
    for key in keys:
        label = coll_label(dict(zip(("name", "group_size", "bytes"), key, strict=True)))
        bc, nc = bsam.get(key), nsam.get(key)
        for fam, rep_key, sam_key in (
            ("collective_time", "time_ms_per_step", "time_ms"),
            ("busbw", "busbw_GBps", "busbw_GBps"),
        ):
            f = M.FAMILIES[fam]
            label_f, unit, worse = f.label, f.unit, f.worse
            bs = _full_series(bc, sam_key, bsteps) if bc else None
            ns = _full_series(nc, sam_key, nsteps) if nc else None
            # the report's figure; the samples' mean only for a collective the report's
            # table left out (a baseline keeps the top 20) — never in place of a null:
            # where the report cannot know a figure, the gate does not judge it
            bv = _num(brep[key].get(rep_key)) if key in brep else (fmean(bs) if bs else None)
            nv = _num(nrep[key].get(rep_key)) if key in nrep else (fmean(ns) if ns else None)
            if fam == "collective_time":
                moved = abs((nv or 0) - (bv or 0))
            else:  # a bandwidth matters when the collective's time does
                bt = _num((brep.get(key) or {}).get("time_ms_per_step"))
                nt = _num((nrep.get(key) or {}).get("time_ms_per_step"))
                moved = abs((nt or 0) - (bt or 0)) if bt is not None else max(bt or 0, nt or 0)
                if bt is None and bc and nc:
                    moved = abs(fmean(_full_series(nc, "time_ms", nsteps) or [0]) -
                                fmean(_full_series(bc, "time_ms", bsteps) or [0]))  # fmt: skip
            material = not step_ms or moved >= M.MATERIAL_SHARE * step_ms
            v = Verdict(f"{fam}[{label}]", fam, f"{label} {label_f}", unit, worse, bv, nv, th[fam])
            out.append(judge(v, bs, ns, alpha, material=material))
    return out


def _kernel_verdicts(
    b: dict, n: dict, th: Threshold, alpha: float, step_ms: float
) -> list[Verdict]:
    out = []
    bk = {k["name"]: k for k in (b.get("samples") or {}).get("kernels") or []}
    nk = {k["name"]: k for k in (n.get("samples") or {}).get("kernels") or []}
    bsteps = (b.get("samples") or {}).get("steps") or []
    nsteps = (n.get("samples") or {}).get("steps") or []
    for name in [k for k in bk if k in nk]:
        bs = _full_series(bk[name], "time_ms", bsteps)
        ns = _full_series(nk[name], "time_ms", nsteps)
        bv, nv = fmean(bs), fmean(ns)
        material = not step_ms or abs(nv - bv) >= M.MATERIAL_SHARE * step_ms
        short = name if len(name) <= 60 else name[:57] + "…"
        v = Verdict(
            f"kernel_time[{short}]", "kernel_time", f"{short} time", "ms",
            M.HIGHER_IS_WORSE, bv, nv, th,
        )  # fmt: skip
        out.append(judge(v, bs, ns, alpha, material=material))
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


def explain(b: dict, n: dict) -> dict[str, Any]:
    """Decompose the step-time change into levels and name the top contributors."""
    lb, ln = _level_means(b), _level_means(n)
    out: dict[str, Any] = {"levels": {}, "contributors": [], "text": None}
    if "step_time_ms" not in lb or "step_time_ms" not in ln:
        bs, ns = point(b, M.RUN_METRICS[0]), point(n, M.RUN_METRICS[0])
        if bs is not None and ns is not None:
            out["step_ms_change"] = ns - bs
            out["text"] = f"step {ns - bs:+.2f} ms (no per-step samples to decompose it)"
        return out
    d_step = ln["step_time_ms"] - lb["step_time_ms"]
    out["step_ms_change"] = d_step
    out["step_ms"] = [lb["step_time_ms"], ln["step_time_ms"]]
    levels = {}
    for key, name in LEVELS:
        levels[name] = ln.get(key, 0.0) - lb.get(key, 0.0)
    # host-bound gaps are part of idle
    hb = [_mean_sample(x, "host_bound_ms") for x in (b, n)]
    if None not in hb:
        levels["idle"] -= hb[1] - hb[0]
        levels["host-bound"] = hb[1] - hb[0]
    bub = [point(x, next(m for m in M.RUN_METRICS if m.key == "bubble")) for x in (b, n)]
    if None not in bub:  # a pipeline: idle and exposed send/recv are the bubble
        levels["bubble (idle + exposed send/recv)"] = levels.pop("idle") + levels.pop(
            "exposed communication"
        )
    out["levels"] = levels
    contributors = _collective_contributors(b, n) + _kernel_contributors(b, n)
    contributors += _rank_contributors(b, n)
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


def _collective_contributors(b: dict, n: dict) -> list[dict]:
    bsam = {_coll_key(c): c for c in (b.get("samples") or {}).get("collectives") or []}
    out = []
    for c in (n.get("samples") or {}).get("collectives") or []:
        bc = bsam.get(_coll_key(c))
        if bc is None:
            continue
        d_exp = fmean(c["exposed_ms"] or [0]) - fmean(bc["exposed_ms"] or [0])
        d_time = fmean(c["time_ms"] or [0]) - fmean(bc["time_ms"] or [0])

        def overlap(x: dict) -> float | None:
            t = sum(x["time_ms"] or [])
            return 1 - sum(x["exposed_ms"] or []) / t if t else None

        br = dict(zip(bc.get("ranks") or [], bc.get("exposed_ms_by_rank") or [], strict=False))
        nr = dict(zip(c.get("ranks") or [], c.get("exposed_ms_by_rank") or [], strict=False))
        per_rank = {r: nr[r] - br.get(r, 0.0) for r in nr}
        top = max((abs(x) for x in per_rank.values()), default=0)
        ranks = [r for r, x in per_rank.items() if top and abs(x) >= 0.5 * top]
        label = coll_label(c)
        ob, on = overlap(bc), overlap(c)
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
            bw = [fmean([x for x in s["busbw_GBps"] if x] or [0]) for s in (bc, c)]
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
                    "text": f"{label} {d_time:+.2f} ms/step{bwt}",
                }
            )
    return out


def _kernel_contributors(b: dict, n: dict) -> list[dict]:
    bk = {k["name"]: k for k in (b.get("samples") or {}).get("kernels") or []}
    nk = {k["name"]: k for k in (n.get("samples") or {}).get("kernels") or []}
    bsteps = (b.get("samples") or {}).get("steps") or []
    nsteps = (n.get("samples") or {}).get("steps") or []
    out = []
    for name in set(bk) | set(nk):
        bv = fmean(_full_series(bk[name], "time_ms", bsteps) or [0]) if name in bk else 0.0
        nv = fmean(_full_series(nk[name], "time_ms", nsteps) or [0]) if name in nk else 0.0
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


def _rank_contributors(b: dict, n: dict) -> list[dict]:
    """A rank whose compute grew much more than the others' (a new straggler)."""
    out = []
    bc = {r["rank"]: fmean(r.get("compute_ms") or [0]) for r in _sample_ranks(b)}
    nc = {r["rank"]: fmean(r.get("compute_ms") or [0]) for r in _sample_ranks(n)}
    common = sorted(set(bc) & set(nc))
    if len(common) < 2:
        return out
    d = {r: nc[r] - bc[r] for r in common}
    worst = max(common, key=lambda r: d[r])
    rest = sorted(d[r] for r in common if r != worst)
    med = rest[len(rest) // 2]
    new_strag = set((n.get("summary") or {}).get("straggler_ranks") or []) - set(
        (b.get("summary") or {}).get("straggler_ranks") or []
    )
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


def _attach_causes(cmp: Comparison, b: dict, n: dict) -> None:
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
            v.cause = _memory_cause(b, n)
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


def _memory_cause(b: dict, n: dict) -> str | None:
    def peaks(rep: dict) -> dict:
        return {
            r.get("rank"): r.get("peak_reserved_bytes")
            for r in rep.get("ranks") or []
            if _num(r.get("peak_reserved_bytes")) is not None
        }

    pb, pn = peaks(b), peaks(n)
    common = [r for r in pn if r in pb]
    if not common:
        return None
    r = max(common, key=lambda x: pn[x] - pb[x])
    return (
        f"peak reserved on rank {r}: {pb[r] / 1e9:.2f} → {pn[r] / 1e9:.2f} GB "
        f"({(pn[r] - pb[r]) / 1e9:+.2f} GB)"
    )
