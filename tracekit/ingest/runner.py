"""Ingest a run: every trace file → cached Parquet tables, ranks in parallel processes."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.ingest import cache, resources
from tracekit.sql.text import sql_str


@dataclass
class Source:
    path: Path
    key: str  # the part's own key (a merged file's rank: `<file key>.r<rank>`)
    rank: int
    rank_source: str
    batch: str  # the cached tables it is in: `<batch>.<table>.parquet` (`cache.table_path`)
    batch_parts: int  # how many parts (ranks) that batch holds


# Batches (`ingest_batch`): traces of less than SMALL_BYTES of JSON are ingested together,
# up to BATCH_BYTES of JSON a batch, in a multiple of the workers' count of batches (equal
# batches then end together: 13 batches on 2 workers left one core idle for the 13th); a
# bigger trace is a batch of its own (its tables alone are what a worker can hold).
# 128 MiB, by measurement (DLRM ranks of 0.8 MB, one worker): 20.8 ms of CPU a rank in
# batches of 74 ranks (64 MiB), 19.6 ms in batches of 148, at 421 MB of peak RSS a
# worker, under the 1 GB the analysis of those 1,024 ranks takes afterwards.
SMALL_BYTES = 16 * 2**20
BATCH_BYTES = 128 * 2**20


def plan_batches(files: list[Path], workers: int) -> list[list[Path]]:
    """`files` cut into the batches of one ingest: big traces alone, small ones in runs of
    consecutive files of about equal JSON size, as many batches of them as it takes to
    keep each within BATCH_BYTES, rounded up to a multiple of `workers` (when there are
    that many files)."""
    sizes = {f: resources.text_bytes(f) for f in files}
    big = [[f] for f in files if sizes[f] >= SMALL_BYTES]
    small = [f for f in files if sizes[f] < SMALL_BYTES]
    if not small:
        return big
    total = sum(sizes[f] for f in small)
    workers = max(1, workers)
    count = min(len(small), -(-max(1, -(-total // BATCH_BYTES)) // workers) * workers)
    per = total / count
    batches: list[list[Path]] = [[]]
    acc = 0
    for f in small:
        # a new batch once this one has its share, keeping one file for each batch to come
        if batches[-1] and acc >= per * len(batches) and len(batches) < count:
            batches.append([])
        batches[-1].append(f)
        acc += sizes[f]
    return big + batches


@dataclass
class IngestNotes:
    """What an ingest left out: files it could not read, events it skipped."""

    unreadable: list[dict] = field(default_factory=list)  # {"path", "reason"}
    skipped_events: dict[str, dict[str, int]] = field(default_factory=dict)  # source → reason → n
    trace_ids: dict[str, str] = field(default_factory=dict)  # source → Kineto trace_id


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
) -> list[dict]:
    """Parse the traces `items` ((path, key) pairs) in one DuckDB connection and write
    their tables to the cache as one Parquet file per table, `<batch>.<table>.parquet`,
    the ranks one after another. Runs in a worker process (or a Dask task).

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
            return _each_alone(items, cdir, batch, single, threads, comm_kernels)
        if parts:
            try:
                _derive_and_write(con, cdir, batch, rows, comm_kernels)
            except errors as exc:
                if len(items) == 1:
                    return [_failure(items[0][0], exc)]
                con.close()  # one file's rows stopped the batch's tables: each file alone
                return _each_alone(items, cdir, batch, single, threads, comm_kernels)
        for part in parts:
            part["batch"] = batch
            part["batch_parts"] = len(parts)
    finally:
        con.close()
    return results


