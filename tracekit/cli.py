"""The front door: `tracekit analyze | query | ingest | compare | baseline …`.

Exit codes: 0 success, 1 a gate failed, 2 bad input or usage (one line on stderr,
no traceback unless `--debug`).
"""

from __future__ import annotations

import csv
import io
import json
import sys
import traceback
from pathlib import Path

import click

from tracekit import __version__
from tracekit.errors import TracekitError

EXIT_BAD_INPUT = 2


class _Group(click.Group):
    """Turns every error into one line and exit code 2 (traceback with --debug)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except TracekitError as exc:
            _fail(ctx, str(exc), exc)
        except KeyboardInterrupt:
            click.echo("tracekit: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            ctx.exit(0)
        except Exception as exc:  # a bug, or a trace shape we have not met: still one line
            _fail(
                ctx,
                f"internal error ({type(exc).__name__}: {exc}); rerun with --debug and "
                "report the traceback",
                exc,
            )


def _fail(ctx: click.Context, message: str, exc: BaseException) -> None:
    if ctx.obj and ctx.obj.get("debug"):
        traceback.print_exception(exc)
    click.echo(f"tracekit: {message}", err=True)
    ctx.exit(EXIT_BAD_INPUT)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Analyze PyTorch profiler (Kineto) traces of distributed training runs.

    RUN is a folder with one trace per rank (*.json or *.json.gz), or trace files.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


_run_arg = click.argument("run", nargs=-1, required=True, type=click.Path())
_workers = click.option(
    "--workers", type=click.IntRange(1), default=None, help="Ingest processes (default: cores)."
)


@main.command()
@_run_arg
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="Report format.",
)
@click.option(
    "--window",
    type=click.Choice(["steps", "trace", "hta"]),
    default="steps",
    show_default=True,
    help="Analysed window: ProfilerStep spans, first-to-last device event, or HTA's window.",
)
@click.option("--steps", default=None, help="ProfilerSteps to analyse: all, N or A-B.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here.")
@click.option("--breakdown-only", is_flag=True, help="Only the per-rank table; no diagnosers.")
@click.option("--peak-tflops", type=float, help="Override the device's peak TFLOP/s.")
@click.option(
    "--busbw-GBps",
    "busbw_gbps",
    type=float,
    help="Override the realistic in-node bus bandwidth, GB/s.",
)
@click.option(
    "--device-memory-GB",
    "device_memory_gb",
    type=float,
    help="Override the device memory capacity, GB.",
)
@click.option("--latency-us", type=float, help="Override the per-collective latency α, µs.")
@_workers
@click.pass_context
def analyze(
    ctx,
    run,
    fmt,
    window,
    steps,
    output,
    breakdown_only,
    peak_tflops,
    busbw_gbps,
    device_memory_gb,
    latency_us,
    workers,
):
    """Walk memory → compute → communication → scaling: each figure measured beside its
    prediction, then the findings, ordered by the time a fix would win per step."""
    from tracekit import report
    from tracekit.store import open_run

    with open_run(*run, workers=workers) as r:
        if breakdown_only:
            rep = report.build(r, window=window, steps=steps)
        else:
            from diagnosers import Overrides
            from diagnosers.report import full_report

            ov = Overrides(
                peak_tflops=peak_tflops,
                busbw_GBps=busbw_gbps,
                device_memory_GB=device_memory_gb,
                latency_us=latency_us,
            )
            rep = full_report(
                r,
                window=window,
                steps=steps,
                overrides=ov,
                debug=bool(ctx.obj and ctx.obj.get("debug")),
            )
    _emit(report.RENDERERS[fmt](rep), output)


@main.command()
@click.argument("code", required=False)
def explain(code):
    """Explain a finding: tracekit explain TK-N301 (or a kind, or a name); no CODE lists all."""
    from diagnosers.findings import KINDS, lookup

    if not code:
        for k in KINDS.values():
            click.echo(f"{k.code}  {k.kind:32} {k.name:32} {k.status}")
        return
    kind = lookup(code)
    if kind is None:
        raise TracekitError(f"no finding {code!r}; `tracekit explain` lists them")
    click.echo(kind.explain())


@main.command()
@_run_arg
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
@click.option("--limit", type=int, default=200, show_default=True, help="Rows shown as a table.")
@_workers
def query(run, query, fmt, describe, views, limit, workers):
    """Read-only SQL over the run's views: tracekit query RUN --sql "SELECT …".

    Without --sql, a last argument that is not a file or folder is the query.
    """
    from tracekit.store import docs, open_run

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
    with open_run(*run, workers=workers) as r:
        if describe:
            d = docs().get(describe, None)
            rows = r.describe(describe)
            if d:
                click.echo(f"{describe} ({d.what}): {d.summary}\n")
            width = max(len(c) for c, _, _ in rows)
            for col, typ, doc in rows:
                click.echo(f"  {col:{width}}  {typ:12}  {doc}")
            return
        rel = r.readonly_sql(query)
        names = rel.columns
        rows = rel.fetchall()
    _emit(_render_rows(names, rows, fmt, limit), None)


def _is_path(text: str) -> bool:
    try:
        return Path(text).exists()
    except OSError:  # e.g. a name too long to be a file: it is the query
        return False


def _render_rows(names: list[str], rows: list[tuple], fmt: str, limit: int) -> str:
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

    table = Table(box=None, header_style="bold")
    for n in names:
        table.add_column(n)
    for r in rows[:limit]:
        table.add_row(*("NULL" if v is None else str(v) for v in r))
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(table)
    more = ""
    if len(rows) > limit:
        more = f"… {len(rows) - limit} more rows (use --format csv for all)\n"
    return buf.getvalue() + more + f"({len(rows)} rows)\n"


@main.command()
@_run_arg
@_workers
def ingest(run, workers):
    """Ingest (or refresh) the Parquet cache of a run and print what it holds."""
    from tracekit.store import open_run

    with open_run(*run, workers=workers) as r:
        rows = r.sql(
            "SELECT rank, rank_source, event_count, backend, coalesce(device_name, 'cpu'), "
            "(SELECT count(*) FROM steps s WHERE s.rank = i.rank), "
            "(SELECT count(*) FROM collectives c WHERE c.rank = i.rank), source "
            "FROM rank_info i ORDER BY rank"
        ).fetchall()
        click.echo(f"cache {r.cache_dir}")
        for rank, src, n, be, dev, st, co, path in rows:
            click.echo(
                f"rank {rank:>4} ({src}): {n:>8,} events · {st} steps · {co} collectives · "
                f"{be or '—'} · {dev} · {path}"
            )


@main.group()
def baseline():
    """Baselines for `tracekit compare`: a run's metrics and per-step samples, no traces."""


