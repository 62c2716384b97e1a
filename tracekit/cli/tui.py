"""`tracekit tui RUN`: the Textual app; a bad path, rank spec, rule or stored report
(`--report`) fails here, in one line, before the screen opens."""

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
@click.option(
    "--report",
    "report_path",
    default=None,
    metavar="FILE",
    help="Show this stored report of the run (tracekit analyze RUN --format json) "
    "instead of computing it; one that does not decode against this version's schema "
    "fails in one line.",
)
def tui(run, report_path=None, **values):
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
    from tui.session import read_report

    report = read_report(report_path) if report_path is not None else None  # and a report
    from tui.app import run_app

    code = run_app(list(run), options=options, open_options=opts, report=report)
    if code:
        sys.exit(code)