def _each_alone(items, cdir, batch, single, threads, comm_kernels) -> list[dict]:
    return [
        ingest_batch([item], cdir, f"{batch}-{i}", single, threads, comm_kernels)[0]
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


def _failure(path: Path, exc: BaseException) -> dict:
    """The result of a file that could not be ingested: why, and whether for want of memory."""
    import duckdb

    if isinstance(exc, duckdb.ConversionException | duckdb.OutOfRangeException):
        detail = str(exc).splitlines()[0][:200]
        return {
            "error": f"{path} holds a value tracekit cannot store ({detail}); fix or re-export "
            "the trace, and report it if the trace is as torch wrote it"
        }
    if isinstance(exc, MemoryError | duckdb.OutOfMemoryException):
        return {
            "error": f"{path}: out of memory while ingesting it; free memory, use --workers 1, "
            "or a bigger machine",
            "out_of_memory": True,
        }
    return {"error": str(exc)}


@dataclass
class _BatchRows:
    """The ranks of a batch so far: the `_batch_<name>` tables made, and what each rank's
    rank_info row is made of (rank, rank source, path, header)."""

    appended: set[str] = field(default_factory=set)
    ranks: list[tuple] = field(default_factory=list)


def _read_together(con, items, cdir: Path, batch: str, single: bool, rows: _BatchRows):
    """Read a batch of one-rank Kineto traces with one JSON scan into `raw` (the file of
    each event in column `_f`), then its base tables in one statement each. Returns the
    results as `ingest_batch`'s, or None when the batch is to be read one file at a time
    (a file without distributedInfo may be a merged one; a value the typed read cannot
    take is read leniently, file by file)."""
    import duckdb

    from tracekit import sql
    from tracekit.ingest import tables as ingest
    from tracekit.ingest.tracefile import decode, resolve_rank

    results: list[dict | None] = [None] * len(items)
    read: list[tuple[int, Path, str, object, int, str]] = []
    tmps: list[Path] = []
    try:
        for i, (path, key) in enumerate(items):
            try:
                header, text = decode(path)
                if not header.distributedInfo:
                    return None
                rank, rank_source = resolve_rank(path, header, single)
            except TracekitError as exc:
                results[i] = _failure(path, exc)
                continue
            # beside the cache, named as the lock holder's leftovers are (removed after a kill)
            tmp = cdir / f".{batch}.{len(read):06d}.events.tmp"
            tmps.append(tmp)
            tmp.write_bytes(text)
            del text
            read.append((i, path, key, header, rank, rank_source))
        if not read:
            return results
        listed = ", ".join(sql_str(str(t)) for t in tmps)
        try:
            columns = ingest.raw_columns(True)
            con.execute(sql.query("ingest.tables", "read_batch", paths=listed, columns=columns))
        except duckdb.Error:
            return None
    finally:
        for t in tmps:
            t.unlink(missing_ok=True)
    counts = dict(con.execute(sql.query("ingest.tables", "events_per_file")).fetchall())
    skipped = ingest.skipped_events_by(con, "_f")
    # each event's rank and base time: the file's, by its index `_f`
    rank = "([" + ", ".join(str(r[4]) for r in read) + "][_f + 1])"
    bases = ", ".join(str(r[3].baseTimeNanoseconds or 0) for r in read)
    base = f"(([{bases}]::BIGINT[])[_f + 1])"
    con.execute(f"CREATE TABLE _batch_events AS {ingest.events_sql(rank, base, True)}")
    con.execute(f"CREATE TABLE _batch_flows AS {ingest.flows_sql(rank, base)}")
    con.execute(f"CREATE TABLE _batch_memory AS {ingest.memory_sql(rank, base, True)}")
    con.execute(f"CREATE TABLE _batch_threads AS {ingest.threads_sql(rank, True)}")
    con.execute("DROP TABLE raw")
    rows.appended.update(("events", "flows", "memory", "threads"))
    for f, (i, path, key, header, r, rank_source) in enumerate(read):
        if not counts.get(f):
            results[i] = {"error": f"{path} has no traceEvents: it is empty or not a Kineto trace"}
            continue
        rows.ranks.append((r, rank_source, path, header))
        results[i] = {
            "parts": [{"rank": r, "rank_source": rank_source, "key": key}],
            "skipped_events": skipped.get(f, {}),
            "trace_id": header.trace_id,
        }
    return results


def _derive_and_write(
    con, cdir: Path, batch: str, rows: _BatchRows, comm_kernels: tuple[str, ...]
) -> None:
    """The batch's derived tables, each built once over all its ranks from its base
    tables (rank info, kernel classes, collective rows, counted ops, then the rank-local
    SQL modules `tracekit.sql.RANK_MODULES`, which partition by rank), then every table
    of the batch written to the cache."""
    from tracekit import sql
    from tracekit.ingest import collectives, coltable, opscan
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
    collectives.kernel_classes(con, cdir, comm_kernels)
    groups = {r["rank"]: (pg, r["world_size"]) for r, pg in zip(info, pgs, strict=True)}
    collectives.tables(con, collectives.derive_rows(con, groups), cdir)
    opscan.scan(con, cdir)
    # materialized once here (each a table before the next module reads it, so none is
    # computed twice) and read back from Parquet
    for module in sql.RANK_MODULES:
        name = sql.table_name(module)
        con.execute(sql.module(module))
        con.execute(f"CREATE TABLE _m AS SELECT * FROM {name}")
        con.execute(f"DROP VIEW {name}")
        con.execute(f"ALTER TABLE _m RENAME TO {name}")
    for table in cache.TABLES:
        cache.write_table(con, cdir, batch, table, _INTERNAL.get(table, table))


def _ingest_file(con, path: Path, cdir: Path, key: str, single: bool, rows: _BatchRows) -> dict:
    """One trace read on its own into the batch's base tables (`_ingest_rank`)."""
    import duckdb

    from tracekit.ingest import tables as ingest
    from tracekit.ingest.tracefile import decode, resolve_rank

    header, text = decode(path)
    # beside the cache, named as the lock holder's leftovers are (removed after a kill)
    fd, tmp = tempfile.mkstemp(dir=cdir, prefix=f".{key}.events.", suffix=".tmp")
    typed = True
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text)
        del text
        try:
            typed = ingest.load_raw(con, Path(tmp))
        except duckdb.Error as exc:
            detail = str(exc).splitlines()[0][:200]
            raise TracekitError(
                f"{path} is not valid trace JSON ({detail}); the file may be truncated or "
                "damaged — re-export the trace"
            ) from exc
    finally:
        Path(tmp).unlink(missing_ok=True)
    if con.execute("SELECT count(*) FROM raw").fetchall()[0][0] == 0:
        raise TracekitError(f"{path} has no traceEvents: it is empty or not a Kineto trace")
    skipped = ingest.skipped_events(con)
    merged = ingest.merged_ranks(con, header, typed)
    if merged is None:
        rank, rank_source = resolve_rank(path, header, single)
        _ingest_rank(con, path, header, rank, rank_source, typed, rows)
        parts = [{"rank": rank, "rank_source": rank_source, "key": key}]
    else:
        con.execute("ALTER TABLE raw RENAME TO _raw_all")
        parts = []
        for rank in merged:
            con.execute(f"CREATE OR REPLACE TABLE raw AS {ingest.merged_rank_sql(rank)}")
            source = f"merged file (RANK {rank})"
            _ingest_rank(con, path, _rank_header(header, rank), rank, source, typed, rows)
            parts.append({"rank": rank, "rank_source": source, "key": f"{key}.r{rank}"})
        con.execute("DROP TABLE _raw_all")
        con.execute("DROP TABLE IF EXISTS _pid_rank")
    return {"parts": parts, "skipped_events": skipped, "trace_id": header.trace_id}


