"""The report's lines that every format shares: the header, the warnings, the unknown
verdicts, the findings, the compute not counted, the collectives' total."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.schema import Report
from tracekit.report.steplines import saves_text


def header(report: Report) -> list[str]:
    r = report.run
    dev = r.device if isinstance(r.device, str) or r.device is None else ", ".join(r.device)
    backend = r.backend if isinstance(r.backend, str) or r.backend is None else ", ".join(r.backend)
    step_txt = f"{r.steps[0]}–{r.steps[-1]}" if r.steps else "none (whole trace)"
    return [
        f"run {r.path}",
        f"{len(r.ranks)} of {r.world_size} ranks · backend {backend or '—'} · "
        f"device {dev or '—'} · ProfilerSteps {step_txt} · window {report.window.kind}",
        *([selection_line(r.rank_selection)] if r.rank_selection else []),
        *device_step_lines(r),
    ]


def device_step_lines(r: Any) -> list[str]:
    """Where the steps on the device differ from the CPU's: the device's lag (the worst
    ranks; `lag_fraction` is of the step from its CPU start to its device end), and the
    steps left out for launching no device work."""
    out = []
    # a lag under 1% of the step is left to the JSON (a last kernel a few µs late)
    lags = sorted(
        (x for x in getattr(r, "device_lag", None) or [] if (x.lag_fraction or 0) >= 0.01),
        key=lambda x: -x.lag_ms,
    )
    if lags:
        parts = [
            f"{x.lag_ms:.1f} ms ({units.fmt(x.lag_fraction, 'fraction')}) behind the CPU "
            f"on rank {x.rank}"
            if i == 0
            else f"{x.lag_ms:.1f} ms on rank {x.rank}"
            for i, x in enumerate(lags[:3])
        ]
        more = f" (and {len(lags) - 3} more ranks)" if len(lags) > 3 else ""
        out.append(
            f"device runs {', '.join(parts)}{more}: each step's window runs to the end of "
            "the device work it launched"
        )
    stubs = getattr(r, "unanalysed_steps", None) or {}
    if stubs:
        by_steps: dict[tuple[int, ...], list[int]] = {}
        for rank, steps in stubs.items():
            by_steps.setdefault(tuple(steps), []).append(int(rank))
        for steps, ranks in by_steps.items():
            on = f"rank{'s' if len(ranks) > 1 else ''} {units.ranks(sorted(ranks))}"
            out.append(
                f"left out ProfilerStep {', '.join(map(str, steps))} on {on}: "
                "no device work launched"
            )
    return out


def selection_line(sel: Any) -> str:
    """The partial-run line of a report opened with --ranks / --sample-ranks (a
    `RankSelection` or its dict)."""
    get = sel.get if isinstance(sel, dict) else lambda k: getattr(sel, k)
    return (
        f"partial: analysed {len(get('ranks'))} of {get('of')} ranks "
        f"({get('option')} {get('spec')}); figures and findings cover these ranks only"
    )


def health_lines(report: Report) -> list[str]:
    """Warnings the figures need beside them: files left out, ranks missing, events skipped."""
    r = report.run
    out = [f"warning: left out {u['path']}: {u['reason']}" for u in r.unreadable]
    if r.missing_ranks:
        out.append(f"warning: no trace for ranks {units.ranks(r.missing_ranks)}")
    if r.skipped_events:
        what = ", ".join(f"{n:,} {why}" for why, n in r.skipped_events.items())
        out.append(f"warning: skipped {sum(r.skipped_events.values()):,} events ({what})")
    out += [f"warning: mixed runs analyzed together: {m}" for m in r.mixed]
    return out


def verdict_lines(report: Report) -> list[str]:
    """Each level whose verdict is unknown, and why (its headline figures' reasons)."""
    return [
        f"unknown ({lv.level}): {lv.verdict_reason or 'its headline figures are unknown'}"
        for lv in report.levels or []
        if lv.verdict == "unknown"
    ]


def healthy_text(verdicts: dict[str, str]) -> str:
    """What a report without findings says of its levels (level → verdict): healthy only
    when every level is ok; otherwise which levels are unknown (not measured), the rest ok."""
    unknown = [name for name, v in verdicts.items() if v == "unknown"]
    if not unknown:
        return "healthy at every level"
    ok = [name for name, v in verdicts.items() if v == "ok"]
    return f"{', '.join(unknown)} unknown (not measured)" + (f"; {', '.join(ok)} ok" if ok else "")


def level_verdicts(report: Report) -> dict[str, str]:
    return {lv.level: lv.verdict for lv in report.levels or []}


def finding_lines(report: Report) -> list[str]:
    out = []
    for f in report.findings or []:
        impact = f" · {units.fmt(f.impact_ms, 'ms')}/step" if f.impact_ms else ""
        ranks = f" · ranks {units.ranks(f.ranks)}" if f.ranks else ""
        out.append(f"{f.severity.upper():8} {f.code} {f.kind}{impact}{ranks}")
        out.append(f"         {f.title}")
        if f.remedy:
            out.append(f"         → {f.remedy}")
        if len(getattr(f, "remedies", None) or []) > 1:  # one: the remedy's lead says it
            out.append(f"         replayed: {remedies_text(f.remedies)}")
    return out


def remedies_text(remedies: list) -> str:
    """A finding's candidate changes replayed, best first: 'C → X ms per step (saves Y)'."""
    ms = F.MEASURED_STEP_MS.unit
    return " · ".join(
        f"{r.change} → {units.fmt(r.predicted_step_ms, ms)} per step ({saves_text(r.saved_ms, ms)})"
        for r in remedies
    )


UNCOUNTED_WHY = {
    "graph_replay": "graph replay",
    "op_without_formula": "no FLOP formula",
    "op_without_flops": "FLOPs unknown",
    "no_op": "no launching op",
}


def uncounted_lines(report: Report, limit: int = 5) -> list[str]:
    """What `uncounted_compute_fraction` is made of: the ops (graph launches) whose
    GEMM/attention/convolution kernels have no FLOPs, most device time first."""
    s = report.summary
    frac = None if s is UNSET else s.uncounted_compute_fraction
    rows = (report.top_uncounted_ops or [])[:limit]
    if not frac or not rows:
        return []
    out = [
        f"compute not counted: {units.fmt(frac, 'fraction')} of compute time (MFU leaves it out)"
    ]
    for o in rows:
        out.append(
            f"  {units.fmt(o.device_ms, 'ms')}  {o.name} · {UNCOUNTED_WHY.get(o.why, o.why)}"
            + (f" ({o.note})" if o.note else "")
        )
    return out


def collectives_total_line(report: Report) -> str | None:
    """The exposed communication per step beside what the collectives' rows add to: on
    CPU runs a host thread blocked on a collective outside its span counts too, and
    collectives that overlap one another each count their own exposed time."""
    lv = report.level("communication")
    total = lv.metrics.get("exposed_ms_per_step") if lv else None
    if total is None or not report.collectives:
        return None
    rows = sum(c.exposed_ms for c in report.collectives)
    head = (
        f"exposed communication {units.fmt(total, 'ms')}/step "
        f"({units.fmt(lv.measured.exposed_comm_fraction, 'fraction')} of the step, mean over ranks)"
    )
    rest = total - rows
    if abs(rest) < 0.005:
        return f"{head}: all of it in the collectives above"
    if rest > 0:
        return (
            f"{head}: the collectives above {units.fmt(rows, 'ms')}, outside their spans "
            f"{units.fmt(rest, 'ms')} (host waits for them)"
        )
    return (
        f"{head}: the collectives above add to {units.fmt(rows, 'ms')} "
        "(they overlap one another; each counts its own exposed time)"
    )
