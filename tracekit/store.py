"""The store: a DuckDB connection with views over a run's cached Parquet tables.

`tracekit.open(RUN)` ingests what is not cached yet and returns a `Run`. Base tables
(`events`, `flows`, `memory`, `threads`, `rank_info`, `process_groups`) and the
rank-local derived views (`steps`, `device_activity`, materialized at ingest from
their SQL modules) are views over the per-rank Parquet files; cross-rank views
(`collectives`, `collective_instances`) are SQL modules run at open. Every public
column is documented in those files (`-- @column name: doc`); `Run.describe(view)`
returns the docs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import duckdb

from tracekit import loader
from tracekit.cache import TABLES, table_path
from tracekit.discover import find_trace_files
from tracekit.errors import TracekitError
from tracekit.sqltext import sql_str

# Rank-local views are materialized once per rank at ingest (tracekit.loader) and read
# back from Parquet; cross-rank views are created over them when a run is opened.
RANK_MODULES = (
    "steps.sql",
    "device_activity.sql",
    "activity_islands.sql",
    "activity_segments.sql",
    "op_flops.sql",
)
RUN_MODULES = ("collectives.sql",)
DOC_MODULES = ("tables.sql", *RANK_MODULES, *RUN_MODULES)
# base tables exposed under another name (the public one is a derived view)
_INTERNAL_NAME = {"collectives": "_collectives"}


@dataclass(frozen=True)
class ViewDoc:
    name: str
    what: str  # "table" or "view"
    summary: str
    columns: dict[str, str]


def sql_module(name: str) -> str:
    return resources.files("tracekit.sql").joinpath(name).read_text()


@cache
def docs() -> dict[str, ViewDoc]:
    """Column docs of every public table and view, parsed from the SQL modules."""
    out: dict[str, ViewDoc] = {}
    head = re.compile(r"^-- @(table|view) (\w+)\s*$")
    col = re.compile(r"^-- @column (\w+): (.+)$")
    for module in DOC_MODULES:
        text = sql_module(module)
        cur: dict | None = None
        for line in text.splitlines():
            if m := head.match(line):
                cur = {"name": m.group(2), "what": m.group(1), "summary": [], "columns": {}}
                out[cur["name"]] = cur  # type: ignore[assignment]
            elif cur is not None and (m := col.match(line)):
                cur["columns"][m.group(1)] = m.group(2)
            elif cur is not None and line.startswith("-- ") and not cur["columns"]:
                cur["summary"].append(line[3:])
            elif not line.startswith("--"):
                cur = None
    return {
        k: ViewDoc(v["name"], v["what"], " ".join(v["summary"]), v["columns"])
        for k, v in out.items()  # type: ignore[union-attr]
    }


class Run:
    """An ingested run: `run.sql("SELECT …")` returns a DuckDB relation
    (`.pl()` polars, `.df()` pandas, `.arrow()`, `.fetchall()`).

    Its health (`tracekit.validate`): `unreadable` files, `missing_ranks`,
    `skipped_events` by reason, `mixed` (why it looks like several runs, when allowed),
    and `warnings`, one line each."""

    def __init__(self, root: Path, cache_dir: Path, sources: list[loader.Source]):
        self.root = root
        self.cache_dir = cache_dir
        self.sources = sources
        self.comm_kernels: tuple[str, ...] = ()  # the user's patterns this run was read with
        # health, set by tracekit.validate.check
        self.unreadable: list[dict] = []
        self.missing_ranks: list[int] = []
        self.skipped_events: dict[str, int] = {}
        self.mixed: list[str] = []
        self.warnings: list[str] = []
        self.clock_offsets_ns: dict[int, int] = {}
        self.con = duckdb.connect()
        self.con.execute("SET enable_progress_bar = false")
        # an ASOF join on a CTE has no cardinality estimate (0): below this threshold
        # DuckDB runs it as a nested loop over every pair (5 s instead of 10 ms)
        self.con.execute("SET asof_loop_join_threshold = 0")
        for table in TABLES:
            files = [str(table_path(cache_dir, s.key, table)) for s in sources]
            name = _INTERNAL_NAME.get(table, table)
            listed = ", ".join(sql_str(f) for f in files)
            self.con.execute(
                f"CREATE VIEW {name} AS "
                f"SELECT * FROM read_parquet([{listed}], union_by_name = true)"
            )
        for module in RUN_MODULES:
            self.con.execute(sql_module(module))

    @property
    def ranks(self) -> list[int]:
        return [s.rank for s in self.sources]

    def sql(self, query: str, params: list | dict | None = None) -> duckdb.DuckDBPyRelation:
        if params is None:
            return self.con.sql(query)
        return self.con.sql(query, params=params)

    def readonly_sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """Run user SQL that may only read the run (`tracekit.sandbox`): one SELECT-like
        statement, on a connection that can open no file outside the run's cache."""
        from tracekit import sandbox

        box = getattr(self, "_sandbox", None)
        if box is None:
            box = self._sandbox = sandbox.open_sandbox(self.con, self.cache_dir)
        return sandbox.run_readonly(box, query)

    def views(self) -> list[str]:
        return sorted(docs())

    def describe(self, view: str) -> list[tuple[str, str, str]]:
        """(column, type, doc) for a public table or view."""
        d = docs().get(view)
        if d is None:
            raise TracekitError(f"no view named {view!r}; views: {', '.join(sorted(docs()))}")
        types = self.con.sql(f"DESCRIBE {view}").fetchall()
        return [(c, t, d.columns.get(c, "")) for c, t, *_ in types]

    def close(self) -> None:
        box = getattr(self, "_sandbox", None)
        if box is not None:
            box.close()
            self._sandbox = None
        self.con.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_run(
    *inputs: str | Path,
    workers: int | None = None,
    comm_kernels: tuple[str, ...] | list = (),
    strict: bool = False,
    allow_mixed: bool = False,
    cluster: str | None = None,
) -> Run:
    """Open a run folder (or trace files), ingesting what the cache lacks.

    `comm_kernels`: extra regexes of communication kernels (`--comm-kernel`), added to
    those of the run's job.json and pyproject.toml (`tracekit.commkernels.user_patterns`).
    Unreadable files are left out and named in `run.unreadable` (`strict`: an error);
    traces that look like several runs are an error unless `allow_mixed`. `cluster`: the
    per-rank ingest runs on a Dask cluster (`tracekit.cluster`)."""
    from tracekit import manifest, validate
    from tracekit.commkernels import user_patterns

    if not inputs:
        raise TracekitError("pass a run folder or trace files")
    root, files = find_trace_files([Path(p) for p in inputs])
    man = manifest.load(root)
    patterns = user_patterns(root, comm_kernels, man.comm_kernels if man else ())
    notes = loader.IngestNotes()
    cdir, sources = loader.ingest_run(
        root, files, workers=workers, comm_kernels=patterns, notes=notes, cluster=cluster
    )
    run = Run(root, cdir, sources)
    run.comm_kernels = patterns
    try:
        validate.check(run, notes, allow_mixed=allow_mixed, strict=strict)
    except BaseException:
        run.close()
        raise
    return run
