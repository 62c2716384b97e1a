"""`tracekit ingest RUN`: fill (or refresh) the Parquet cache and say what it holds."""

from __future__ import annotations

import click

from tracekit import commands
from tracekit.cli import params as P
from tracekit.cli.output import warn
from tracekit.options import open_options


@click.command()
@P.run_arg
@P.rank_options
@P.workers
@P.cluster
@P.comm_kernel
@P.health_options
def ingest(run, **values):
    """Ingest (or refresh) the Parquet cache of a run and print what it holds."""
    with commands.open_run(run, open_options(values)) as r:
        from tracekit import sql

        rows = r.sql(sql.query("report.run_info", "ingest_listing")).fetchall()
        click.echo(f"cache {r.cache_dir}")
        for rank, src, n, be, dev, st, co, path in rows:
            click.echo(
                f"rank {rank:>4} ({src}): {n:>8,} events · {st} steps · {co} collectives · "
                f"{be or '—'} · {dev} · {path}"
            )
        if r.rank_selection:
            from tracekit.report.render import selection_line

            click.echo(selection_line(r.rank_selection.to_dict()))
    warn(r.warnings)
