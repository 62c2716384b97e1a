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

from tracekit.commands import analysis as _analysis
from tracekit.commands import gate_compare, whatif_report
from tracekit.commands import gate_report as _gate_report
from tracekit.errors import ExitCode, TracekitError
from tracekit.options import AnalysisOptions, OpenOptions
from tracekit.version import __version__


class _Group(click.Group):
    """Turns every error into one line and exit code 2 (traceback with --debug)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a bad option value: one line too
            where = exc.ctx.command_path if exc.ctx else "tracekit"
            _fail(ctx, f"{exc.format_message()} (see {where} --help)", exc)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except TracekitError as exc:
            _fail(ctx, str(exc), exc)
        except KeyboardInterrupt:
            click.echo("tracekit: interrupted", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except BrokenPipeError:
            ctx.exit(ExitCode.OK)
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
    ctx.exit(ExitCode.BAD_INPUT)


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


class _Positive(click.ParamType):
    """A finite number > 0 (click's FloatRange lets nan and inf through)."""

    name = "number>0"

    def convert(self, value, param, ctx):
        import math

        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x) or x <= 0:
            self.fail(f"{value!r} must be a finite number > 0", param, ctx)
        return x


POSITIVE = _Positive()


def _health_options(func):
    """--strict and --allow-mixed, for every command that opens a run."""
    func = click.option(
        "--allow-mixed",
        is_flag=True,
        help="Analyze traces that look like different runs (world sizes, start times, "
        "one trace twice) together instead of stopping.",
    )(func)
    return click.option(
        "--strict",
        is_flag=True,
        help="Exit 2 when a trace is unreadable, a rank is missing or events were skipped, "
        "instead of warning and analyzing the rest.",
    )(func)


def _rank_options(func):
    """--ranks and --sample-ranks, for every command that opens a run folder: only the
    traces of those ranks are read (`tracekit.ingest.ranksel`)."""
    func = click.option(
        "--sample-ranks",
        "sample_ranks",
        type=click.IntRange(1),
        default=None,
        metavar="N",
        help="Analyse N ranks spread evenly over the run (the first, the last, the rest "
        "evenly spaced); the other traces are not read. A first look at a huge run.",
    )(func)
    return click.option(
        "--ranks",
        "ranks",
        default=None,
        metavar="SPEC",
        help="Analyse only these global ranks, e.g. 0-7,64,100-103; the other traces are not read.",
    )(func)


def _open(run, opts: OpenOptions):
    """Open the run; its warnings wait for `_warn`, so a failing command says one line."""
    from tracekit.store.open import open_run

    return open_run(*run, options=opts)


def _warn(r) -> None:
    """The run's warnings (unreadable files, missing ranks, skipped events) on stderr,
    one line each, once the command has done its work."""
    for w in r.warnings:
        click.echo(f"tracekit: warning: {w}", err=True)


def _check_output(output: str | None) -> None:
    """-o FILE: its folder must exist and take a file — tried now, not after the analysis."""
    if not output:
        return
    import tempfile

    dest = Path(output)
    folder = dest.parent
    if not folder.is_dir():
        raise TracekitError(
            f"-o {output}: folder {folder} does not exist; create it or pick another path"
        )
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{dest.name}.", suffix=".tmp"):
            pass
    except OSError as exc:
        raise TracekitError(
            f"-o {output}: cannot write in {folder} ({exc.strerror or exc}); pick another path"
        ) from exc


_workers = click.option(
    "--workers", type=click.IntRange(1), default=None, help="Ingest processes (default: cores)."
)
_cluster = click.option(
    "--cluster",
    metavar="ADDRESS",
    default=None,
    help="Ingest the ranks on a Dask cluster: a scheduler address (tcp://host:8786) or "
    "local[:N] for N local worker processes; workers must see the run at the same path "
    "(pip install 'tracekit-torch[cluster]').",
)
_comm_kernel = click.option(
    "--comm-kernel",
    "comm_kernels",
    multiple=True,
    metavar="REGEX",
    help="Also count kernels matching REGEX (Python re, searched in the name) as "
    "communication; repeatable; adds to job.json / pyproject.toml comm_kernels.",
)


