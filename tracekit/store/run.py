"""The store: a DuckDB connection with views over a run's cached Parquet tables.

`tracekit.open(RUN)` ingests what is not cached yet and returns a `Run`. Base tables
(`events`, `flows`, `memory`, `threads`, `rank_info`, `process_groups`) and the
rank-local derived views (`steps`, `device_activity`, materialized at ingest from
their SQL modules) are views over the per-rank Parquet files; cross-rank views
(`collectives`, `collective_instances`) are SQL modules run at open. Every public
column is documented, with its type, in those files (`-- @column name TYPE: doc`);
`Run.describe(view)` returns the docs. The cache scans are module `store.run`; copying
a view into a table (`materialize`) and the connection's settings stay here, plumbing.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from tracekit import sql
from tracekit.errors import TracekitError
from tracekit.ingest.cache import TABLES, table_path
from tracekit.ingest.steptables import STEP_TABLES
from tracekit.sql.text import sql_str

if TYPE_CHECKING:
    from tracekit.ingest.runner import Source

# the connection's settings, per connection (a cursor starts from DuckDB's defaults):
# an ASOF join on a CTE has no cardinality estimate (0): below this threshold DuckDB runs
# it as a nested loop over every pair (5 s instead of 10 ms)
SETTINGS = ("SET enable_progress_bar = false", "SET asof_loop_join_threshold = 0")
MATERIALIZED = ("collective_groups", "_collectives_matched")  # views a report reads many times
# base tables exposed under another name (the public one is a derived view)
_INTERNAL_NAME = {"collectives": "_collectives"}


def load_before_threads() -> None:
    """Import numpy and its lazily loaded `numpy.ma` now, on the caller's thread, before a
    second thread may need them. DuckDB's `fetchnumpy`, the step model and the metrics all
    read `np.ma`. Two threads loading a lazy submodule at once can recurse until
    RecursionError: `importlib` marks the submodule loaded before it sets the parent's
    attribute, and in that window numpy's `__getattr__("ma")` imports it again (CPython
    issue 149728). It happened once under load: a compute level failed with
    RecursionError while the step model was being built on its thread."""
    import numpy.ma  # noqa: F401


def _configured(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    for setting in SETTINGS:
        con.execute(setting)
    return con


# connections made ahead for the next runs (`connect_ahead`); list.append and pop are atomic
_AHEAD: list[duckdb.DuckDBPyConnection] = []


def connect_ahead() -> None:
    """Make the next `Run`'s connection now: a new in-memory database costs 13–23 ms
    (its catalog), which a cold open pays on a thread while the ingest's workers read
    (`tracekit.commands.load_analysis`) instead of after them. A fresh database with the
    run's settings, as `Run` would make it; not shared (each is taken once)."""
    if not _AHEAD:  # one waiting connection at most: a Run takes one
        _AHEAD.append(_configured(duckdb.connect()))


def _connection() -> duckdb.DuckDBPyConnection:
    try:
        return _AHEAD.pop()
    except IndexError:
        return _configured(duckdb.connect())


def _batches(sources: list[Source]) -> tuple[list[str], dict[str, list[int]]]:
    """The cached batches holding `sources`, in rank order: those read whole (every rank
    in them is a source), and the others with the ranks to keep (a batch that also holds
    ranks not chosen, or ranks ingested again since into another batch)."""
    ranks: dict[str, list[int]] = {}
    for s in sources:
        ranks.setdefault(s.batch, []).append(s.rank)
    size = {s.batch: s.batch_parts for s in sources}
    whole = [b for b in ranks if len(ranks[b]) == size[b]]
    return whole, {b: r for b, r in ranks.items() if len(r) != size[b]}


def _read(cache_dir: Path, table: str, whole: list[str], partial: dict[str, list[int]]) -> str:
    """SQL reading `table` of the batches: the whole ones in one scan, the others filtered."""
    scans = []
    if whole:
        listed = ", ".join(sql_str(str(table_path(cache_dir, b, table))) for b in whole)
        scans.append(sql.query("store.run", "whole_batches", files=listed))
    for b, ranks in partial.items():
        path = sql_str(str(table_path(cache_dir, b, table)))
        keep = ", ".join(str(int(r)) for r in ranks)
        scans.append(sql.query("store.run", "some_ranks", file=path, ranks=keep))
    return " UNION ALL BY NAME ".join(scans)


