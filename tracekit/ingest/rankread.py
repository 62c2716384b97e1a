"""A batch's traces read into its base tables (`_batch_events`, `_batch_flows`,
`_batch_memory`, `_batch_threads`), all at once (`_read_together`) or one file, and each
rank of a merged file, at a time (`_ingest_file`); and what a file that cannot be read
leaves as its result (`_failure`)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.sql.text import sql_str


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
    from tracekit.ingest.tracefile import comm_rank_key, decode, resolve_rank

    results: list[dict | None] = [None] * len(items)
    read: list[tuple[int, Path, str, object, int, str]] = []
    tmps: list[Path] = []
    try:
        for i, (path, key) in enumerate(items):
            try:
                header, text = decode(path, rank_as_is=True)
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
        # every file has distributedInfo (else None was returned): one key of
        # record_param_comms' "Rank" for the whole batch
        key_of_rank = comm_rank_key(read[0][3])
        listed = ", ".join(sql_str(str(t)) for t in tmps)
        try:
            columns = ingest.raw_columns(True, key_of_rank)
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
    con.execute(f"CREATE TABLE _batch_events AS {ingest.events_sql(rank, base, True, key_of_rank)}")
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


def _ingest_file(con, path: Path, cdir: Path, key: str, single: bool, rows: _BatchRows) -> dict:
    """One trace read on its own into the batch's base tables (`_ingest_rank`)."""
    import duckdb

    from tracekit.ingest import tables as ingest
    from tracekit.ingest.tracefile import comm_rank_key, decode, resolve_rank

    header, text = decode(path, rank_as_is=True)
    key_of_rank = comm_rank_key(header)  # the file's, not a merged file's rank's
    # beside the cache, named as the lock holder's leftovers are (removed after a kill)
    fd, tmp = tempfile.mkstemp(dir=cdir, prefix=f".{key}.events.", suffix=".tmp")
    typed = True
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text)
        del text
        try:
            typed = ingest.load_raw(con, Path(tmp), key_of_rank)
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
        _ingest_rank(con, path, header, rank, rank_source, (typed, key_of_rank), rows)
        parts = [{"rank": rank, "rank_source": rank_source, "key": key}]
    else:
        con.execute("ALTER TABLE raw RENAME TO _raw_all")
        parts = []
        for rank in merged:
            con.execute(f"CREATE OR REPLACE TABLE raw AS {ingest.merged_rank_sql(rank)}")
            source = f"merged file (RANK {rank})"
            rank_header = _rank_header(header, rank)
            _ingest_rank(con, path, rank_header, rank, source, (typed, key_of_rank), rows)
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


def _ingest_rank(con, path, header, rank, rank_source, read, rows: _BatchRows) -> None:
    """The base tables of one rank from the `raw` table of `con`, appended to the
    batch's (`_batch_<table>`); the derived tables are built once per batch
    (`_derive_and_write`). `read`: how `raw` was read (typed, the key of
    record_param_comms' "Rank")."""
    from tracekit.ingest import tables as ingest

    typed, key_of_rank = read
    base = header.baseTimeNanoseconds or 0
    built = {
        "events": ingest.events_sql(rank, base, typed, key_of_rank),
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
