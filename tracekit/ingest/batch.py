"""One batch of traces in a worker process (or a Dask task): read (`rankread`), its
derived tables built once over all its ranks, every table written to the cache."""

from __future__ import annotations

import re
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.ingest import cache
from tracekit.ingest.rankread import _BatchRows, _failure, _ingest_file, _read_together

# tables whose name in the ingest connection differs from their cache name
_INTERNAL = {"collectives": "_collectives"}
# the base tables each rank appends to its batch's (`_batch_<name>`)
_BATCHED = ("events", "flows", "memory", "threads")


def ingest_file(
    path: Path,
    cdir: Path,
    key: str,
    single: bool,
    threads: int = 1,
    comm_kernels: tuple[str, ...] = (),
) -> dict:
    """Parse one trace and write its tables to the cache as a batch of one, named `key`.

    Returns the file's `parts`, one per rank it holds (one for a Kineto trace, several
    for a merged multi-rank file, TraceLens TraceFusion, each under its own key), the
    events it skipped by reason, and its Kineto `trace_id`. A file that cannot be read
    raises its `TracekitError`."""
    (result,) = ingest_batch([(path, key)], cdir, key, single, threads, comm_kernels)
    if "error" in result:
        raise (_OutOfMemory if result.get("out_of_memory") else TracekitError)(result["error"])
    return result


def ingest_batch(
    items: list[tuple[Path, str]],
    cdir: Path,
    batch: str,
    single: bool,
    threads: int = 1,
    comm_kernels: tuple[str, ...] = (),
    run_ranks: int = 0,
) -> list[dict]:
    """Parse the traces `items` ((path, key) pairs) in one DuckDB connection and write
    their tables to the cache as one Parquet file per table, `<batch>.<table>.parquet`,
    the ranks one after another. Runs in a worker process (or a Dask task).

    `run_ranks`: the ranks of the whole run (0: unknown), for whether the step model's
    inputs are worth building (`tracekit.ingest.steptables`).

    One result per item, in order: `ingest_file`'s dict (each part with its `batch`),
    or `{"error": reason, "out_of_memory": bool}` for a file that cannot be read (the
    batch goes on without it). A value no table can hold (a number out of every range)
    stops that file with an error naming it, as a file that cannot be read does.

    Why batches: a run of many small traces (1,024 ranks of a few MB) paid ~90 ms per
    rank for a connection, ~14 Parquet files, ~60 statements and a process hand-off
    each. A batch of Kineto traces is read by one JSON scan (`_read_together`); every
    table after that is one statement over all its ranks, every query of the Python-built
    tables one query, and the Parquet files one set."""
    import duckdb

    errors = _file_errors()
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET asof_loop_join_threshold = 0")  # see tracekit.store.Run
    rows = _BatchRows()
    try:
        results = _read_together(con, items, cdir, batch, single, rows) if len(items) > 1 else None
        if results is None:  # one at a time: merged files, odd values, a single file
            results = []
            for path, key in items:
                try:
                    results.append(_ingest_file(con, path, cdir, key, single, rows))
                except errors as exc:
                    results.append(_failure(path, exc))
        parts = [p for r in results for p in r.get("parts", ())]
        if len({p["rank"] for p in parts}) < len(parts) and len(items) > 1:
            con.close()  # a rank twice in one batch (the run will refuse it): each file alone
            return _each_alone(items, cdir, batch, single, threads, comm_kernels, run_ranks)
        if parts:
            try:
                _derive_and_write(con, cdir, batch, rows, comm_kernels, run_ranks)
            except errors as exc:
                if len(items) == 1:
                    return [_failure(items[0][0], exc)]
                con.close()  # one file's rows stopped the batch's tables: each file alone
                return _each_alone(items, cdir, batch, single, threads, comm_kernels, run_ranks)
        for part in parts:
            part["batch"] = batch
            part["batch_parts"] = len(parts)
    finally:
        con.close()
    return results


def _each_alone(items, cdir, batch, single, threads, comm_kernels, run_ranks) -> list[dict]:
    return [
        ingest_batch([item], cdir, f"{batch}-{i}", single, threads, comm_kernels, run_ranks)[0]
        for i, item in enumerate(items)
    ]


class _OutOfMemory(TracekitError):
    """Not the file's fault: not remembered as a damaged file."""


def _file_errors() -> tuple[type[BaseException], ...]:
    import duckdb

    return (
        TracekitError,
        MemoryError,
        duckdb.ConversionException,
        duckdb.OutOfRangeException,
        duckdb.OutOfMemoryException,
    )


_VIEW = re.compile(r"^CREATE OR REPLACE VIEW (\w+) AS", re.MULTILINE)


def _as_table(module: str) -> str:
    """A rank module's `CREATE OR REPLACE VIEW t AS …` as `CREATE TABLE t AS …`: the view,
    its copy and the rename cost 2 ms of binding per module (0.02 s a batch)."""
    text, n = _VIEW.subn(r"CREATE TABLE \1 AS", module)
    if n != 1:
        raise AssertionError(f"a rank module creates one view, not {n}")
    return text


def _derive_and_write(
    con, cdir: Path, batch: str, rows: _BatchRows, comm_kernels: tuple[str, ...], run_ranks: int
) -> None:
    """The batch's derived tables, each built once over all its ranks from its base
    tables (rank info, kernel classes, collective rows, counted ops, then the rank-local
    SQL modules `tracekit.sql.RANK_MODULES`, which partition by rank; the step model's
    inputs only for a run it can cover, `tracekit.ingest.steptables`), then every table
    of the batch written to the cache."""
    from tracekit import sql
    from tracekit.ingest import collectives, coltable, kernelclass, opscan, steptables
    from tracekit.ingest import tables as ingest

    for name in _BATCHED:
        con.execute(f"DROP TABLE IF EXISTS {name}")  # the last rank's own
        con.execute(f"ALTER TABLE _batch_{name} RENAME TO {name}")
    stats = ingest.rank_stats(con)
    info, pgs = [], []
    for rank, rank_source, path, header in rows.ranks:
        row, pg = ingest.rank_info_rows(
            rank, rank_source, path, header, stats.get(rank, ingest.NO_EVENTS)
        )
        info.append(row)
        pgs.append(pg)
    coltable.create(con, "rank_info", ingest.RANK_INFO, info, cdir)
    coltable.create(
        con, "process_groups", ingest.PROCESS_GROUPS, [g for pg in pgs for g in pg], cdir
    )
    kernelclass.kernel_classes(con, cdir, comm_kernels)
    groups = {r["rank"]: (pg, r["world_size"]) for r, pg in zip(info, pgs, strict=True)}
    collectives.tables(con, collectives.derive_rows(con, groups), cdir)
    opscan.scan(con, cdir)
    # materialized once here (each a table before the next module reads it, so none is
    # computed twice) and read back from Parquet
    skip = () if steptables.worth_building(con, run_ranks) else steptables.STEP_TABLES
    for module in sql.RANK_MODULES:
        if sql.table_name(module) not in skip:
            con.execute(_as_table(sql.module(module)))
    for table in (t for t in cache.TABLES if t not in skip):
        cache.write_table(con, cdir, batch, table, _INTERNAL.get(table, table))
