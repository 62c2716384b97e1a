"""`tracekit export RUN -o FILE`: the run as one trace for Perfetto, with tracekit's
tracks, and each finding's link."""

from __future__ import annotations

from pathlib import Path

import click

from tracekit import commands
from tracekit.cli import params as P
from tracekit.cli.output import check_output, warn


@click.command()
@P.run_arg
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="The merged trace to write (gzip when it ends in .gz).",
)
@click.option(
    "--serve",
    is_flag=True,
    help="Then serve it on 127.0.0.1:9001 for ui.perfetto.dev (the findings' links load it) "
    "until Ctrl-C.",
)
@P.rule_options
@P.rank_options
@P.workers
@P.comm_kernel
@P.health_options
def export(run, output, serve, **values):
    """Write RUN as one Chrome-JSON trace for Perfetto: every rank's events on one clock,
    a process per rank, and tracekit's tracks (findings, exposed communication, steps,
    the critical path); prints each finding's Perfetto link."""
    from diagnosers import assemble
    from tracekit.report import export as ex

    check_output(output)
    opts, options = commands.resolve_options(run, values)
    with commands.open_run(run, opts) as r:
        rep = assemble.cached(r, options)
        n = ex.write_trace(r, rep, Path(output))
        base, places = ex.base_ns(r), ex.evidence(r, rep)
    click.echo(f"wrote {n:,} events of {len(r.ranks)} ranks to {output}")
    for f, p in zip(rep.findings or [], places, strict=True):
        if p:
            click.echo(f"{f.code} {f.title}\n  {ex.perfetto_url(p, base)}")
    warn(r.warnings)
    if serve:
        click.echo(f"serving {output} on http://127.0.0.1:{ex.SERVE_PORT}/ for "
                   "ui.perfetto.dev; Ctrl-C stops")  # fmt: skip
        ex.serve(Path(output))
