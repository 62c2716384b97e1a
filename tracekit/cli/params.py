"""The options commands share, each spelled once: the run argument, how to open a run
(`tracekit.options.OpenOptions`: ranks, workers, cluster, communication kernels, health),
what to analyse (window, steps, the overrides, the rules) and the SQL bounds. Their
values reach `tracekit.options.resolve` by name."""

from __future__ import annotations

from dataclasses import fields

import click

from tracekit.options import OpenOptions, Overrides

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


def field_option(cls: type, name: str):
    """The --option of a dataclass field (`tracekit.options.opt`): its doc is the help;
    `--name-with-dashes` unless it says its flag; a flag when the default is a bool,
    repeatable when a tuple; an integer with its `min`, a float a finite number > 0."""
    f = next(f for f in fields(cls) if f.name == name)
    meta = dict(f.metadata)
    flag = meta.pop("flag", "--" + name.replace("_", "-"))
    kw: dict = {
        "help": meta.pop("doc"),
        **({"metavar": meta["metavar"]} if "metavar" in meta else {}),
    }
    if isinstance(f.default, bool):
        kw["is_flag"] = True
    elif isinstance(f.default, tuple):
        kw["multiple"] = True
    elif "min" in meta:
        kw["type"] = click.IntRange(meta["min"])
    elif str(f.type).startswith("float"):
        kw["type"] = POSITIVE
    return click.option(flag, name, **kw)


def _stack(*options):
    """Options applied so that they show in the order given."""

    def apply(func):
        for option in reversed(options):
            func = option(func)
        return func

    return apply


# how to open a run: `OpenOptions`' fields
health_options = _stack(
    field_option(OpenOptions, "strict"), field_option(OpenOptions, "allow_mixed")
)
rank_options = _stack(field_option(OpenOptions, "ranks"), field_option(OpenOptions, "sample_ranks"))
workers = field_option(OpenOptions, "workers")
cluster = field_option(OpenOptions, "cluster")
comm_kernel = field_option(OpenOptions, "comm_kernels")
# the figures a user may state instead of the tables: `Overrides`' fields, for every
# command that builds the report
override_options = _stack(*(field_option(Overrides, f.name) for f in fields(Overrides)))


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
