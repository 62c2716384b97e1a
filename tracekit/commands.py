"""What the doors do, shared by the command line (`tracekit.cli`), the agent door
(`tracekit.mcp_server`) and the Python door (`tracekit.api`): the options of a request
(through the one resolver, `tracekit.options.resolve`), `analyze`'s answer (the answer
cache, the renderers), a run's report for the gate, the what-if replay and its text, the
gate's comparison, query rows as text. A door module: it imports the diagnosers lazily,
and neither the CLI nor the MCP door imports the other.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tracekit.options import AnalysisOptions, OpenOptions, check_names, resolve


def open_run(run, opts: OpenOptions, while_ingesting=None):
    """Open the run (its warnings wait in `r.warnings`, for the door to say);
    `while_ingesting`: as `tracekit.store.open.open_run` takes it."""
    from tracekit.store.open import open_run as _open_run

    return _open_run(*run, options=opts, while_ingesting=while_ingesting)


def resolve_options(
    run, values: Mapping[str, Any], root=None, where: str = "tracekit"
) -> tuple[OpenOptions, AnalysisOptions]:
    """How to open RUN and what to analyse in it, from named values (a command's
    options, `tracekit.analyze()`'s keywords), [tool.tracekit] filled in (`root`: the
    run's root when already known, else found by discovery)."""
    from tracekit.ingest.discover import find_trace_files

    check_names(values, where)  # a typo fails before the folder is walked
    if root is None:
        root = find_trace_files([Path(p) for p in run])[0] if run else None
    return resolve(values, root, where)


def analyze(run, values: Mapping[str, Any], fmt: str, debug: bool = False):
    """(the report of RUN as `fmt`, the run's warnings) — what `tracekit analyze` prints.
    A text answer is read back when nothing it depends on changed since it was given (the
    answer cache, `tracekit.report.cache.answer_key`): no discovery, no tables; HTML
    reads the run, and --debug always computes."""
    from tracekit.report import cache

    root = cache.answer_root(run) if fmt != "html" and not debug else None
    opts, options = resolve_options(run, values, root)
    answer = None
    if root is not None:
        answer = cache.answer_stamp(root, {"open": asdict(opts), "analysis": options.key()})
    hit = cache.read_answer(answer.path) if answer and answer.may_hit() else None
    if hit:
        from tracekit.report.render import RENDERERS

        return RENDERERS[fmt](hit[0]), hit[1]
    # the report's modules are imported while the ingest's workers read, not before
    # (they are not the workers') nor after (the report waits for them)
    with open_run(run, opts, while_ingesting=load_analysis) as r:
        # the code's stamp hashed in before the analysis's code is imported and run (made
        # on the ingest's thread where there was one): an edit during the analysis must
        # not key this answer as the new code's
        answer_path = answer.path if answer else None
        from diagnosers import assemble
        from tracekit.report.render import RENDERERS

        rep = assemble.cached(r, options, debug=debug)
        text = _html_report(r, rep) if fmt == "html" else RENDERERS[fmt](rep)
    if answer_path is not None:
        cache.write_answer(answer_path, rep, r.warnings, text if fmt == "json" else None)
    return text, list(r.warnings)


def load_analysis() -> None:
    """Import what a report's analysis imports when it first needs it (numpy, the step
    model, the built-in rules, the renderers), stat the code for the report cache's
    stamp and make the run's DuckDB database: done on a
    thread while a cold ingest's workers read (`open_run`'s `while_ingesting`), the
    analysis after the ingest finds them done."""
    from tracekit.report.cache import code_stamp
    from tracekit.store.run import connect_ahead, load_before_threads

    code_stamp()  # the answer's key, when the run had no answers to read
    load_before_threads()  # numpy.ma, which the analysis's threads need loaded first
    connect_ahead()
    from diagnosers import assemble, impact  # noqa: F401
    from diagnosers.rules import builtin

    # the built-in rules only: a plugin's import is left to the main thread (one that
    # sets a signal handler fails elsewhere, and the registry would cache it broken)
    builtin()
    from tracekit.analysis import (  # noqa: F401
        dataloader,
        fusion,
        memory,
        regions,
        stragglers,
        topology,
        whatif_plan,
    )
    from tracekit.report import render  # noqa: F401
    from tracekit.stepmodel import model  # noqa: F401
    from tracekit.store import clocks, sandbox  # noqa: F401


def _html_report(r, rep) -> str:
    """The HTML report, each finding linked to its place in the Perfetto export."""
    from tracekit.report import export
    from tracekit.report.html import Link, to_html

    base = export.base_ns(r) if rep.full else 0
    links = [
        Link(export.perfetto_url(p, base), p.what) if p else None
        for p in (export.evidence(r, rep) if rep.full else [])
    ]
    timeline = export.memory_timeline(r) if rep.full else []
    return to_html(rep, links, export.how_to_open(), timeline)


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

    values = dict(steps=steps, select=select, ignore=ignore, ranks=ranks, sample_ranks=sample_ranks)
    opts, options = resolve_options([path], values)
    with open_run([path], opts) as r:
        return to_dict(assemble.cached(r, options))


def whatif_report(run, opts: OpenOptions, options: AnalysisOptions, changes):
    """(the typed what-if result, the closed run) of replaying `changes` on RUN — what
    `tracekit whatif` prints (and the MCP door's `whatif` returns)."""
    from diagnosers import assemble
    from diagnosers.context import Context
    from tracekit.analysis.whatif_plan import what_if
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


def whatif_text(out, fmt: str) -> str:
    """The what-if result as `tracekit whatif --format text|json` prints it."""
    if fmt == "json":
        import msgspec

        return msgspec.json.format(msgspec.json.encode(out), indent=2).decode() + "\n"
    from tracekit.report.render import whatif_lines

    return "\n".join(whatif_lines(out)) + "\n"


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
        *sides,
        th,
        alpha or cfg.alpha or 0.05,
        fail_on or cfg.fail_on or "regression",
        noise,
        strict,
    )


def gate_reports(run, steps, ranks, sample_ranks, select, ignore):
    """(a name per run, its report) for each of RUN (run folders, reports, baselines); a
    baseline given adds all its runs — what `baseline save|add` and `gate calibrate` read."""
    from tracekit.gate import baseline as gb

    names, reports = [], []
    for p in run:
        side = gb.load_side(p, lambda q: gate_report(q, steps, ranks, sample_ranks, select, ignore))
        for i, rep in enumerate(side.reports):
            names.append(p if side.runs == 1 else f"{p} run {i + 1}")
            reports.append(rep)
    return names, reports


def rows_text(names: list[str], rows: list[tuple], fmt: str, limit: int) -> str:
    """Query rows as `tracekit query --format table|csv|json` prints them."""
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(names)
        w.writerows(rows)
        return buf.getvalue()
    if fmt == "json":
        records = [dict(zip(names, r, strict=True)) for r in rows]
        return json.dumps(records, indent=1, default=str) + "\n"
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # query results are text: no markup, no :emoji:, no highlighting
    table = Table(box=None, header_style="bold")
    for n in names:
        table.add_column(Text(n))
    for r in rows[:limit]:
        table.add_row(*(Text("NULL" if v is None else str(v)) for v in r))
    buf = io.StringIO()
    Console(
        file=buf, width=200, color_system=None, markup=False, emoji=False, highlight=False
    ).print(table)
    more = ""
    if len(rows) > limit:
        more = f"… {len(rows) - limit} more rows (use --format csv for all)\n"
    return buf.getvalue() + more + f"({len(rows)} rows)\n"
