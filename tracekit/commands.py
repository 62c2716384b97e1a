"""What the doors do, shared by the command line (`tracekit.cli`) and the agent door
(`tracekit.mcp_server`): the analysis options of a request, a run's report for the gate,
the what-if replay and the gate's comparison. A door module: it imports the diagnosers
lazily, and neither door imports the other.
"""

from __future__ import annotations

from pathlib import Path

from tracekit.options import AnalysisOptions, OpenOptions, Overrides


def open_run(run, opts: OpenOptions):
    """Open the run (its warnings wait in `r.warnings`, for the door to say)."""
    from tracekit.store.open import open_run as _open_run

    return _open_run(*run, options=opts)


def analysis(run, window="steps", steps=None, overrides=None, select=(), ignore=(),
              levels=True, root=None) -> AnalysisOptions:  # fmt: skip
    """The analysis options of a command, [tool.tracekit] filled in (`root`: the run's
    root when already known, else found by discovery)."""
    from tracekit.ingest.discover import find_trace_files
    from tracekit.options import rule_selection

    if root is None:
        root = find_trace_files([Path(p) for p in run])[0] if run else None
    sel, ign = rule_selection(root, tuple(select), tuple(ignore))
    return AnalysisOptions(
        window=window,
        steps=steps,
        overrides=Overrides.of(overrides),
        select=sel,
        ignore=ign,
        levels=levels,
    )


def gate_report(
    path: str,
    steps: str | None,
    ranks: str | None = None,
    sample_ranks: int | None = None,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
) -> dict:
    """A run folder's report: what `analyze --format json` prints for it (and caches),
    as the JSON values the gate reads."""
    from diagnosers import assemble
    from tracekit.report.schema import to_dict

    options = analysis([path], steps=steps, select=select, ignore=ignore)
    with open_run([path], OpenOptions(ranks=ranks, sample_ranks=sample_ranks)) as r:
        return to_dict(assemble.cached(r, options))


def whatif_report(run, opts: OpenOptions, options: AnalysisOptions, changes):
    """(the typed what-if result, the closed run) of replaying `changes` on RUN — what
    `tracekit whatif` prints (and the MCP door's `whatif` returns)."""
    from diagnosers import assemble
    from diagnosers.analyses.stepmodel import what_if
    from diagnosers.context import Context
    from tracekit.report import schema as S
    from tracekit.stepmodel.changes import parse

    for c in changes:  # a change that is not one fails before the run is read
        parse(c)
    with open_run(run, opts) as r:
        r.materialize()
        o = what_if(Context(r, options), list(changes))
    out = S.WhatIfReport(
        change=o.change,
        measured_step_ms=o.measured_step_ms,
        replayed_step_ms=o.replayed_step_ms,
        predicted_step_ms=o.predicted_step_ms,
        saved_ms=o.saved_ms,
        critical_path=assemble.critical_path(o.critical_path),
        notes=o.notes,
    )
    return out, r


def gate_compare(base_side, new_side, max_regression=None, run_noise=None, fail_on=None,
                 alpha=None, config=None, steps=None, select=(), ignore=(), ranks=None,
                 sample_ranks=None, strict=False):  # fmt: skip
    """The gate's comparison of two sides (each a sequence of run folders, baselines or
    reports) — what `tracekit compare` renders (and the MCP door's `compare` returns).
    `strict`: drill-down regressions fail as the headline's do (no warnings)."""
    from tracekit.gate import baseline as gb
    from tracekit.gate import config as gc
    from tracekit.gate.compare import run_compare
    from tracekit.gate.metrics import parse_spec

    cfg = gc.load(config)
    th = {**cfg.thresholds, **parse_spec(max_regression)}
    seen: dict[Path, dict] = {}  # a run compared with itself is analysed once

    def analyze(p: str) -> dict:
        key = Path(p).resolve()
        if key not in seen:
            seen[key] = gate_report(p, steps, ranks, sample_ranks, select, ignore)
        return seen[key]

    noise = {**cfg.run_noise, **parse_spec(run_noise, "--run-noise")}
    sides = [gb.join([gb.load_side(p, analyze) for p in side]) for side in (base_side, new_side)]
    return run_compare(
        *sides, th, alpha or cfg.alpha or 0.05, fail_on or cfg.fail_on or "regression", noise,
        strict,
    )
