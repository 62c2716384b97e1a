"""The options every way of use passes the same way: how to open a run, and what to
analyse in it. One bundle each instead of the same ten keywords in five signatures."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from tracekit.errors import TracekitError

WINDOWS = ("steps", "trace", "hta")


def opt(default: Any, doc: str, **cli: Any) -> Any:
    """A field whose doc is its command-line help (`tracekit.cli.params.field_option`
    writes the option: `--name-with-dashes`, a flag when the default is a bool, repeatable
    when a tuple); `cli` holds what the field does not say: `flag` (another spelling),
    `metavar`, `min` (an integer at least this)."""
    return field(default=default, metadata={"doc": doc, **cli})


@dataclass(frozen=True)
class OpenOptions:
    """How to open a run (`tracekit.store.open.open_run`): which traces, how to ingest."""

    workers: int | None = opt(None, "Ingest processes (default: cores).", min=1)
    comm_kernels: tuple[str, ...] = opt(
        (),
        "Also count kernels matching REGEX (Python re, searched in the name) as "
        "communication; repeatable; adds to job.json / pyproject.toml comm_kernels.",
        flag="--comm-kernel",
        metavar="REGEX",
    )
    strict: bool = opt(
        False,
        "Exit 2 when a trace is unreadable, a rank is missing or events were skipped, "
        "instead of warning and analyzing the rest.",
    )
    allow_mixed: bool = opt(
        False,
        "Analyze traces that look like different runs (world sizes, start times, "
        "one trace twice) together instead of stopping.",
    )
    cluster: str | None = opt(
        None,
        "Ingest the ranks on a Dask cluster: a scheduler address (tcp://host:8786) or "
        "local[:N] for N local worker processes; workers must see the run at the same path "
        "(pip install 'tracekit-torch[cluster]').",
        metavar="ADDRESS",
    )
    ranks: str | list[int] | None = opt(
        None,
        "Analyse only these global ranks, e.g. 0-7,64,100-103; the other traces are not read.",
        metavar="SPEC",
    )
    sample_ranks: int | None = opt(
        None,
        "Analyse N ranks spread evenly over the run (the first, the last, the rest "
        "evenly spaced); the other traces are not read. A first look at a huge run.",
        metavar="N",
        min=1,
    )

    def kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Overrides:
    """Figures the user states instead of the tables (`--peak-tflops` …, or a config)."""

    peak_tflops: float | None = opt(None, "Override the device's peak TFLOP/s.")
    busbw_GBps: float | None = opt(None, "Override the realistic in-node bus bandwidth, GB/s.")
    device_memory_GB: float | None = opt(None, "Override the device memory capacity, GB.")
    latency_us: float | None = opt(None, "Override the per-collective latency α, µs.")
    gpus_per_node: int | None = opt(
        None,
        "Ranks per node (node = rank // N); decides in-node vs inter-node bandwidth.",
        min=1,
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None and (not math.isfinite(v) or v <= 0):
                flag = "--" + f.name.replace("_", "-")
                raise TracekitError(f"{flag} {v!r} must be a finite number > 0")

    @classmethod
    def of(cls, values: dict[str, Any] | None) -> Overrides:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (values or {}).items() if k in known and v is not None})


@dataclass(frozen=True)
class AnalysisOptions:
    """What to analyse: the window, the steps, the user's figures and which rules run."""

    window: str = "steps"
    steps: str | None = None  # all, N or A-B (ProfilerStep numbers)
    overrides: Overrides = field(default_factory=Overrides)
    select: tuple[str, ...] = ()  # rule codes or prefixes to run (empty: all)
    ignore: tuple[str, ...] = ()  # rule codes or prefixes to leave out
    levels: bool = True  # False: the per-rank breakdown alone (`--breakdown-only`)

    def __post_init__(self) -> None:
        if self.window not in WINDOWS:
            raise TracekitError(f"--window {self.window!r}: use one of {', '.join(WINDOWS)}")

    def with_(self, **changes: Any) -> AnalysisOptions:
        return replace(self, **changes)

    def key(self) -> dict[str, Any]:
        """What the report depends on, for the report cache's key."""
        return {
            "window": self.window,
            "steps": self.steps,
            "overrides": asdict(self.overrides),
            "select": list(self.select),
            "ignore": list(self.ignore),
            "levels": self.levels,
        }


OVERRIDE_KEYS = frozenset(f.name for f in fields(Overrides))
OPEN_KEYS = frozenset(f.name for f in fields(OpenOptions))
ANALYSIS_KEYS = frozenset({"window", "steps", "select", "ignore", "levels"}) | OVERRIDE_KEYS
KEYS = OPEN_KEYS | ANALYSIS_KEYS  # every option a door may name


def open_options(values: Mapping[str, Any]) -> OpenOptions:
    """How to open a run, from named values (a command's options, `tracekit.analyze()`'s
    keywords): a value of None (an option not given) keeps the field's default; names
    that are not `OpenOptions` fields are left to `analysis_options`."""
    given = {k: v for k, v in values.items() if k in OPEN_KEYS and v is not None}
    if "comm_kernels" in given:
        given["comm_kernels"] = tuple(given["comm_kernels"])
    return OpenOptions(**given)


def analysis_options(values: Mapping[str, Any], root: Any) -> AnalysisOptions:
    """What to analyse, from named values as `open_options` takes them, with
    `[tool.tracekit]` of `root`'s pyproject.toml filling `select` / `ignore` where they
    are not given (`rule_selection`)."""

    def codes(key: str) -> tuple[str, ...]:
        v = values.get(key) or ()
        return (v,) if isinstance(v, str) else tuple(v)

    sel, ign = rule_selection(root, codes("select"), codes("ignore"))
    given = {k: values[k] for k in ("window", "steps", "levels") if values.get(k) is not None}
    return AnalysisOptions(**given, overrides=Overrides.of(dict(values)), select=sel, ignore=ign)


def resolve(
    values: Mapping[str, Any], root: Any, where: str = "tracekit"
) -> tuple[OpenOptions, AnalysisOptions]:
    """The one resolver of options, for the CLI, `tracekit.analyze()`, the TUI, the gate
    and the MCP door alike: both bundles from named values, `[tool.tracekit]` filling
    the rule selection (`comm_kernels` of the file add at opening,
    `tracekit.model.commkernels.user_patterns`). `root`: the run folder."""
    check_names(values, where)
    return open_options(values), analysis_options(values, root)


def check_names(values: Mapping[str, Any], where: str = "tracekit") -> None:
    """A name that is no option is a mistake (a typo), not a value to pass over."""
    unknown = set(values) - KEYS
    if unknown:
        raise TypeError(f"{where}: unknown option {sorted(unknown)[0]!r}")


def rule_selection(
    root: Any, select: tuple[str, ...] | None, ignore: tuple[str, ...] | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`--select` / `--ignore` (comma-separated or repeated), else `select` / `ignore` in
    `[tool.tracekit]` of the project's pyproject.toml (`tracekit.config`): a flag given
    on the command line replaces the file's value."""
    from tracekit import config

    def split(values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(t.strip() for v in values for t in v.split(",") if t.strip())

    path = config.pyproject_for(root)
    table = config.tracekit_table(path)
    sel = split(select) if select else tuple(config.string_list(table, "select", path))
    ign = split(ignore) if ignore else tuple(config.string_list(table, "ignore", path))
    return sel, ign
