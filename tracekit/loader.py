"""Ingest a run: every trace file → cached Parquet tables, ranks in parallel processes."""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tracekit import cache, collectives, ingest
from tracekit.errors import TracekitError
from tracekit.tracefile import decode, resolve_rank


@dataclass
class Source:
    path: Path
    key: str
    rank: int
    rank_source: str


def ingest_file(path: Path, cdir: Path, key: str, single: bool) -> dict:
    """Parse one trace and write its tables to the cache. Runs in a worker process."""
    doc = decode(path)
    rank, rank_source = resolve_rank(path, doc, single)
    base = doc.baseTimeNanoseconds or 0
    xs, flows, mem, meta = ingest.split_events(doc)
    del doc.traceEvents[:]  # free the decoded list early; the tables hold what we need
    events = ingest.events_table(rank, xs, base)
    del xs
    info, pgs = ingest.rank_info(rank, rank_source, path, doc, events)
    world = info["world_size"][0].as_py()
    tables: dict[str, pa.Table] = {
        "events": events,
        "flows": ingest.flows_table(rank, flows, base),
        "memory": ingest.memory_table(rank, mem, base),
        "threads": ingest.threads_table(rank, meta),
        "rank_info": info,
        "process_groups": pgs,
        "collectives": collectives.derive(rank, events, pgs, world),
    }
    for name, table in tables.items():
        cache.write_table(cdir, key, name, table)
    return {"rank": rank, "rank_source": rank_source}


def _progress(total: int):
    """A rich progress bar on an interactive terminal, nothing otherwise."""
    if not sys.stderr.isatty() or os.environ.get("TRACEKIT_NO_PROGRESS"):
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    prog = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    )
    return prog


def ingest_run(
    root: Path, files: list[Path], workers: int | None = None
) -> tuple[Path, list[Source]]:
    """Make sure every file has a fresh cache entry; return the cache dir and the sources."""
    cdir = cache.cache_dir(root)
    index = cache.load_index(cdir)
    single = len(files) == 1
    keys = {f: cache.source_key(root, f) for f in files}
    todo = [f for f in files if not cache.is_fresh(cdir, index, keys[f], f)]
    if todo:
        n = workers or min(len(todo), os.cpu_count() or 1)
        results: dict[Path, dict] = {}
        prog = _progress(len(todo))
        t0 = time.perf_counter()
        if n <= 1 or len(todo) == 1:
            for f in todo:
                results[f] = ingest_file(f, cdir, keys[f], single)
        else:
            with ProcessPoolExecutor(max_workers=n) as pool:
                futs = {pool.submit(ingest_file, f, cdir, keys[f], single): f for f in todo}
                task = None
                if prog:
                    prog.start()
                    task = prog.add_task(f"ingesting {len(todo)} traces", total=len(todo))
                try:
                    for fut in as_completed(futs):
                        results[futs[fut]] = fut.result()
                        if prog:
                            prog.advance(task)
                except BaseException:
                    for fut in futs:
                        fut.cancel()
                    raise
                finally:
                    if prog:
                        prog.stop()
        for f, r in results.items():
            index[keys[f]] = {
                "source": os.path.relpath(f, root),
                "fingerprint": cache.fingerprint(f),
                "rank": r["rank"],
                "rank_source": r["rank_source"],
                "ingest_s": round(time.perf_counter() - t0, 3),
            }
        cache.save_index(cdir, index)
    sources = [
        Source(f, keys[f], index[keys[f]]["rank"], index[keys[f]]["rank_source"]) for f in files
    ]
    by_rank: dict[int, Source] = {}
    for s in sources:
        if s.rank in by_rank:
            raise TracekitError(
                f"rank {s.rank} appears twice ({by_rank[s.rank].path.name} and {s.path.name}); "
                "pass one trace per rank (one ProfilerStep cycle per run folder)"
            )
        by_rank[s.rank] = s
    return cdir, sorted(sources, key=lambda s: s.rank)
