"""The CI gate's commands: `tracekit compare BASE NEW`, `tracekit baseline save|add` and
`tracekit gate calibrate` — the judging lives in `tracekit.gate`, the reports come from
`tracekit.commands`."""

from __future__ import annotations

import json

import click

from tracekit.cli import params as P
from tracekit.cli.output import emit
from tracekit.commands import gate_compare, gate_reports


@click.group()
def baseline():
    """Baselines for `tracekit compare`: a run's metrics and per-step samples, no traces."""


@baseline.command("save")
@click.argument("run", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Write here.")
@click.option("--steps", default=None, help="ProfilerSteps of a run folder: all, N or A-B.")
@P.rule_options
@P.rank_options
def baseline_save(run, output, steps, select, ignore, ranks, sample_ranks):
    """Save RUN [RUN …] (run folders, `analyze --format json` reports or baselines) as
    one baseline FILE, each run's figures and per-step samples kept apart."""
    from tracekit.gate import baseline as gb

    names, reports = gate_reports(run, steps, ranks, sample_ranks, select, ignore)
    gb.write_json(gb.make_baseline(reports, names), output)
    _baseline_said(reports, output)


@baseline.command("add")
@click.argument("baseline_file", metavar="BASELINE", type=click.Path(exists=True, dir_okay=False))
@click.argument("run", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--steps", default=None, help="ProfilerSteps of a run folder: all, N or A-B.")
@P.rule_options
@P.rank_options
def baseline_add(baseline_file, run, steps, select, ignore, ranks, sample_ranks):
    """Add RUN [RUN …] to the BASELINE file (a CI job on main that grows it)."""
    from tracekit.gate import baseline as gb

    doc = gb.read_baseline(baseline_file)
    names, reports = gate_reports(run, steps, ranks, sample_ranks, select, ignore)
    out = gb.add_runs(doc, reports, names)
    gb.write_json(out, baseline_file)
    _baseline_said(out["runs"], baseline_file)


def _baseline_said(reports, output):
    s = reports[-1]["samples"]
    sel = (reports[-1].get("run") or {}).get("rank_selection")
    chosen = f" ({sel['option']} {sel['spec']}, of {sel['of']})" if sel else ""
    runs = f"{len(reports)} run{'s' if len(reports) > 1 else ''}"
    click.echo(
        f"baseline of {runs}, {len(s['ranks'])} ranks{chosen} × {len(s['steps'])} steps → {output}"
    )


@click.command()
@click.argument("base", type=click.Path())
@click.argument("new", type=click.Path())
@click.option(
    "--base",
    "more_base",
    multiple=True,
    type=click.Path(),
    help="Another run (or report, baseline) of the base side; repeat it.",
)
@click.option(
    "--new",
    "more_new",
    multiple=True,
    type=click.Path(),
    help="Another run (or report, baseline) of the new side; repeat it.",
)
@click.option("--max-regression", default=None, help="Thresholds: step_time=5%,exposed_comm=2pt")
@click.option(
    "--run-noise",
    default=None,
    help="Prior run-to-run sd, one run a side: step_time=4%,exposed_comm=3pt",
)
@click.option(
    "--fail-on",
    type=click.Choice(["regression", "inconclusive"]),
    default=None,
    help="Also fail on inconclusive verdicts.  [default: regression]",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=None,
    help="Significance level of the per-step test.  [default: 0.05]",
)
@click.option("--config", type=click.Path(dir_okay=False), help="pyproject.toml to read.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "junit", "html"]),
    default="text",
    show_default=True,
)
@click.option("--steps", default=None, help="ProfilerSteps of run folders: all, N or A-B.")
@P.rule_options
@P.rank_options
@click.option("--all", "everything", is_flag=True, help="Show every metric, moved or not.")
@click.option(
    "--strict",
    is_flag=True,
    help="One run a side: fail on a drill-down metric (per rank, collective, kernel) that "
    "regressed, as on a headline one, instead of warning.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result here.")
@click.pass_context
def compare(ctx, base, new, more_base, more_new, max_regression, run_noise, fail_on, alpha,
            config, fmt, steps, select, ignore, ranks, sample_ranks, everything, strict,
            output):  # fmt: skip
    """Gate NEW against BASE (each a run folder, baseline or JSON report; --base/--new add
    runs to a side): exit 1 when a metric regressed beyond its threshold and beyond the
    run-to-run noise — measured between runs where a side has several, else a stated
    prior — and, one run a side, the per-step samples agree."""
    from tracekit.gate.render import RENDERERS

    cmp = gate_compare((base, *more_base), (new, *more_new), max_regression, run_noise,
                       fail_on, alpha, config, steps, select, ignore, ranks,
                       sample_ranks, strict)  # fmt: skip
    if fmt == "html":
        from tracekit.gate.html import to_html

        RENDERERS = {**RENDERERS, "html": to_html}
    emit(RENDERERS[fmt](cmp, everything) if fmt == "text" else RENDERERS[fmt](cmp), output)
    ctx.exit(cmp.exit_code)


@click.group("gate")
def gate_group():
    """The CI gate's tools (compare and baseline are commands of their own)."""


@gate_group.command("calibrate")
@click.argument("run", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--false-fail",
    type=click.FloatRange(0, 0.5, min_open=True),
    default=0.01,
    show_default=True,
    help="Target share of false failures per comparison (0.01 = 1%).",
)
@click.option(
    "--catch",
    "catch_spec",
    default=None,
    help="Regression to catch per metric: step_time=20%,exposed_comm=5pt  [default: 20%, 5pt]",
)
@click.option(
    "--baseline-runs",
    type=click.IntRange(2, 100),
    default=None,
    help="Runs in the CI baseline.  [default: the runs given − 1]",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Significance level of the gate's test.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)  # fmt: skip
@click.option("--steps", default=None, help="ProfilerSteps of run folders: all, N or A-B.")
@P.rule_options
@P.rank_options
def gate_calibrate(run, false_fail, catch_spec, baseline_runs, alpha, fmt, steps, select, ignore,
                   ranks, sample_ranks):  # fmt: skip
    """From RUN RUN [RUN …] — repeated runs of one job, same code and options (run
    folders, reports or baselines) — print each gated metric's run-to-run spread and the
    thresholds that keep false failures under --false-fail while catching --catch."""
    from tracekit.gate import calibrate as gcal
    from tracekit.gate.metrics import parse_spec

    _, reports = gate_reports(run, steps, ranks, sample_ranks, select, ignore)
    n = baseline_runs or max(len(reports) - 1, 2)
    rows = gcal.spreads(reports, false_fail, parse_spec(catch_spec, "--catch"), n, alpha)
    if fmt == "json":
        doc = {
            "runs": len(reports),
            "baseline_runs": n,
            "false_fail_target": false_fail,
            "alpha": alpha,
            "metrics": [r.to_dict() for r in rows],
        }
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(gcal.to_text(rows, len(reports), n, false_fail, alpha), nl=False)