_OVERRIDES = (
    click.option(
        "--peak-tflops", "peak_tflops", type=POSITIVE, help="Override the device's peak TFLOP/s."
    ),
    click.option(
        "--busbw-GBps",
        "busbw_GBps",
        type=POSITIVE,
        help="Override the realistic in-node bus bandwidth, GB/s.",
    ),
    click.option(
        "--device-memory-GB",
        "device_memory_GB",
        type=POSITIVE,
        help="Override the device memory capacity, GB.",
    ),
    click.option(
        "--latency-us",
        "latency_us",
        type=POSITIVE,
        help="Override the per-collective latency α, µs.",
    ),
    click.option(
        "--gpus-per-node",
        "gpus_per_node",
        type=click.IntRange(min=1),
        help="Ranks per node (node = rank // N); decides in-node vs inter-node bandwidth.",
    ),
)


def _window_options(func):
    """--window and --steps: what `analyze` and `tui` analyse."""
    func = click.option("--steps", default=None, help="ProfilerSteps to analyse: all, N or A-B.")(
        func
    )
    return click.option(
        "--window",
        type=click.Choice(["steps", "trace", "hta"]),
        default="steps",
        show_default=True,
        help="Analysed window: ProfilerStep spans, first-to-last device event, or HTA's window.",
    )(func)


def _rule_options(func):
    """--select and --ignore: which rules run (codes, prefixes, kinds or names)."""
    func = click.option(
        "--ignore",
        "ignore",
        multiple=True,
        metavar="CODE",
        help="Leave out these rules (codes like TK-N301, prefixes like TK-N, kinds or "
        "names; comma-separated or repeated); default: [tool.tracekit] ignore.",
    )(func)
    return click.option(
        "--select",
        "select",
        multiple=True,
        metavar="CODE",
        help="Run only these rules (codes, prefixes, kinds or names); default: all, or "
        "[tool.tracekit] select.",
    )(func)


def _override_options(func):
    """The figures a user may state instead of the tables (diagnosers.Overrides), for every
    command that builds the report."""
    for option in reversed(_OVERRIDES):
        func = option(func)
    return func


@main.command()
@_run_arg
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "html"]),
    default="text",
    show_default=True,
    help="Report format (html: one self-contained page with charts).",
)
@_window_options
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here.")
@click.option("--breakdown-only", is_flag=True, help="Only the per-rank table; no diagnosers.")
@_override_options
@_rule_options
@_rank_options
@_workers
@_cluster
@_comm_kernel
@_health_options
@click.pass_context
def analyze(
    ctx,
    run,
    fmt,
    window,
    steps,
    output,
    breakdown_only,
    select,
    ignore,
    ranks,
    sample_ranks,
    workers,
    cluster,
    comm_kernels,
    strict,
    allow_mixed,
    **overrides,
):
    """Walk memory → compute → communication → scaling: each figure measured beside its
    prediction, then the findings, ordered by the time a fix would win per step."""
    from tracekit.report import cache
    from tracekit.report.render import RENDERERS

    _check_output(output)
    debug = bool(ctx.obj and ctx.obj.get("debug"))
    root = cache.answer_root(run) if fmt != "html" and not debug else None
    options = _analysis(run, window, steps, overrides, select, ignore, not breakdown_only, root)
    opts = OpenOptions(workers, comm_kernels, strict, allow_mixed, cluster, ranks, sample_ranks)
    answer = _answer_file(root, opts, options)
    hit = cache.read_answer(answer) if answer else None
    if hit:  # nothing changed since this answer was given: no discovery, no tables
        _emit(RENDERERS[fmt](hit[0]), output)
        for w in hit[1]:
            click.echo(f"tracekit: warning: {w}", err=True)
        return
    from diagnosers import assemble

    with _open(run, opts) as r:
        rep = assemble.cached(r, options, debug=debug)
        text = _html_report(r, rep) if fmt == "html" else RENDERERS[fmt](rep)
    _emit(text, output)
    _warn(r)
    if answer:
        cache.write_answer(answer, rep, r.warnings)


def _answer_file(root, opts: OpenOptions, options: AnalysisOptions):
    """Where `analyze`'s answer for these options is kept (`tracekit.report.cache`), or
    None when it must take the normal path."""
    from dataclasses import asdict

    from tracekit.report import cache

    if root is None:
        return None
    return cache.answer_key(root, {"open": asdict(opts), "analysis": options.key()})


