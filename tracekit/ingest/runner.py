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


@dataclass
class Source:
    path: Path
    key: str
    rank: int
    rank_source: str


@dataclass
class IngestNotes:
    """What an ingest left out: files it could not read, events it skipped."""

    unreadable: list[dict] = field(default_factory=list)  # {"path", "reason"}
    skipped_events: dict[str, dict[str, int]] = field(default_factory=dict)  # source → reason → n
    trace_ids: dict[str, str] = field(default_factory=dict)  # source → Kineto trace_id


# tables whose name in the ingest connection differs from their cache name
_INTERNAL = {"collectives": "_collectives"}


def ingest_file(
    path: Path,
    cdir: Path,
    key: str,
    single: bool,
    threads: int = 1,
    comm_kernels: tuple[str, ...] = (),
) -> dict:
    """Parse one trace and write its tables to the cache. Runs in a worker process.

    Returns the file's `parts`, one per rank it holds (one for a Kineto trace, several
    for a merged multi-rank file, TraceLens TraceFusion, each cached under its own key),
    the events it skipped by reason, and its Kineto `trace_id`. A value no table can hold
    (a number out of every range) stops this file with a `TracekitError` naming it, as a
    file that cannot be read does."""
    import duckdb

    try:
        return _ingest_file(path, cdir, key, single, threads, comm_kernels)
    except (duckdb.ConversionException, duckdb.OutOfRangeException) as exc:
        detail = str(exc).splitlines()[0][:200]
        raise TracekitError(
            f"{path} holds a value tracekit cannot store ({detail}); fix or re-export the "
            "trace, and report it if the trace is as torch wrote it"
        ) from exc
    except (MemoryError, duckdb.OutOfMemoryException) as exc:
        raise _OutOfMemory(
            f"{path}: out of memory while ingesting it; free memory, use --workers 1, or "
            "a bigger machine"
        ) from exc


class _OutOfMemory(TracekitError):
    """Not the file's fault: not remembered as a damaged file."""


def _ingest_file(
    path: Path, cdir: Path, key: str, single: bool, threads: int, comm_kernels: tuple[str, ...]
) -> dict:
    import duckdb

    from tracekit.ingest import tables as ingest
    from tracekit.ingest.tracefile import decode, resolve_rank

    header, text = decode(path)
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET asof_loop_join_threshold = 0")  # see tracekit.store.Run
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
        _ingest_rank(con, path, header, rank, rank_source, cdir, key, typed, comm_kernels)
        parts = [{"rank": rank, "rank_source": rank_source, "key": key}]
    else:
        con.execute("ALTER TABLE raw RENAME TO _raw_all")
        parts = []
        for rank in merged:
            con.execute(f"CREATE OR REPLACE TABLE raw AS {ingest.merged_rank_sql(rank)}")
            part_key = f"{key}.r{rank}"
            source = f"merged file (RANK {rank})"
            hdr = _rank_header(header, rank)
            _ingest_rank(con, path, hdr, rank, source, cdir, part_key, typed, comm_kernels)
            parts.append({"rank": rank, "rank_source": source, "key": part_key})
    con.close()
    return {"parts": parts, "skipped_events": skipped, "trace_id": header.trace_id}


def _rank_header(header, rank: int):
    """A merged file's header for one of its ranks: that rank's distributedInfo where the
    file keeps it (`tracekit export`), else none (TraceFusion)."""
    import msgspec

    by_rank = header.distributedInfoByRank
    info = by_rank.get(str(rank)) if isinstance(by_rank, dict) else None
    return msgspec.structs.replace(header, distributedInfo=info if isinstance(info, dict) else None)


def _ingest_rank(con, path, header, rank, rank_source, cdir, key, typed, comm_kernels) -> None:
    """The tables of one rank from the `raw` table of `con`, written to the cache."""
    from tracekit import sql
    from tracekit.ingest import collectives, opscan
    from tracekit.ingest import tables as ingest

    base = header.baseTimeNanoseconds or 0
    con.execute(f"CREATE OR REPLACE TABLE events AS {ingest.events_sql(rank, base, typed)}")
    con.execute(f"CREATE OR REPLACE TABLE flows AS {ingest.flows_sql(rank, base)}")
    con.execute(f"CREATE OR REPLACE TABLE memory AS {ingest.memory_sql(rank, base, typed)}")
    con.execute(f"CREATE OR REPLACE TABLE threads AS {ingest.threads_sql(rank, typed)}")
    con.execute("DROP TABLE raw")
    info, pgs = ingest.rank_info_tables(con, rank, rank_source, path, header, cdir)
    collectives.kernel_classes(con, rank, cdir, comm_kernels)
    collectives.derive(con, rank, pgs, info["world_size"], cdir)
    opscan.scan(con, cdir)
    # rank-local derived views, materialized once here (each a table before the next
    # module reads it, so none is computed twice) and read back from Parquet
    for module in sql.RANK_MODULES:
        name = sql.table_name(module)
        con.execute(f"DROP TABLE IF EXISTS {name}")  # the previous part of a merged file
        con.execute(sql.module(module))
        con.execute(f"CREATE TABLE _m AS SELECT * FROM {name}")
        con.execute(f"DROP VIEW {name}")
        con.execute(f"ALTER TABLE _m RENAME TO {name}")
    for table in cache.TABLES:
        cache.write_table(con, cdir, key, table, _INTERNAL.get(table, table))


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
    todo = [
        f
        for f in files
        if f not in failed and not cache.is_fresh(cdir, index, keys[f], f, comm_kernels)
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
        n = resources.workers_that_fit(todo, n) if not cluster else n
        threads = max(1, cores // n) if not cluster else 1
        # fingerprints before reading: a file that changes during ingest is ingested again
        prints = {f: cache.fingerprint(f, comm_kernels) for f in todo}
        results: dict[Path, dict] = {}
        out_of_memory: set[Path] = set()
        args = {f: (f, cdir, keys[f], single, threads, comm_kernels) for f in todo}
        with _progress(len(todo)) as prog:
            task = prog.add_task(f"ingesting {len(todo)} traces", total=len(todo)) if prog else None
            if n == 1 and not cluster:
                for f in todo:
                    try:
                        results[f] = ingest_file(*args[f])
                    except _OutOfMemory as exc:
                        failed[f] = str(exc)
                        out_of_memory.add(f)
                    except TracekitError as exc:
                        failed[f] = str(exc)
                    if prog:
                        prog.advance(task)
            else:
                with _executor(n, cluster) as pool:
                    futs = {pool.submit(ingest_file, *args[f]): f for f in todo}
                    try:
                        for fut in as_completed(futs):
                            try:
                                results[futs[fut]] = fut.result()
                            except _OutOfMemory as exc:
                                failed[futs[fut]] = str(exc)
                                out_of_memory.add(futs[fut])
                            except TracekitError as exc:
                                failed[futs[fut]] = str(exc)
                            if prog:
                                prog.advance(task)
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
        parts = entry.get("parts") or [
            {"rank": entry["rank"], "rank_source": entry["rank_source"], "key": keys[f]}
        ]
        sources.extend(Source(f, p["key"], p["rank"], p["rank_source"]) for p in parts)
    by_rank: dict[int, Source] = {}
    for s in sources:
        if s.rank in by_rank:
            raise TracekitError(
                f"rank {s.rank} appears twice ({by_rank[s.rank].path.name} and {s.path.name}); "
                "pass one trace per rank (one ProfilerStep cycle per run folder)"
            )
        by_rank[s.rank] = s
    return cdir, sorted(sources, key=lambda s: s.rank)