def _rank_header(header, rank: int):
    """A merged file's header for one of its ranks: that rank's distributedInfo where the
    file keeps it (`tracekit export`), else none (TraceFusion)."""
    import msgspec

    by_rank = header.distributedInfoByRank
    info = by_rank.get(str(rank)) if isinstance(by_rank, dict) else None
    return msgspec.structs.replace(header, distributedInfo=info if isinstance(info, dict) else None)


def _ingest_rank(con, path, header, rank, rank_source, typed, rows: _BatchRows) -> None:
    """The base tables of one rank from the `raw` table of `con`, appended to the
    batch's (`_batch_<table>`); the derived tables are built once per batch
    (`_derive_and_write`)."""
    from tracekit.ingest import tables as ingest

    base = header.baseTimeNanoseconds or 0
    built = {
        "events": ingest.events_sql(rank, base, typed),
        "flows": ingest.flows_sql(rank, base),
        "memory": ingest.memory_sql(rank, base, typed),
        "threads": ingest.threads_sql(rank, typed),
    }
    # the rank's rows join the batch's (all of its tables, or none of them)
    con.execute("BEGIN TRANSACTION")
    try:
        for name, query in built.items():
            if name in rows.appended:
                con.execute(f"INSERT INTO _batch_{name} BY NAME {query}")
            else:
                con.execute(f"CREATE TABLE _batch_{name} AS {query}")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    con.execute("DROP TABLE raw")
    rows.appended.update(built)
    rows.ranks.append((rank, rank_source, path, header))


