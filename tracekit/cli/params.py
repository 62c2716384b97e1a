"""The options commands share, each spelled once: the run argument, how to open a run
(`tracekit.options.OpenOptions`: ranks, workers, cluster, communication kernels, health),
what to analyse (window, steps, the overrides, the rules) and the SQL bounds. Their
values reach `tracekit.options.resolve` by name."""

from __future__ import annotations

import click

run_arg = click.argument("run", nargs=-1, required=True, type=click.Path())


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


def health_options(func):
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


def rank_options(func):
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


workers = click.option(
    "--workers", type=click.IntRange(1), default=None, help="Ingest processes (default: cores)."
)
cluster = click.option(
    "--cluster",
    metavar="ADDRESS",
    default=None,
    help="Ingest the ranks on a Dask cluster: a scheduler address (tcp://host:8786) or "
    "local[:N] for N local worker processes; workers must see the run at the same path "
    "(pip install 'tracekit-torch[cluster]').",
)
comm_kernel = click.option(
    "--comm-kernel",
    "comm_kernels",
    multiple=True,
    metavar="REGEX",
    help="Also count kernels matching REGEX (Python re, searched in the name) as "
    "communication; repeatable; adds to job.json / pyproject.toml comm_kernels.",
)


OVERRIDES = (
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


def window_options(func):
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


def rule_options(func):
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


def override_options(func):
    """The figures a user may state instead of the tables (diagnosers.Overrides), for every
    command that builds the report."""
    for option in reversed(OVERRIDES):
        func = option(func)
    return func


def sql_bounds(func):
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


def bounds(memory: str | None, timeout: float | None):
    from tracekit.store.sandbox import TIMEOUT_S, Bounds

    return Bounds.of(memory, TIMEOUT_S if timeout is None else timeout)
