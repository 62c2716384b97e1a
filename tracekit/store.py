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
from typing import TYPE_CHECKING

import duckdb

from tracekit import loader
from tracekit.cache import TABLES, table_path
from tracekit.discover import find_trace_files
from tracekit.errors import TracekitError
from tracekit.sqltext import sql_str

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit import ranksel

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
MATERIALIZED = ("collectives",)  # cross-rank views a report reads many times
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
        # `--ranks` / `--sample-ranks` (tracekit.ranksel.RankSelection); None: every rank
        self.rank_selection = None
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
        self._materialized = False

    @property
    def ranks(self) -> list[int]:
        return [s.rank for s in self.sources]

    def sql(self, query: str, params: list | dict | None = None) -> duckdb.DuckDBPyRelation:
        if params is None:
            return self.con.sql(query)
        return self.con.sql(query, params=params)

    def materialize(self) -> None:
        """Compute the cross-rank views once, for the many queries of a report: the
        `collectives` matching (window functions over every rank's rows) is read by a
        dozen queries, each of which would compute it again (0.03 s at 8 ranks, 0.3 s at
        64, every time). The view then reads a table of its rows (in the in-memory
        database, so cursors of other threads see it too); the SQL
        sandbox keeps the original definitions."""
        if self._materialized:
            return
        from tracekit.sandbox import view_definitions

        self._view_sql = view_definitions(self.con)
        for name in MATERIALIZED:
            self.con.execute(f"CREATE TABLE _m_{name} AS SELECT * FROM {name}")
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM _m_{name}")
        self._materialized = True

    def readonly_sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """Run user SQL that may only read the run (`tracekit.sandbox`): one SELECT-like
        statement, on a connection that can open no file outside the run's cache."""
        from tracekit import sandbox

        box = getattr(self, "_sandbox", None)
        if box is None:
            box = self._sandbox = sandbox.open_sandbox(
                self.con, self.cache_dir, getattr(self, "_view_sql", None)
            )
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
    ranks: str | list[int] | None = None,
    sample_ranks: int | None = None,
) -> Run:
    """Open a run folder (or trace files), ingesting what the cache lacks.

    `comm_kernels`: extra regexes of communication kernels (`--comm-kernel`), added to
    those of the run's job.json and pyproject.toml (`tracekit.commkernels.user_patterns`).
    Unreadable files are left out and named in `run.unreadable` (`strict`: an error);
    traces that look like several runs are an error unless `allow_mixed`. `cluster`: the
    per-rank ingest runs on a Dask cluster (`tracekit.cluster`).

    `ranks` (`"0-7,64"` or a list) or `sample_ranks` (N ranks spread evenly): open only
    those ranks, without ingesting the other traces (`tracekit.ranksel`); the selection
    is `run.rank_selection`."""
    from tracekit import manifest, validate
    from tracekit.commkernels import user_patterns

    request = None
    if ranks is not None or sample_ranks is not None:
        from tracekit import ranksel

        request = ranksel.Request.make(ranks, sample_ranks)  # a bad spec fails before reading
    if not inputs:
        raise TracekitError("pass a run folder or trace files")
    root, files = find_trace_files([Path(p) for p in inputs])
    man = manifest.load(root)
    patterns = user_patterns(root, comm_kernels, man.comm_kernels if man else ())
    notes = loader.IngestNotes()

    def ingest(batch: list[Path]) -> tuple[Path, list[loader.Source]]:
        return loader.ingest_run(
            root,
            batch,
            workers=workers,
            comm_kernels=patterns,
            notes=notes,
            cluster=cluster,
            single=len(files) == 1,
        )

    selection = None
    if request is None:
        cdir, sources = ingest(files)
    else:
        cdir, sources, selection = _ingest_selected(files, request, ingest)
    run = Run(root, cdir, sources)
    run.comm_kernels = patterns
    run.rank_selection = selection
    try:
        validate.check(run, notes, allow_mixed=allow_mixed, strict=strict)
    except BaseException:
        run.close()
        raise
    return run


def _ingest_selected(
    files: list[Path],
    request: ranksel.Request,
    ingest: Callable[[list[Path]], tuple[Path, list[loader.Source]]],
) -> tuple[Path, list[loader.Source], ranksel.RankSelection]:
    """Ingest only the traces of the ranks `request` picks (`tracekit.ranksel`): files
    whose rank the name or header tells are chosen before reading; the others (and
    merged multi-rank files) are ingested whole first and their ranks filtered after."""
    from tracekit import ranksel

    known, unknown = ranksel.file_ranks(files)

    def batch_of(chosen: set[int], done: set[Path]) -> list[Path]:
        return [f for f in files if f in known and known[f] in chosen and f not in done]

    cdir, sources = None, []
    if unknown:
        first = []
        if request.sample is not None and known:
            # a sample needs every rank known before it is drawn; the lowest-ranked known
            # file (the sample's first rank, unless an unknown file holds a lower one) is
            # read in this pass too
            first = [min(known, key=lambda f: known[f])]
        elif request.ranks is not None:
            first = batch_of(set(request.ranks), set())
        cdir, sources = ingest(unknown + first)
    found = sorted(set(known.values()) | {s.rank for s in sources})
    chosen = ranksel.choose(request, found)
    rest = batch_of(set(chosen), {s.path for s in sources})
    if rest:
        cdir, more = ingest(rest)
        sources += more
    assert cdir is not None
    by_rank: dict[int, loader.Source] = {}
    for s in sources:
        other = by_rank.setdefault(s.rank, s)
        if other is not s:
            raise TracekitError(
                f"rank {s.rank} appears twice ({other.path.name} and {s.path.name}); "
                "pass one trace per rank (one ProfilerStep cycle per run folder)"
            )
    picked = set(chosen)
    kept = sorted((s for s in by_rank.values() if s.rank in picked), key=lambda s: s.rank)
    if not kept:
        raise TracekitError(
            f"{request.option} {request.spec}: no readable trace holds the chosen ranks "
            f"({ranksel.ranges_text(chosen)})"
        )
    selection = ranksel.RankSelection(request.option, request.spec, [s.rank for s in kept], found)
    return cdir, kept, selection
