"""The one path that builds a report: `analyze(run, options)`.

Every way of use calls it — `tracekit analyze`, the TUI, the gate (through the CLI,
which hands the gate its reports), and `tracekit.analyze()` in a notebook — so nothing
else computes a figure. In order: the per-rank breakdown over each rank's window
(`tracekit.metrics`), the four levels laid out from the context's facts
(`diagnosers.levels`), the selected rules' findings (`diagnosers.rules`), the tables
(collectives, top ops, top kernels), the summary with a reason for every null, and the
per-step samples — the same figures with each step as the window.

`cached(run, options)` answers from the report cache when this exact report (sources,
job.json, options, code) was computed before (`tracekit.report.cache`).
"""

from __future__ import annotations

import traceback
from math import fsum

from msgspec import UNSET

from diagnosers import levels as L
from diagnosers.base import mean
from diagnosers.context import Context
from diagnosers.findings import SEVERITY_ORDER, Finding
from diagnosers.rules import error_finding, run_rules, selected
from tracekit.metrics import kernels as K
from tracekit.metrics import windows as W
from tracekit.metrics.samples import per_step
from tracekit.model import figures as F
from tracekit.options import AnalysisOptions
from tracekit.report import schema as S
from tracekit.report.runinfo import run_info
from tracekit.store.run import Run
from tracekit.version import __version__


def cached(run: Run, options: AnalysisOptions | None = None, debug: bool = False) -> S.Report:
    """`analyze`, read back from the run's report cache when this exact report was
    computed before. `debug` always computes, so an error shows its traceback."""
    from tracekit.report import cache

    options = options or AnalysisOptions()
    if debug:
        return analyze(run, options, debug=True)
    return cache.cached(run, options.key(), lambda: analyze(run, options))


def analyze(run: Run, options: AnalysisOptions | None = None, debug: bool = False) -> S.Report:
    """The report of `run` for `options` (`options.levels=False`: the breakdown alone)."""
    options = options or AnalysisOptions()
    rules = selected(options.select, options.ignore)  # an unknown code fails first
    if options.levels:
        run.materialize()
    ctx = Context(run, options)
    if options.levels:
        from tracekit.analysis.whatif_plan import start

        start(ctx)  # the step model, built on a thread while the report is made
    report = S.Report(
        tracekit_version=__version__,
        run=run_info(run),
        window=S.Window(kind=options.window, steps=options.steps or "all"),
        ranks=[S.RankRow(**_fields(r)) for r in ctx.ranks],
    )
    if not options.levels:
        return report
    levels: list[S.Level] = []
    failed: dict[str, str] = {}  # level → why its figures are missing
    for name, build in L.BUILDERS.items():
        try:
            levels.append(build(ctx))
        except Exception as exc:  # a level's figures fail: the report stands without them
            if debug:
                traceback.print_exc()
            failed[name] = f"{name} figures are missing: computing them raised {exc!r}"
            level = S.LEVEL_TYPES[name]()
            level.notes.append(failed[name])
            ctx.raised.append(error_finding(f"the {name} level", exc, name))
            levels.append(level)
    findings = run_rules(ctx, [r for r in rules if r.level not in failed], debug=debug)
    replays = _replayed(ctx, findings)  # the remedies, on the model's thread meanwhile
    by = {lv.level: lv for lv in levels}
    _rank_figures(ctx, report, failed)
    report.levels = levels
    report.collectives = (
        list(ctx.collectives.table)
        if "communication" not in failed
        else []
    )
    report.top_ops = list(ctx.compute.top_ops) if "compute" not in failed else []
    report.top_kernels = top_kernels(ctx)
    unc = ctx.compute.uncounted if "compute" not in failed else None
    report.top_uncounted_ops = list(unc.top_ops) if unc else []
    report.top_uncounted_kernels = list(unc.top_kernels) if unc else []
    report.regions = _regions(ctx, debug)
    report.summary = _summary(ctx, report, by, failed)
    report.samples = per_step(
        run,
        steps=options.steps,
        pipeline=report.summary.bubble_fraction is not None,
        ranks=[r.rank for r in ctx.ranks],
        busbw_null={
            (c.name, c.group_size, c.bytes) for c in report.collectives if c.busbw_GBps is None
        },
        kernels=[k.name for k in report.top_kernels],
        regions=[(g.kind, g.path) for g in report.regions[:10]],
        cpu=ctx.cpu,
    )
    # each finding's impact: the step its remedy saves in the step model's replay (the
    # model built on its thread while the figures above were computed)
    report.step_model = step_model(ctx, findings, debug, replays)
    for level in levels:
        sev = {f.severity for f in findings if f.verdict_level == level.level}
        level.verdict = "critical" if "critical" in sev else "warning" if "warning" in sev else "ok"
    L.unknown_verdicts(ctx, levels, report.summary, failed)  # ok needs a measured figure
    # the largest win first (a replayed finding's is its best remedy's saving, so one
    # none of whose remedies wins sorts after those that win); ties: severity, rule order
    findings.sort(key=lambda f: (-(f.impact_ms or 0), SEVERITY_ORDER[f.severity]))
    report.findings = [_row(f) for f in findings]
    return report