@baseline.command("save")
@click.argument("run", type=click.Path(exists=True))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Write here.")
@click.option("--steps", default=None, help="ProfilerSteps of a run folder: all, N or A-B.")
def baseline_save(run, output, steps):
    """Save RUN (a run folder or an `analyze --format json` report) as a baseline FILE."""
    from tracekit.gate import baseline as gb

    side = gb.load_side(run, lambda p: _gate_report(p, steps))
    gb.write_json(gb.make_baseline(side.report), output)
    s = side.report["samples"]
    click.echo(f"baseline of {len(s['ranks'])} ranks × {len(s['steps'])} steps → {output}")


@main.command()
@click.argument("base", type=click.Path())
@click.argument("new", type=click.Path())
@click.option("--max-regression", default=None, help="Thresholds: step_time=5%,exposed_comm=2pt")
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
    type=click.Choice(["text", "json", "markdown", "junit"]),
    default="text",
    show_default=True,
)
@click.option("--steps", default=None, help="ProfilerSteps of run folders: all, N or A-B.")
@click.option("--all", "everything", is_flag=True, help="Show every metric, moved or not.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result here.")
@click.pass_context
def compare(ctx, base, new, max_regression, fail_on, alpha, config, fmt, steps, everything,
            output):  # fmt: skip
    """Gate NEW against BASE (each a run folder, baseline or JSON report): exit 1 when a
    metric regressed beyond its threshold and the per-step samples agree."""
    from tracekit.gate import baseline as gb
    from tracekit.gate import config as gc
    from tracekit.gate.compare import run_compare
    from tracekit.gate.metrics import parse_spec
    from tracekit.gate.render import RENDERERS

    cfg = gc.load(config)
    th = {**cfg.thresholds, **parse_spec(max_regression)}
    seen: dict[Path, dict] = {}  # a run compared with itself is analysed once

    def analyze(p: str) -> dict:
        key = Path(p).resolve()
        if key not in seen:
            seen[key] = _gate_report(p, steps)
        return seen[key]

    sides = [gb.load_side(p, analyze) for p in (base, new)]
    cmp = run_compare(
        *sides, th, alpha or cfg.alpha or 0.05, fail_on or cfg.fail_on or "regression"
    )
    _emit(RENDERERS[fmt](cmp, everything) if fmt == "text" else RENDERERS[fmt](cmp), output)
    ctx.exit(cmp.exit_code)


def _gate_report(path: str, steps: str | None) -> dict:
    from diagnosers.report import full_report
    from tracekit.store import open_run

    with open_run(path) as r:
        return full_report(r, steps=steps)


def _job_options(func):
    """One --option per JobConfig field; the field docs are the help."""
    from dataclasses import MISSING, fields

    from instrument.config import JobConfig

    for f in reversed(fields(JobConfig)):
        if f.name in ("job", "world_size", "out"):
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not MISSING else None
        if isinstance(default, bool):
            func = click.option(
                f"{flag}/--no-{flag[2:]}",
                default=default,
                show_default=True,
                help=f.metadata["doc"],
            )(func)
        else:
            func = click.option(
                flag, type=type(default), default=default, show_default=True, help=f.metadata["doc"]
            )(func)
    return func


def _run_command():
    from importlib.util import find_spec

    if find_spec("torch") is None:  # checked without importing torch (0.9 s)
        return None

    @main.command("run")
    @click.argument("job", type=click.Choice(["ddp", "fsdp", "tp", "pp", "moe", "hybrid"]))
    @click.option(
        "--world-size",
        "-n",
        type=click.IntRange(1),
        default=2,
        show_default=True,
        help="Ranks, one process each (gloo on CPU; NCCL, one GPU each, on CUDA).",
    )
    @click.option(
        "--out",
        "-o",
        required=True,
        type=click.Path(file_okay=False),
        help="Run folder to write: rank-<r>.json.gz per rank and job.json.",
    )
    @_job_options
    def run(job, world_size, out, **options):
        """Run a reference job with the profiler on: traces per rank + job.json."""
        from instrument.config import JobConfig
        from instrument.launch import run_job

        cfg = JobConfig(job=job, world_size=world_size, out=out, **options)
        path = run_job(cfg)
        click.echo(f"wrote {cfg.world_size} traces and job.json to {path}")

    return run


def _emit(text: str, output: str | None) -> None:
    if output:
        import os
        import tempfile

        dest = Path(output)
        fd, tmp = tempfile.mkstemp(dir=dest.parent or ".", prefix=f".{dest.name}.")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, dest)
    else:
        sys.stdout.write(text)


_run_command()  # `tracekit run` exists where torch is installed (the `jobs` extra)

if __name__ == "__main__":
    main()