def _html_report(r, rep) -> str:
    """The HTML report, each finding linked to its place in the Perfetto export."""
    from tracekit.report import export
    from tracekit.report.html import Link, to_html
    from tracekit.report.schema import to_dict

    base = export.base_ns(r) if rep.full else 0
    links = [
        Link(export.perfetto_url(p, base), p.what) if p else None
        for p in (export.evidence(r, rep) if rep.full else [])
    ]
    data = to_dict(rep)
    data["memory_timeline"] = export.memory_timeline(r) if rep.full else []
    return to_html(rep, links, export.how_to_open(), data)


@main.command()
@click.argument("code", required=False)
def explain(code):
    """Explain a finding: tracekit explain TK-N301 (or a kind, or a name); no CODE lists all."""
    from diagnosers.rules import lookup, registry

    if not code:
        for k in registry():
            click.echo(f"{k.code}  {k.kind:32} {k.name:32} {k.status}")
        return
    rule = lookup(code)
    if rule is None:
        raise TracekitError(f"no finding {code!r}; `tracekit explain` lists them")
    click.echo(rule.explain())


@main.command()
def schema():
    """Print the JSON Schema of the report (`analyze --format json`)."""
    from tracekit.report.schema import json_schema

    click.echo(json.dumps(json_schema(), indent=2, ensure_ascii=False))


def _sql_bounds(func):
    """--memory and --timeout: what one user query may use (`tracekit.store.sandbox.Bounds`)."""
    func = click.option(
        "--timeout",
        type=POSITIVE,
        default=None,
        metavar="SECONDS",
        help="Stop a query after this long.  [default: 120]",
    )(func)
    return click.option(
        "--memory",
        default=None,
        metavar="SIZE",
        help="Memory a query may use: 500MB, 4GB or a share of this machine like 10%.  "
        "[default: 25%]",
    )(func)


def _bounds(memory: str | None, timeout: float | None):
    from tracekit.store.sandbox import TIMEOUT_S, Bounds

    return Bounds.of(memory, TIMEOUT_S if timeout is None else timeout)


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
@click.option(
    "--limit", type=click.IntRange(0), default=200, show_default=True, help="Rows shown as a table."
)
@_sql_bounds
@_rank_options
@_workers
@_comm_kernel
@_health_options
def query(run, query, fmt, describe, views, limit, memory, timeout, ranks, sample_ranks, workers,
          comm_kernels, strict, allow_mixed):  # fmt: skip
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
    bounds = _bounds(memory, timeout)
    opts = OpenOptions(workers, comm_kernels, strict, allow_mixed, None, ranks, sample_ranks)
    with _open(run, opts) as r:
        if describe:
            d = docs().get(describe, None)
            rows = r.describe(describe)
            if d:
                click.echo(f"{describe} ({d.what}): {d.summary}\n")
            width = max(len(c) for c, _, _ in rows)
            for col, typ, doc in rows:
                click.echo(f"  {col:{width}}  {typ:12}  {doc}")
            _warn(r)
            return
        rel = r.readonly_sql(query, bounds)
        names = rel.columns
        rows = rel.fetchall()
    _emit(_render_rows(names, rows, fmt, limit), None)
    _warn(r)


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


@main.command()
@_run_arg
@_rank_options
@_workers
@_cluster
@_comm_kernel
@_health_options
def ingest(run, ranks, sample_ranks, workers, cluster, comm_kernels, strict, allow_mixed):
    """Ingest (or refresh) the Parquet cache of a run and print what it holds."""
    opts = OpenOptions(workers, comm_kernels, strict, allow_mixed, cluster, ranks, sample_ranks)
    with _open(run, opts) as r:
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
    _warn(r)


@main.command()
@_run_arg
@_window_options
@_override_options
@_rule_options
@_rank_options
@_workers
@_comm_kernel
@_health_options
def tui(run, window, steps, select, ignore, ranks, sample_ranks, workers, comm_kernels, strict,
        allow_mixed, **overrides):  # fmt: skip
    """Interactive drill-down in the terminal: overview, ranks, timeline, collectives,
    ops, memory, SQL."""
    from importlib.util import find_spec

    from tracekit.ingest.discover import find_trace_files

    if find_spec("textual") is None:
        raise TracekitError("tracekit tui needs textual: pip install 'tracekit-torch[tui]'")
    if ranks is not None or sample_ranks is not None:  # a bad spec fails before the screen
        from tracekit.ingest.ranksel import Request

        Request.make(ranks, sample_ranks)
    find_trace_files([Path(p) for p in run])  # a bad path fails here, before the screen opens
    from diagnosers.rules import selected

    options = _analysis(run, window, steps, overrides, select, ignore)
    selected(options.select, options.ignore)  # an unknown rule fails before the screen
    from tui.app import run_app

    opts = OpenOptions(workers, comm_kernels, strict, allow_mixed, None, ranks, sample_ranks)
    code = run_app(list(run), options=options, open_options=opts)
    if code:
        sys.exit(code)