def _regions(ctx: Context, debug: bool = False) -> list[S.Region]:
    """The regions (tracekit/analysis/regions.py); none when computing them fails."""
    from tracekit.analysis.regions import regions

    try:
        return regions(ctx)
    except Exception:  # the report stands without them
        if debug:
            traceback.print_exc()
        return []


def _replayed(ctx: Context, findings: list[Finding]):
    """The findings' remedies replayed on the step model's thread
    (`diagnosers.impact.replayed`); None: `step_model` replays them (and raises there
    what they raise)."""
    from diagnosers.impact import replayed

    try:
        return replayed(ctx, findings)
    except Exception:
        return None


def step_model(
    ctx: Context, findings: list[Finding], debug: bool = False, replays=None
) -> S.StepModelBlock:
    """The step model block (tracekit.stepmodel): the replay, its error, the critical path,
    and each finding's candidate changes replayed (`what_if`, one row per change; by
    `replays` where given, `diagnosers.impact.replayed`) — which set that finding's
    `remedies` and `impact_ms` (its best saving)."""
    from diagnosers.impact import impacts
    from tracekit.analysis.whatif_plan import not_built

    block = S.StepModelBlock()
    try:
        sm = ctx.step_model
        if sm is None:
            block.notes.append(not_built(ctx, "no rank has an analysed window to replay"))
            return block
        if replays is not None:
            replays.wait()  # the replays' thread is done with the graph read below
        base = sm.base
        block.measured_step_ms = base.measured_step_ms
        block.replayed_step_ms = base.replayed_step_ms
        block.replay_error = base.replay_error
        block.critical_path = critical_path(sm.critical_path())
        block.path_origin_ns = sm.graph.origin + round(base.origin_ns)
        block.collective_slack_ms = sm.collective_slack_ms()
        for f, o in impacts(ctx, findings if replays is None else replays):
            block.what_if.append(
                S.WhatIf(
                    finding=f.code,
                    change=o.change,
                    predicted_step_ms=o.predicted_step_ms,
                    saved_ms=o.saved_ms,
                )
            )
        block.notes += sm.notes
        if sm.graph.dropped:
            block.notes.append(
                f"{sm.graph.dropped} dependencies the measured order cannot hold were dropped"
            )
    except Exception as exc:  # the step model fails: the report stands without it
        if debug:
            traceback.print_exc()
        block.notes.append(f"step model figures are missing: computing them raised {exc!r}")
    return block


def critical_path(cp) -> S.CriticalPath:
    """The report's critical path from the model's (`tracekit.stepmodel.model.CriticalPath`)."""
    return S.CriticalPath(
        by_kind=cp.by_kind,
        by_rank=cp.by_rank,
        segments=[S.PathSegment(**seg) for seg in cp.segments],
    )


def _fields(struct) -> dict:
    return {f: getattr(struct, f) for f in struct.__struct_fields__}


