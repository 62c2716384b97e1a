"""`tracekit whatif RUN --change C`: replay the step model with changes."""

from __future__ import annotations

import click

from tracekit import commands
from tracekit.cli import params as P
from tracekit.cli.output import emit, warn


@click.command()
@P.run_arg
@click.option(
    "--change",
    "changes",
    multiple=True,
    required=True,
    metavar="C",
    help="A change to replay (repeatable, combined): overlap:NAME, bandwidth:NAME=GBPS, "
    "no-straggler, no-host-gaps, no-input-wait, compute-speed=F, fuse=F, microbatches=M, "
    "interleave=V.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@P.window_options
@P.rank_options
@P.workers
@P.comm_kernel
@P.health_options
def whatif(run, changes, fmt, **values):
    """Replay the run's step model with changes: the step they predict, what they save,
    and the critical path after them (docs/step-model.md)."""
    opts, options = commands.resolve_options(run, values)
    out, r = commands.whatif_report(run, opts, options, changes)
    emit(commands.whatif_text(out, fmt), None)
    warn(r.warnings)