@main.group()
def baseline():
    """Baselines for `tracekit compare`: a run's metrics and per-step samples, no traces."""


@baseline.command("save")
@click.argument("run", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Write here.")
@click.option("--steps", default=None, help="ProfilerSteps of a run folder: all, N or A-B.")
@_rule_options
@_rank_options
def baseline_save(run, output, steps, select, ignore, ranks, sample_ranks):
    """Save RUN [RUN …] (run folders, `analyze --format json` reports or baselines) as
    one baseline FILE, each run's figures and per-step samples kept apart."""
    from tracekit.gate import baseline as gb

    names, reports = _baseline_runs(run, steps, ranks, sample_ranks, select, ignore)
    gb.write_json(gb.make_baseline(reports, names), output)
    _baseline_said(reports, output)


@baseline.command("add")
@click.argument("baseline_file", metavar="BASELINE", type=click.Path(exists=True, dir_okay=False))
@click.argument("run", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--steps", default=None, help="ProfilerSteps of a run folder: all, N or A-B.")
@_rule_options
@_rank_options
def baseline_add(baseline_file, run, steps, select, ignore, ranks, sample_ranks):
    """Add RUN [RUN …] to the BASELINE file (a CI job on main that grows it)."""
    from tracekit.gate import baseline as gb

    doc = gb.read_baseline(baseline_file)
    names, reports = _baseline_runs(run, steps, ranks, sample_ranks, select, ignore)
    out = gb.add_runs(doc, reports, names)
    gb.write_json(out, baseline_file)
    _baseline_said(out["runs"], baseline_file)


def _baseline_runs(run, steps, ranks, sample_ranks, select, ignore):
    """(a name per run, its report) for each RUN; a baseline given adds all its runs."""
    from tracekit.gate import baseline as gb

    names, reports = [], []
    for p in run:
        side = gb.load_side(
            p, lambda q: _gate_report(q, steps, ranks, sample_ranks, select, ignore)
        )
        for i, rep in enumerate(side.reports):
            names.append(p if side.runs == 1 else f"{p} run {i + 1}")
            reports.append(rep)
    return names, reports


def _baseline_said(reports, output):
    s = reports[-1]["samples"]
    sel = (reports[-1].get("run") or {}).get("rank_selection")
    chosen = f" ({sel['option']} {sel['spec']}, of {sel['of']})" if sel else ""
    runs = f"{len(reports)} run{'s' if len(reports) > 1 else ''}"
    click.echo(
        f"baseline of {runs}, {len(s['ranks'])} ranks{chosen} × {len(s['steps'])} steps → {output}"
    )


@main.command()
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
@_rule_options
@_rank_options
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
    _emit(RENDERERS[fmt](cmp, everything) if fmt == "text" else RENDERERS[fmt](cmp), output)
    ctx.exit(cmp.exit_code)


@main.group("gate")
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
@_rule_options
@_rank_options
def gate_calibrate(run, false_fail, catch_spec, baseline_runs, alpha, fmt, steps, select, ignore,
                   ranks, sample_ranks):  # fmt: skip
    """From RUN RUN [RUN …] — repeated runs of one job, same code and options (run
    folders, reports or baselines) — print each gated metric's run-to-run spread and the
    thresholds that keep false failures under --false-fail while catching --catch."""
    from tracekit.gate import calibrate as gcal
    from tracekit.gate.metrics import parse_spec

    _, reports = _baseline_runs(run, steps, ranks, sample_ranks, select, ignore)
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


@main.command()
@_run_arg
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
@_rule_options
@_rank_options
@_workers
@_comm_kernel
@_health_options
def export(run, output, serve, select, ignore, ranks, sample_ranks, workers, comm_kernels,
           strict, allow_mixed):  # fmt: skip
    """Write RUN as one Chrome-JSON trace for Perfetto: every rank's events on one clock,
    a process per rank, and tracekit's tracks (findings, exposed communication, steps,
    the critical path); prints each finding's Perfetto link."""
    from diagnosers import assemble
    from tracekit.report import export as ex

    _check_output(output)
    options = _analysis(run, select=select, ignore=ignore)
    opts = OpenOptions(workers, comm_kernels, strict, allow_mixed, None, ranks, sample_ranks)
    with _open(run, opts) as r:
        rep = assemble.cached(r, options)
        n = ex.write_trace(r, rep, Path(output))
        base, places = ex.base_ns(r), ex.evidence(r, rep)
    click.echo(f"wrote {n:,} events of {len(r.ranks)} ranks to {output}")
    for f, p in zip(rep.findings or [], places, strict=True):
        if p:
            click.echo(f"{f.code} {f.title}\n  {ex.perfetto_url(p, base)}")
    _warn(r)
    if serve:
        click.echo(f"serving {output} on http://127.0.0.1:{ex.SERVE_PORT}/ for "
                   "ui.perfetto.dev; Ctrl-C stops")  # fmt: skip
        ex.serve(Path(output))


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


class _NeedsTorch(click.Command):
    """`tracekit run`: always listed; without torch (the `jobs` extra) it says in one line
    how to get it, before parsing anything (`--help` still works)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from importlib.util import find_spec

        help_asked = any(a in ctx.help_option_names for a in args)
        if not help_asked and find_spec("torch") is None:  # checked without importing torch
            raise TracekitError(
                "tracekit run needs torch: pip install 'tracekit-torch[jobs]' "
                "(or pip install torch first, for a CPU or CUDA build of your choice)"
            )
        return super().parse_args(ctx, args)


def _run_command():
    @main.command("run", cls=_NeedsTorch)
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
        """Run a reference job with the profiler on: traces per rank + job.json (needs
        torch: pip install 'tracekit-torch[jobs]')."""
        from instrument.config import JobConfig
        from instrument.launch import run_job

        cfg = JobConfig(job=job, world_size=world_size, out=out, **options)
        path = run_job(cfg)
        click.echo(f"wrote {cfg.world_size} traces and job.json to {path}")

    return run


def _emit(text: str, output: str | None) -> None:
    """stdout, or `output` written atomically (a temporary file beside it, then renamed)."""
    if not output:
        sys.stdout.write(text)
        return
    from tracekit.atomic import write_text

    try:
        write_text(Path(output), text)
    except OSError as exc:
        raise TracekitError(f"-o {output}: cannot write ({exc.strerror or exc})") from exc


@main.command()
@_run_arg
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
@_window_options
@_rank_options
@_workers
@_comm_kernel
@_health_options
def whatif(run, changes, fmt, window, steps, ranks, sample_ranks, workers, comm_kernels,
           strict, allow_mixed):  # fmt: skip
    """Replay the run's step model with changes: the step they predict, what they save,
    and the critical path after them (docs/step-model.md)."""
    from tracekit.report.render import whatif_lines

    options = _analysis(run, window, steps)
    opts = OpenOptions(workers, comm_kernels, strict, allow_mixed, None, ranks, sample_ranks)
    out, r = whatif_report(run, opts, options, changes)
    if fmt == "json":
        import msgspec

        _emit(msgspec.json.format(msgspec.json.encode(out), indent=2).decode() + "\n", None)
    else:
        _emit("\n".join(whatif_lines(out)) + "\n", None)
    _warn(r)


@main.command()
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A folder the assistant may read runs from (repeatable).  [default: the working "
    "directory]",
)
@click.option(
    "--http",
    "http_port",
    type=click.IntRange(1, 65535),
    default=None,
    metavar="PORT",
    help="Serve streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio (localhost only).",
)
@_sql_bounds
def mcp(roots, http_port, memory, timeout):
    """Serve the run's report, findings, SQL, what-if and the gate as tools to an assistant
    (Model Context Protocol over stdio; docs/mcp.md). Needs the mcp extra."""
    from importlib.util import find_spec

    if find_spec("mcp") is None:
        raise TracekitError("tracekit mcp needs the MCP SDK: pip install 'tracekit-torch[mcp]'")
    bounds = _bounds(memory, timeout)
    from tracekit.mcp_server import serve

    serve(list(roots) or ["."], bounds, http_port)


_run_command()  # always listed; it needs torch (the `jobs` extra) only when it runs

if __name__ == "__main__":
    main()
