"""Ingest a run: every trace file → cached Parquet tables, ranks in parallel processes.

The run's work is cut into batches (`tracekit.ingest.batchplan`), each read in a worker
process or a Dask task (`tracekit.ingest.batch`); here, the pool, the progress bar, the
cache index and the sources (one per rank) the run is analysed from."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.ingest import cache, resources
from tracekit.ingest.batch import ingest_batch, ingest_file
from tracekit.ingest.batchplan import BATCH_BYTES, SMALL_BYTES, plan_batches

# the names callers and tests read from here
__all__ = [
    "BATCH_BYTES",
    "SMALL_BYTES",
    "IngestNotes",
    "Source",
    "ingest_batch",
    "ingest_file",
    "ingest_run",
    "plan_batches",
]


@dataclass
class Source:
    path: Path
    key: str  # the part's own key (a merged file's rank: `<file key>.r<rank>`)
    rank: int
    rank_source: str
    batch: str  # the cached tables it is in: `<batch>.<table>.parquet` (`cache.table_path`)
    batch_parts: int  # how many parts (ranks) that batch holds


@dataclass
class IngestNotes:
    """What an ingest left out: files it could not read, events it skipped."""

    unreadable: list[dict] = field(default_factory=list)  # {"path", "reason"}
    skipped_events: dict[str, dict[str, int]] = field(default_factory=dict)  # source → reason → n
    trace_ids: dict[str, str] = field(default_factory=dict)  # source → Kineto trace_id


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
    while_ingesting: Callable[[], object] | None = None,
) -> tuple[Path, list[Source]]:
    """Make sure every file has a fresh cache entry; return the cache dir and the sources
    (one per rank: a merged multi-rank file gives several).

    `single`: the run is one file (a trace with no rank anywhere is then rank 0); by
    default, whether `files` is one file — a caller ingesting part of a run says no.

    A file that cannot be read is left out and named in `notes.unreadable` (the run is
    analysed without it); when no file can be read, its error is raised. `cluster`: run
    the per-file ingest on a Dask cluster (`tracekit.ingest.cluster`) instead of local processes.

    `while_ingesting`: called on a thread of this process while local worker processes
    read (this process only waits for them meanwhile), joined before the ingest returns;
    what it raises is dropped. Not called when nothing is read, or read here alone
    (`--workers 1`), or on a cluster."""
    notes = notes if notes is not None else IngestNotes()
    cdir = cache.cache_dir(root)
    with cache.locked(cdir):  # a second process waits here, then finds the work done
        if single is None:
            single = len(files) == 1
        return _ingest_locked(
            root, files, cdir, workers, notes, comm_kernels, cluster, single, while_ingesting
        )


@contextmanager
def _executor(n: int, cluster: str | None) -> Iterator[Executor]:
    if cluster:
        from tracekit.ingest.cluster import executor

        with executor(cluster) as (ex, _workers):
            yield ex
    else:
        _preload()
        pool = ProcessPoolExecutor(max_workers=n)
        try:
            yield pool
        except BaseException:
            pool.shutdown(wait=True)  # the batches still running end first, as before
            raise
        # every batch is done: the workers' exit (10–30 ms of unmapping their memory) is
        # not waited for here; the interpreter's exit joins them
        pool.shutdown(wait=False)


def _beside(fn: Callable[[], object]) -> threading.Thread:
    """`fn()` on a thread of its own; what it raises is dropped (work done ahead of need,
    which its caller does again, and meets the error there)."""

    def work() -> None:
        with suppress(Exception):
            fn()

    t = threading.Thread(target=work, name="tracekit-while-ingesting", daemon=True)
    t.start()
    return t


def _preload() -> None:
    """Import what a worker's batch imports, before the pool forks: each worker then finds
    it loaded (0.1 s of CPU a worker: duckdb, msgspec, isal, the ingest's modules), and
    the analysis after the ingest imports most of it in this process anyway. Under a
    start method that does not fork, only this process pays, 0.1 s once."""
    import duckdb  # noqa: F401

    from tracekit.ingest import (  # noqa: F401
        collectives,
        kernelclass,
        opscan,
        rankread,
        steptables,
        tables,
        tracefile,
    )


def _ingest_locked(
    root: Path,
    files: list[Path],
    cdir: Path,
    workers: int | None,
    notes: IngestNotes,
    comm_kernels: tuple[str, ...],
    cluster: str | None = None,
    single: bool = False,
    while_ingesting: Callable[[], object] | None = None,
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
            items = [(f, keys[f]) for f in batch]
            return (items, cdir, name, single, threads, comm_kernels, len(files))

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
                    # after the submits: the pool forks its workers at the first
                    beside = _beside(while_ingesting) if while_ingesting and not cluster else None
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
                    finally:
                        if beside is not None:
                            beside.join()
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