def _row(f: Finding) -> S.FindingRow:
    return S.FindingRow(
        kind=f.kind,
        code=f.code,
        level=f.level,
        severity=f.severity,
        title=f.title,
        ranks=list(f.ranks),
        measured=f.measured,
        predicted=f.predicted,
        impact_ms=f.impact_ms,
        remedy=f.remedy,
        details=f.details,
        remedies=[S.Remedy(**r) for r in f.remedies],
    )


def top_kernels(ctx: Context, limit: int = K.TOP_KERNELS) -> list[S.KernelRow]:
    """The compute kernels with the most device time over each rank's window: per step,
    mean over the report's ranks (the samples' kernel series, over the whole window)."""
    per = {
        name: {rank: v for (rank, _wid), v in cells.items()}
        for name, cells in K.kernel_time_with_steps(
            ctx.run, ctx.windows, W.step_windows(ctx.steps), top=limit
        ).items()
    }
    steps = {r.rank: max(r.steps, 1) for r in ctx.ranks}
    n = max(len(ctx.ranks), 1)
    rows = []
    for name in K.top_names(per, limit):
        cells = per[name]
        rows.append(
            S.KernelRow(
                name=name,
                count_per_step=fsum(c / steps.get(r, 1) for r, (_ns, c) in cells.items()) / n,
                time_ms_per_step=fsum(ns / steps.get(r, 1) for r, (ns, _c) in cells.items())
                / n
                / 1e6,
            )
        )
    return rows


def _rank_figures(ctx: Context, report: S.Report, failed: dict[str, str]) -> None:
    """The per-rank figures the levels add to `ranks[]`."""
    comp = {r.rank: r for r in ctx.compute.ranks} if "compute" not in failed else {}
    mem = {r.rank: r for r in ctx.memory.ranks} if "memory" not in failed else {}
    comm = {r.rank: r for r in ctx.communication.ranks} if "communication" not in failed else {}
    for row in report.ranks:
        c, m, n = comp.get(row.rank), mem.get(row.rank), comm.get(row.rank)
        row.mfu = S.known(c.mfu) if c else None
        row.hfu = S.known(c.hfu) if c else None
        row.host_bound_fraction = c.host_bound_fraction if c else None
        row.peak_memory_fraction = m.fraction if m else None
        row.peak_reserved_bytes = m.peak_reserved_bytes if m else None
        row.exposed_slow_fraction = n.exposed_slow_fraction if n else None
        row.uncounted_compute_fraction = c.uncounted_compute_fraction if c else None


def _summary(
    ctx: Context, report: S.Report, by: dict[str, S.Level], failed: dict[str, str]
) -> S.Summary:
    """The summary, each figure read where the catalog's `SUMMARY_FROM` says: a level's
    block, the mean over `ranks[]`, or the run's step."""
    figures = {fig.key: _read(src, fig.key, ctx, report, by) for fig, src in F.SUMMARY_FROM.items()}
    summary = S.Summary(
        **figures,
        device_spec=ctx.spec.name if ctx.spec else None,
        manifest=bool(ctx.manifest),
    )
    summary.null_reasons = null_reasons(ctx, summary, failed)
    return summary


def _read(src: F.From, key: str, ctx: Context, report: S.Report, by: dict[str, S.Level]):
    """The value of summary figure `key` at `src` (None where any step is missing)."""
    if src.level == "run":
        return ctx.step_ms
    if src.level == "ranks":
        return mean(getattr(r, key) for r in report.ranks)
    value = getattr(by[src.level], src.block)
    for step in src.path or (key,):
        if value is None or value is UNSET:
            return None
        value = value.get(step) if isinstance(value, dict) else getattr(value, step)
    return None if value is UNSET else value


NOT_MEASURABLE = "not measurable"


def null_reasons(ctx: Context, summary: S.Summary, failed: dict[str, str]) -> dict[str, str]:
    """Why each null figure of the summary is null: the reason the fact that made it so
    carries (`Facts.null_reasons`), else "not measurable"; where a level's figures failed,
    that failure."""
    nulls = [f for f in summary.__struct_fields__ if getattr(summary, f) is None]
    if failed:  # the first level whose figures failed says why
        return {k: next(iter(failed.values())) for k in nulls}
    reasons = ctx.null_reasons
    return {k: reasons.get(k) or NOT_MEASURABLE for k in nulls}
