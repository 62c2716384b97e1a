"""`tracekit tui RUN`: the Textual app; a bad path, rank spec or rule fails here, in one
line, before the screen opens."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracekit import commands
from tracekit.cli import params as P
from tracekit.errors import TracekitError


@click.command()
@P.run_arg
@P.window_options
@P.override_options
@P.rule_options
@P.rank_options
@P.workers
@P.comm_kernel
@P.health_options
def tui(run, **values):
    """Interactive drill-down in the terminal: overview, ranks, timeline, collectives,
    ops, memory, SQL."""
    from importlib.util import find_spec

    from tracekit.ingest.discover import find_trace_files

    if find_spec("textual") is None:
        raise TracekitError("tracekit tui needs textual: pip install 'tracekit-torch[tui]'")
    if values["ranks"] is not None or values["sample_ranks"] is not None:
        from tracekit.ingest.ranksel import Request

        Request.make(values["ranks"], values["sample_ranks"])  # a bad spec fails here
    root = find_trace_files([Path(p) for p in run])[0]  # so does a bad path
    from diagnosers.rules import selected

    opts, options = commands.resolve_options(run, values, root)
    selected(options.select, options.ignore)  # an unknown rule fails before the screen
    from tui.app import run_app

    code = run_app(list(run), options=options, open_options=opts)
    if code:
        sys.exit(code)