def _progress(total: int):
    """A rich progress bar on an interactive terminal, nothing otherwise."""
    if not sys.stderr.isatty() or os.environ.get("TRACEKIT_NO_PROGRESS"):
        return nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    )


def ingest_run(
    root: Path,
    files: list[Path],
    workers: int | None = None,
    comm_kernels: tuple[str, ...] = (),
    notes: IngestNotes | None = None,
    cluster: str | None = None,
    single: bool | None = None,
) -> tuple[Path, list[Source]]:
    """Make sure every file has a fresh cache entry; return the cache dir and the sources
    (one per rank: a merged multi-rank file gives several).

    `single`: the run is one file (a trace with no rank anywhere is then rank 0); by
    default, whether `files` is one file — a caller ingesting part of a run says no.

    A file that cannot be read is left out and named in `notes.unreadable` (the run is
    analysed without it); when no file can be read, its error is raised. `cluster`: run
    the per-file ingest on a Dask cluster (`tracekit.ingest.cluster`) instead of local processes."""
    notes = notes if notes is not None else IngestNotes()
    cdir = cache.cache_dir(root)
    with cache.locked(cdir):  # a second process waits here, then finds the work done
        if single is None:
            single = len(files) == 1
        return _ingest_locked(root, files, cdir, workers, notes, comm_kernels, cluster, single)


@contextmanager
def _executor(n: int, cluster: str | None) -> Iterator[Executor]:
    if cluster:
        from tracekit.ingest.cluster import executor

        with executor(cluster) as (ex, _workers):
            yield ex
    else:
        with ProcessPoolExecutor(max_workers=n) as ex:
            yield ex


