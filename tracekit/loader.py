"""Ingest a run: every trace file → cached Parquet tables, ranks in parallel processes."""

from __future__ import annotations

import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from tracekit import cache
from tracekit.errors import TracekitError


@dataclass
class Source:
    path: Path
    key: str
    rank: int
    rank_source: str


# tables whose name in the ingest connection differs from their cache name
_INTERNAL = {"collectives": "_collectives"}


def ingest_file(
    path: Path,
    cdir: Path,
    key: str,
    single: bool,
    threads: int = 1,
    comm_kernels: tuple[str, ...] = (),
) -> list[dict]:
    """Parse one trace and write its tables to the cache. Runs in a worker process.

    Returns one part per rank the file holds: one for a Kineto trace, several for a
    merged multi-rank file (TraceLens TraceFusion), each cached under its own key."""
    import duckdb

    from tracekit import ingest
    from tracekit.tracefile import decode, resolve_rank

    header, text = decode(path)
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    fd, tmp = tempfile.mkstemp(prefix="tracekit-", suffix=".events.json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text)
        del text
        try:
            ingest.load_raw(con, Path(tmp))
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
    typed = ingest.raw_is_typed(con)
    merged = ingest.merged_ranks(con, header)
    if merged is None:
        rank, rank_source = resolve_rank(path, header, single)
        _ingest_rank(con, path, header, rank, rank_source, cdir, key, typed, comm_kernels)
        con.close()
        return [{"rank": rank, "rank_source": rank_source, "key": key}]
    con.execute("ALTER TABLE raw RENAME TO _raw_all")
    parts = []
    for rank in merged:
        con.execute(f"CREATE OR REPLACE TABLE raw AS {ingest.merged_rank_sql(rank)}")
        part_key = f"{key}.r{rank}"
        source = f"merged file (RANK {rank})"
        _ingest_rank(con, path, header, rank, source, cdir, part_key, typed, comm_kernels)
        parts.append({"rank": rank, "rank_source": source, "key": part_key})
    con.close()
    return parts


def _ingest_rank(con, path, header, rank, rank_source, cdir, key, typed, comm_kernels) -> None:
    """The tables of one rank from the `raw` table of `con`, written to the cache."""
    from tracekit import collectives, ingest, opscan
    from tracekit.store import RANK_MODULES, sql_module

    base = header.baseTimeNanoseconds or 0
    con.execute(f"CREATE OR REPLACE TABLE events AS {ingest.events_sql(rank, base, typed)}")
    con.execute(f"CREATE OR REPLACE TABLE flows AS {ingest.flows_sql(rank, base)}")
    con.execute(f"CREATE OR REPLACE TABLE memory AS {ingest.memory_sql(rank, base, typed)}")
    con.execute(f"CREATE OR REPLACE TABLE threads AS {ingest.threads_sql(rank, typed)}")
    con.execute("DROP TABLE raw")
    info, pgs = ingest.rank_info_tables(con, rank, rank_source, path, header)
    con.register("rank_info", info)
    con.register("process_groups", pgs)
    con.register("kernel_classes", collectives.kernel_classes(con, rank, comm_kernels))
    world = info["world_size"][0].as_py()
    con.register("_collectives", collectives.derive(con, rank, pgs, world))
    con.register("_ops", opscan.scan(con))
    # rank-local derived views, materialized once here and read back from Parquet
    for module in RANK_MODULES:
        con.execute(sql_module(module))
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
    root: Path, files: list[Path], workers: int | None = None, comm_kernels: tuple[str, ...] = ()
) -> tuple[Path, list[Source]]:
    """Make sure every file has a fresh cache entry; return the cache dir and the sources
    (one per rank: a merged multi-rank file gives several)."""
    cdir = cache.cache_dir(root)
    index = cache.load_index(cdir)
    single = len(files) == 1
    keys = {f: cache.source_key(root, f) for f in files}
    todo = [f for f in files if not cache.is_fresh(cdir, index, keys[f], f, comm_kernels)]
    if todo:
        cores = os.cpu_count() or 1
        n = max(1, min(workers or cores, len(todo)))
        threads = max(1, cores // n)
        # fingerprints before reading: a file that changes during ingest is ingested again
        prints = {f: cache.fingerprint(f, comm_kernels) for f in todo}
        results: dict[Path, list[dict]] = {}
        args = {f: (f, cdir, keys[f], single, threads, comm_kernels) for f in todo}
        with _progress(len(todo)) as prog:
            task = prog.add_task(f"ingesting {len(todo)} traces", total=len(todo)) if prog else None
            if n == 1:
                for f in todo:
                    results[f] = ingest_file(*args[f])
                    if prog:
                        prog.advance(task)
            else:
                with ProcessPoolExecutor(max_workers=n) as pool:
                    futs = {pool.submit(ingest_file, *args[f]): f for f in todo}
                    try:
                        for fut in as_completed(futs):
                            results[futs[fut]] = fut.result()
                            if prog:
                                prog.advance(task)
                    except BaseException:
                        for fut in futs:
                            fut.cancel()
                        raise
        for f, parts in results.items():
            index[keys[f]] = {
                "source": os.path.relpath(f, root),
                "fingerprint": prints[f],
                "rank": parts[0]["rank"],
                "rank_source": parts[0]["rank_source"],
                "parts": parts,
            }
        cache.save_index(cdir, index)
    sources = []
    for f in files:
        entry = index[keys[f]]
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