# a statement that reads (after any `--` comment lines: the SQL modules' queries open with
# their docs), which `Run.sql` may run without a relation
_READS = re.compile(r"(?:\s*--[^\n]*(?:\n|$))*\s*(?:SELECT|WITH|FROM|\()", re.IGNORECASE)


class _Query:
    """A query that reads, as `Run.sql` returns it: fetched (`fetchall`, `fetchone`,
    `fetchnumpy`) it runs once on the connection; anything else reads the DuckDB relation,
    made then. A relation parses, tokenizes and binds its query when made, then runs it
    when fetched: 5–10 ms more for each of the report's queries (~0.1–0.2 s of CPU a
    report, the same rows)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, query: str, params):
        self._con, self._query, self._params = con, query, params
        self._rel = None

    def _run(self):
        if self._params is None:
            return self._con.execute(self._query)
        return self._con.execute(self._query, self._params)

    def fetchall(self) -> list[tuple]:
        return self._run().fetchall()

    def fetchone(self) -> tuple | None:
        return self._run().fetchone()

    def fetchnumpy(self) -> dict:
        return self._run().fetchnumpy()

    def __getattr__(self, name: str):
        if self._rel is None:
            q, p = self._query, self._params
            self._rel = self._con.sql(q) if p is None else self._con.sql(q, params=p)
        return getattr(self._rel, name)


class Run:
    """An ingested run: `run.sql("SELECT …")` returns a DuckDB relation
    (`.pl()` polars, `.df()` pandas, `.arrow()`, `.fetchall()`).

    Its health (`tracekit.store.health`): `unreadable` files, `missing_ranks`,
    `skipped_events` by reason, `mixed` (why it looks like several runs, when allowed),
    and `warnings`, one line each."""

    def __init__(self, root: Path, cache_dir: Path, sources: list[Source]):
        self.root = root
        self.cache_dir = cache_dir
        self.sources = sources
        self.comm_kernels: tuple[str, ...] = ()  # the user's patterns this run was read with
        self.manifest = None  # its job.json (tracekit.manifest.JobManifest), read once at open
        # health, set by tracekit.store.health.check
        self.unreadable: list[dict] = []
        self.missing_ranks: list[int] = []
        self.skipped_events: dict[str, int] = {}
        self.mixed: list[str] = []
        self.warnings: list[str] = []
        self.clock_offsets_ns: dict[int, int] = {}
        # `--ranks` / `--sample-ranks` (tracekit.ingest.ranksel.RankSelection); None: every rank
        self.rank_selection = None
        self._con = _connection()
        self._local = threading.local()  # `beside`'s thread: its own cursor
        self._beside: list[threading.Thread] = []
        whole, partial = _batches(sources)
        batches = [*whole, *partial]
        self._derived: list[str] = []  # step tables computed from the events (`step_tables`)
        self._lock = threading.Lock()
        for table in TABLES:
            name = _INTERNAL_NAME.get(table, table)
            if table in STEP_TABLES and not all(
                table_path(cache_dir, b, table).exists() for b in batches
            ):  # left out at ingest (`tracekit.ingest.steptables`): from the events, as there
                self.con.execute(sql.module(f"rank.{table}"))
                self._derived.append(table)
                continue
            self.con.execute(f"CREATE VIEW {name} AS {_read(cache_dir, table, whole, partial)}")
        for module in sql.RUN_MODULES:
            self.con.execute(sql.module(module))
        self._materialized = False
        self.window_tables: set[str] = set()  # `tracekit.metrics.windows.table`

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The run's connection; on a thread `beside` started, that thread's cursor (a
        DuckDB connection is not safe to share across threads; a cursor sees the same
        in-memory database: its tables and views, not TEMP ones)."""
        return getattr(self._local, "con", None) or self._con

    def beside(self, fn, *args) -> Future:
        """`fn(*args)` on a thread of its own while the caller goes on; its queries
        (`sql`, `con`) go through a cursor of that thread. The future's `result()` is
        its return value or raises what it raised. `close` waits for it."""
        load_before_threads()
        cur = _configured(self._con.cursor())  # made here: the caller owns `_con`
        fut: Future = Future()

        def work() -> None:
            self._local.con = cur
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # handed to whoever asks for the result
                fut.set_exception(exc)
            finally:
                self._local.con = None
                cur.close()

        t = threading.Thread(target=work, name="tracekit-beside", daemon=True)
        self._beside.append(t)
        t.start()
        return fut

    @property
    def ranks(self) -> list[int]:
        return [s.rank for s in self.sources]

    def sql(self, query: str, params: list | dict | None = None) -> duckdb.DuckDBPyRelation:
        if _READS.match(query):
            return _Query(self.con, query, params)  # type: ignore[return-value]
        if params is None:
            return self.con.sql(query)
        return self.con.sql(query, params=params)

    def materialize(self) -> None:
        """Compute the cross-rank views once, for the many queries of a report: the
        `collectives` matching (window functions over every rank's rows) is read by a
        dozen queries, each of which would compute it again (0.03 s at 8 ranks, 0.3 s at
        64, every time). The view then reads a table of its rows (`_tables_of`)."""
        if self._materialized:
            return
        self._tables_of(MATERIALIZED)
        self._materialized = True

    def step_tables(self) -> None:
        """The step model's inputs the ingest left out (`tracekit.ingest.steptables`),
        computed once into tables when the model is built: their views compute them from
        the events in every query that reads them (a graph reads them in eight). Not at
        open: a run past the model's reach never reads them."""
        with self._lock:  # the model may be built on a thread of its own (`beside`)
            derived, self._derived = self._derived, []
            self._tables_of(derived)

    def _tables_of(self, views) -> None:
        """Each of `views` read from a table of its rows (in the in-memory database, so
        cursors of other threads see it too); the SQL sandbox keeps the definitions the
        store made."""
        if not views:
            return
        if getattr(self, "_view_sql", None) is None:
            from tracekit.store.sandbox import view_definitions

            self._view_sql = view_definitions(self.con)
        for name in views:
            self.con.execute(f"CREATE TABLE _m_{name} AS SELECT * FROM {name}")
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM _m_{name}")

    def readonly_sql(self, query: str, bounds=None) -> duckdb.DuckDBPyRelation:
        """Run user SQL that may only read the run (`tracekit.store.sandbox`): one SELECT-like
        statement, on a connection that can open no file outside the run's cache, within
        `bounds` (`sandbox.Bounds`: memory and time; default a share of the machine)."""
        from tracekit.store import sandbox

        bounds = bounds or sandbox.Bounds.of()
        box = getattr(self, "_sandbox", None)
        if box is not None and self._sandbox_memory != bounds.memory:  # locked: open anew
            box.close()
            box = None
        if box is None:
            box = self._sandbox = sandbox.open_sandbox(
                self.con, self.cache_dir, getattr(self, "_view_sql", None), bounds
            )
            self._sandbox_memory = bounds.memory
        return sandbox.run_readonly(box, query, bounds)

    def views(self) -> list[str]:
        return sorted(sql.docs())

    def describe(self, view: str) -> list[tuple[str, str, str]]:
        """(column, type, doc) for a public table or view."""
        d = sql.docs().get(view)
        if d is None:
            raise TracekitError(f"no view named {view!r}; views: {', '.join(sorted(sql.docs()))}")
        types = self.con.sql(f"DESCRIBE {view}").fetchall()
        return [(c, t, d.columns.get(c, "")) for c, t, *_ in types]

    def close(self) -> None:
        for t in self._beside:  # their cursors read the database closed below
            t.join()
        self._beside.clear()
        box = getattr(self, "_sandbox", None)
        if box is not None:
            box.close()
            self._sandbox = None
        self._con.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