def _ingest_locked(
    root: Path,
    files: list[Path],
    cdir: Path,
    workers: int | None,
    notes: IngestNotes,
    comm_kernels: tuple[str, ...],
    cluster: str | None = None,
    single: bool = False,
) -> tuple[Path, list[Source]]:
    index = cache.load_index(cdir)
    keys = {f: cache.source_key(root, f) for f in files}
    # a file that failed before and has not changed fails again: not read twice
    failed = {
        f: index[keys[f]]["error"]
        for f in files
        if "error" in index.get(keys[f], {})
        and index[keys[f]].get("fingerprint") == cache.fingerprint(f, comm_kernels)
    }
    present = set(os.listdir(cdir))
    todo = [
        f
        for f in files
        if f not in failed and not cache.is_fresh(cdir, index, keys[f], f, comm_kernels, present)
    ]
    # a trace too big for the memory left is named now, not killed by the OOM killer later
    # (not remembered: another time, or machine, may have the memory)
    # (a cluster's workers have memory of their own)
    if not cluster:
        failed.update(resources.too_big(todo))
    todo = [f for f in todo if f not in failed]
    if todo:
        cores = os.cpu_count() or 1
        n = max(1, min(workers or cores, len(todo)))
        batches = plan_batches(todo, n)
        if not cluster:  # as many workers as their batches fit in memory, batches planned for them
            fit = resources.workers_that_fit(batches, n)
            if fit < n:
                n = fit
                batches = plan_batches(todo, n)
        threads = max(1, cores // n) if not cluster else 1
        # fingerprints before reading: a file that changes during ingest is ingested again
        prints = {f: cache.fingerprint(f, comm_kernels) for f in todo}
        results: dict[Path, dict] = {}
        out_of_memory: set[Path] = set()

        def args(batch: list[Path]) -> tuple:
            name = cache.batch_name([(keys[f], prints[f]) for f in batch])
            return ([(f, keys[f]) for f in batch], cdir, name, single, threads, comm_kernels)

        def take(batch: list[Path], out: list[dict]) -> None:
            for f, r in zip(batch, out, strict=True):
                if "error" not in r:
                    results[f] = r
                    continue
                failed[f] = r["error"]
                if r.get("out_of_memory"):
                    out_of_memory.add(f)

        with _progress(len(todo)) as prog:
            task = prog.add_task(f"ingesting {len(todo)} traces", total=len(todo)) if prog else None
            if n == 1 and not cluster:
                for batch in batches:
                    take(batch, ingest_batch(*args(batch)))
                    if prog:
                        prog.advance(task, len(batch))
            else:
                with _executor(n, cluster) as pool:
                    futs = {pool.submit(ingest_batch, *args(b)): i for i, b in enumerate(batches)}
                    try:
                        for fut in as_completed(futs):
                            batch = batches[futs[fut]]
                            take(batch, fut.result())
                            if prog:
                                prog.advance(task, len(batch))
                    except BrokenProcessPool as exc:  # a worker was killed (the OOM killer)
                        raise TracekitError(
                            f"an ingest process died while reading {root} (out of memory?); "
                            "retry with --workers 1, or free memory"
                        ) from exc
                    except BaseException as exc:
                        for fut in futs:
                            fut.cancel()
                        if type(exc).__module__.startswith("distributed"):  # KilledWorker …
                            raise TracekitError(
                                f"--cluster {cluster}: a Dask worker failed while ingesting "
                                f"{root} ({type(exc).__name__}: {exc}); check the workers' "
                                "memory and that they see the run folder at the same path"
                            ) from exc
                        raise
        for f, r in results.items():
            index[keys[f]] = {
                "source": os.path.relpath(f, root),
                "fingerprint": prints[f],
                "rank": r["parts"][0]["rank"],
                "rank_source": r["parts"][0]["rank_source"],
                "parts": r["parts"],
                "skipped_events": r["skipped_events"],
                "trace_id": r["trace_id"],
            }
        for f in todo:
            if f in failed and f not in out_of_memory:  # remembered: not read again
                index[keys[f]] = {
                    "source": os.path.relpath(f, root),
                    "fingerprint": prints[f],
                    "error": failed[f],
                }
        cache.save_index(cdir, index)
        cache.prune(cdir, index)
    if len(failed) == len(files):
        first = next(iter(failed.values()))
        if len(files) == 1:
            raise TracekitError(first)
        raise TracekitError(f"none of the {len(files)} traces could be read; the first: {first}")
    for f, reason in failed.items():
        notes.unreadable.append({"path": str(f), "reason": reason})
    files = [f for f in files if f not in failed]
    sources = []
    for f in files:
        entry = index[keys[f]]
        if entry.get("skipped_events"):
            notes.skipped_events[entry["source"]] = entry["skipped_events"]
        if entry.get("trace_id"):
            notes.trace_ids[entry["source"]] = entry["trace_id"]
        sources.extend(
            Source(f, p["key"], p["rank"], p["rank_source"], p["batch"], p["batch_parts"])
            for p in entry["parts"]
        )
    by_rank: dict[int, Source] = {}
    for s in sources:
        if s.rank in by_rank:
            raise TracekitError(
                f"rank {s.rank} appears twice ({by_rank[s.rank].path.name} and {s.path.name}); "
                "pass one trace per rank (one ProfilerStep cycle per run folder)"
            )
        by_rank[s.rank] = s
    return cdir, sorted(sources, key=lambda s: s.rank)
