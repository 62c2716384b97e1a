"""`tracekit analyze RUN`: the report, as text, JSON, Markdown or one HTML page."""

from __future__ import annotations

import click

from tracekit import commands
from tracekit.cli import params as P
from tracekit.cli.oneshot import collector_off
from tracekit.cli.output import check_output, emit, warn


@click.command()
@P.run_arg
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "html"]),
    default="text",
    show_default=True,
    help="Report format (html: one self-contained page with charts).",
)
@P.window_options
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here.")
@click.option("--breakdown-only", is_flag=True, help="Only the per-rank table; no diagnosers.")
@P.override_options
@P.rule_options
@P.rank_options
@P.workers
@P.cluster
@P.comm_kernel
@P.health_options
@click.pass_context
def analyze(ctx, run, fmt, output, breakdown_only, **values):
    """Walk memory → compute → communication → scaling: each figure measured beside its
    prediction, then the findings, ordered by the time a fix would win per step."""
    check_output(output)
    debug = bool(ctx.obj and ctx.obj.get("debug"))
    values["levels"] = not breakdown_only
    with collector_off():  # one recompute, then exit
        text, warnings = commands.analyze(run, values, fmt, debug)
    emit(text, output)
    warn(warnings)
