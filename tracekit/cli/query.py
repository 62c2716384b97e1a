"""`tracekit query RUN --sql "SELECT …"`: read-only SQL over the run's views, and the
views' docs."""

from __future__ import annotations

from pathlib import Path

import click

from tracekit import commands
from tracekit.cli import params as P
from tracekit.cli.output import emit, warn
from tracekit.errors import TracekitError
from tracekit.options import open_options


@click.command()
@P.run_arg
@click.option("--sql", "-s", "query", default=None, help="The SELECT to run.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.option("--describe", "describe", default=None, metavar="VIEW", help="Document a view.")
@click.option("--views", is_flag=True, help="List the tables and views.")
@click.option(
    "--limit", type=click.IntRange(0), default=200, show_default=True, help="Rows shown as a table."
)
@P.sql_bounds
@P.rank_options
@P.workers
@P.comm_kernel
@P.health_options
def query(run, query, fmt, describe, views, limit, memory, timeout, **values):
    """Read-only SQL over the run's views: tracekit query RUN --sql "SELECT …".

    Without --sql, a last argument that is not a file or folder is the query.
    """
    from tracekit.sql import docs

    run = list(run)
    # `tracekit query RUN "SELECT …"`: a last argument that is no file is the query
    if query is None and len(run) >= 2 and not _is_path(run[-1]):
        query = run.pop()
    if not run:
        raise TracekitError("pass a run folder or trace files before the query")
    if views:
        for name, d in sorted(docs().items()):
            click.echo(f"{name:22} {d.what:5}  {d.summary}")
        return
    if describe is None and query is None:
        raise TracekitError('nothing to do: pass --sql "SELECT …", --describe VIEW or --views')
    bounds = P.bounds(memory, timeout)
    with commands.open_run(run, open_options(values)) as r:
        if describe:
            d = docs().get(describe, None)
            rows = r.describe(describe)
            if d:
                click.echo(f"{describe} ({d.what}): {d.summary}\n")
            width = max(len(c) for c, _, _ in rows)
            for col, typ, doc in rows:
                click.echo(f"  {col:{width}}  {typ:12}  {doc}")
            warn(r.warnings)
            return
        rel = r.readonly_sql(query, bounds)
        names = rel.columns
        rows = rel.fetchall()
    emit(commands.rows_text(names, rows, fmt, limit), None)
    warn(r.warnings)


def _is_path(text: str) -> bool:
    try:
        return Path(text).exists()
    except OSError:  # e.g. a name too long to be a file: it is the query
        return False
