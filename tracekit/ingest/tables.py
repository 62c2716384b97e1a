"""One trace's events → typed tables (the DESIGN store contract), in DuckDB.

`load_raw` hands the text of the `traceEvents` array to DuckDB's JSON reader with
an explicit schema: every kept `args` key is read as JSON and cast with TRY_CAST,
so a value of an unexpected type becomes NULL instead of failing the file. The
tables below are then plain SQL over that `raw` table:

- `events`: one row per complete (`ph: X`) event, integer-ns absolute time.
- `flows`: `ph: s/f/t` flow endpoints (`ac2g` CPU→GPU launches, `fwdbwd`).
- `memory`: `[memory]` instants (allocator deltas and totals).
- `threads`: thread and process names from `ph: M` metadata.
- `rank_info` / `process_groups`: built from the header (`rank_info_rows`).

The SQL of a table takes its rank and base time as SQL: literals for one trace, or
expressions of the file each row came from when `raw` holds a batch of traces.

Time: `ts_ns = baseTimeNanoseconds + round(ts_us * 1000)`, scaling the integer and
fractional parts of `ts` separately so 3-decimal microsecond stamps land on the
exact nanosecond.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from tracekit.ingest.tracefile import Header
from tracekit.sql.text import sql_str

# Kineto `cat` (lower-cased; old traces capitalise) → tracekit `kind`.
CAT_KIND = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "python_function": "python",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "runtime",
    "hip_runtime": "runtime",
    "xpu_runtime": "runtime",  # Intel XPU: its kernels are `kernel` events
    "xpu_driver": "runtime",
    "privateuse1_runtime": "runtime",
    "privateuse1_driver": "runtime",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_sync": "sync",
    "trace": "trace",
}

# Device-side Kineto categories of accelerators tracekit does not model (Kineto
# ActivityType names: MTIA's `mtia_ccp_events`/`mtia_insight`, Gaudi's `hpu_op`, and the
# `mlu_*`/`gcu_*` copies and notifiers of out-of-tree backends). Their events stay in
# `events` as kind `other`, which no figure reads: each file's count is reported as a
# skipped-events reason, so a run of them is never silently read as a CPU run. Their
# runtime calls (`*_runtime`, `*_driver`) are host work, not counted here.
UNMODELED_DEVICE = r"^(mtia|hpu|mlu|gcu|npu|privateuse1)_"
UNMODELED_HOST = r"_(runtime|driver|user_annotation)$"

# `args` keys kept, with their type on the fast path. Kineto spells two keys two
# ways, and a DuckDB struct cannot hold names that differ only in case:
# - "external id" (old traces) is renamed "External id" by `tracefile.decode`;
# - "bytes" (memcpy/memset) beside "Bytes" ([memory] instants): only "Bytes" is read;
#   a copy's size is recovered as its "memory bandwidth (GB/s)" × duration (ns),
#   the figure Kineto computed from it.
ARG_TYPES = {
    "External id": "BIGINT",
    "correlation": "BIGINT",
    "device": "BIGINT",
    "stream": "BIGINT",
    "memory bandwidth (GB/s)": "DOUBLE",
    "Collective name": "VARCHAR",
    "In msg nelems": "BIGINT",
    "Out msg nelems": "BIGINT",
    "In split size": "VARCHAR",
    "Out split size": "VARCHAR",
    "Group size": "BIGINT",
    "dtype": "VARCHAR",
    "Process Group Name": "VARCHAR",
    "Process Group Description": "VARCHAR",
    "Process Group Ranks": "VARCHAR",
    "Seq": "BIGINT",
    "Input Dims": "JSON",
    "Input type": "JSON",
    "Concrete Inputs": "JSON",
    "wait_on_stream": "BIGINT",
    "wait_on_cuda_event_record_corr_id": "BIGINT",
    "Comm rank": "BIGINT",  # record_param_comms' "Rank" (`tracefile.decode` renames it)
    "Device Type": "BIGINT",
    "Device Id": "BIGINT",
    "Addr": "BIGINT",
    "Bytes": "BIGINT",
    "Total Allocated": "BIGINT",
    "Total Reserved": "BIGINT",
    "name": "VARCHAR",
    "labels": "VARCHAR",
    "rank": "JSON",  # merged multi-rank files (TraceFusion) tag every event with its rank
}


def raw_columns(typed: bool) -> str:
    args = ", ".join(f'"{k}" {t if typed else "JSON"}' for k, t in ARG_TYPES.items())
    cols = {
        "ph": "VARCHAR",
        "cat": "VARCHAR",
        "name": "VARCHAR",
        "pid": "VARCHAR",
        "tid": "VARCHAR",
        "ts": "DOUBLE",
        "dur": "DOUBLE",
        "id": "VARCHAR",
        "args": f"STRUCT({args})",
    }
    return "{" + ", ".join(f"{k}: '{v}'" for k, v in cols.items()) + "}"


def load_raw(con: duckdb.DuckDBPyConnection, events_json: Path) -> bool:
    """Parse the events array file into the `raw` table; True when its args are typed
    (the fast path), False when every arg is JSON.

    Fast path: args read with their usual types. A trace where some value has
    another type (a string stream id, a list where a count belongs) fails that
    cast; it is read again with every arg as JSON and cast with TRY_CAST, so the
    odd value becomes NULL and the rest of the file is kept. A trace whose events
    themselves are odd (a string `ts`, an event that is not an object, `args` that
    is not an object) is read a third time event by event (`load_raw_lenient`).
    """
    for typed in (True, False):
        try:
            con.execute(
                "CREATE OR REPLACE TABLE raw AS SELECT * FROM read_json("
                f"{sql_str(str(events_json))}, format = 'array', "
                f"columns = {raw_columns(typed)}, maximum_object_size = 268435456)"
            )
            return typed
        except duckdb.ConversionException:
            if not typed:
                load_raw_lenient(con, events_json)
                return False
        except duckdb.InvalidInputException as exc:
            if "transform error" not in str(exc):
                raise
            if not typed:
                load_raw_lenient(con, events_json)
                return False
    raise AssertionError("unreachable")


def load_raw_lenient(con: duckdb.DuckDBPyConnection, events_json: Path) -> None:
    """`raw` from each event as JSON: any field of the wrong type becomes NULL.

    Same columns as the all-JSON read of `load_raw`; an element that is not an object
    has a NULL `ph` (counted by `skipped_events`)."""

    scalar = "('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE')"

    def text(key: str) -> str:
        return f"CASE WHEN json_type(j->'{key}') IN {scalar} THEN j->>'{key}' END"

    def num(key: str) -> str:
        return (
            f"CASE WHEN json_type(j->'{key}') IN {scalar} THEN TRY_CAST(j->>'{key}' AS DOUBLE) END"
        )

    obj = "json_type(j->'args') = 'OBJECT'"
    args = ", ".join(
        f"\"{k}\" := CASE WHEN {obj} THEN j->'args'->{sql_str(k)} END" for k in ARG_TYPES
    )
    con.execute(
        f"""CREATE OR REPLACE TABLE raw AS
SELECT CASE WHEN json_type(j->'ph') = 'VARCHAR' THEN j->>'ph' END AS ph,
       {text("cat")} AS cat, {text("name")} AS name, {text("pid")} AS pid, {text("tid")} AS tid,
       {num("ts")} AS ts, {num("dur")} AS dur, {text("id")} AS id,
       struct_pack({args}) AS args
FROM (SELECT json AS j FROM read_json_objects({sql_str(str(events_json))}, format = 'array',
      maximum_object_size = 268435456))"""
    )


# Largest |ts| in µs kept: 9e15 µs is the year 2255, and ts × 1000 + base still fits in
# a BIGINT. Longest `dur` kept: one day (8.64e10 µs).
TS_MAX_US = 9e15
DUR_MAX_US = 8.64e10


def _ts_ok(col: str = "ts") -> str:
    return f"({col} IS NOT NULL AND isfinite({col}) AND abs({col}) < {TS_MAX_US})"


def _dur_ok(col: str = "dur") -> str:
    return f"({col} IS NOT NULL AND isfinite({col}) AND {col} >= 0 AND {col} <= {DUR_MAX_US})"


def skipped_events(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Events of `raw` the tables leave out, by reason (needs `raw`)."""
    return skipped_events_by(con, "0").get(0, {})


def skipped_events_by(con: duckdb.DuckDBPyConnection, part: str) -> dict:
    """`skipped_events` for each value of the SQL expression `part` over `raw` (the file
    of each event, when `raw` holds several)."""
    used = "(ph IN ('X', 's', 'f', 't') OR (ph = 'i' AND name = '[memory]'))"
    rows = con.execute(
        f"""SELECT part, reason, count(*) FROM (SELECT {part} AS part, CASE
        WHEN ph IS NULL THEN 'not an event object, or no ph'
        WHEN {used} AND ts IS NULL THEN 'ts missing or not a number'
        WHEN {used} AND NOT {_ts_ok()} THEN 'ts not finite or out of range'
        WHEN ph = 'X' AND dur IS NULL THEN 'dur missing or not a number'
        WHEN ph = 'X' AND NOT isfinite(dur) THEN 'dur not finite'
        WHEN ph = 'X' AND dur < 0 THEN 'negative dur'
        WHEN ph = 'X' AND dur > {DUR_MAX_US} THEN 'dur longer than a day'
        WHEN ph = 'X' AND regexp_matches(lower(cat), '{UNMODELED_DEVICE}')
             AND NOT regexp_matches(lower(cat), '{UNMODELED_HOST}')
            THEN 'device events of a kind tracekit does not model (' || lower(cat) || ')'
        END AS reason FROM raw) WHERE reason IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"""
    ).fetchall()
    out: dict = {}
    for part, reason, n in rows:
        out.setdefault(part, {})[reason] = n
    return out


def _kind_case() -> str:
    whens = "\n".join(f"        WHEN '{c}' THEN '{k}'" for c, k in CAT_KIND.items())
    return f"""CASE
        WHEN lower(cat) = 'user_annotation' AND starts_with(name, 'gloo:') THEN 'comm_thread'
        ELSE CASE lower(cat)
{whens}
        ELSE 'other' END
    END"""


def _id(col: str) -> str:
    """pid/tid: ints, numeric strings, "stream 7" (old traces); pseudo-processes → NULL."""
    # CASE, not coalesce: DuckDB evaluates every coalesce argument on every row, and the
    # regexp (for the rare "stream 7") was 40% of building the events table
    return (
        f"CASE WHEN TRY_CAST({col} AS BIGINT) IS NOT NULL THEN TRY_CAST({col} AS BIGINT) "
        f"ELSE TRY_CAST(nullif(regexp_extract({col}, '-?[0-9]+'), '') AS BIGINT) END"
    )


def _ns(col: str, base_ns: int | str) -> str:
    whole = f"floor({col})"
    return f"({whole}::BIGINT * 1000 + round(({col} - {whole}) * 1000)::BIGINT + {base_ns})"


class _Args:
    """SQL for one `args` key, on the typed or the all-JSON raw table."""

    def __init__(self, typed: bool):
        self.typed = typed

    def int(self, key: str) -> str:
        return f'args."{key}"' if self.typed else f'TRY_CAST(args."{key}" AS BIGINT)'

    def float(self, key: str) -> str:
        return f'args."{key}"' if self.typed else f'TRY_CAST(args."{key}" AS DOUBLE)'

    def str(self, key: str) -> str:
        return f'args."{key}"' if self.typed else f"(args.\"{key}\"->>'$')"

    def json(self, key: str) -> str:
        return f'args."{key}"::VARCHAR'


def events_sql(rank: int | str, base_ns: int | str, typed: bool) -> str:
    a = _Args(typed)
    return f"""
SELECT {rank}::INTEGER AS rank,
       {_kind_case()} AS kind,
       -- a name that is null or not a string (read as NULL) is the empty string: every
       -- table, figure and report row below carries names as strings
       cat, coalesce(name, '') AS name,
       {_id("pid")} AS pid, {_id("tid")} AS tid,
       {_ns("ts", base_ns)} AS ts_ns,
       round(dur * 1000)::BIGINT AS dur_ns,
       {a.int("correlation")} AS correlation,
       {a.int("External id")} AS external_id,
       {a.int("device")} AS device,
       {a.int("stream")} AS stream,
       TRY_CAST(round({a.float("memory bandwidth (GB/s)")} * dur * 1000) AS BIGINT) AS bytes,
       {a.str("Collective name")} AS coll_name,
       {a.int("In msg nelems")} AS in_nelems,
       {a.int("Out msg nelems")} AS out_nelems,
       {a.str("In split size")} AS in_split,
       {a.str("Out split size")} AS out_split,
       {a.int("Group size")} AS group_size,
       {a.str("dtype")} AS dtype,
       {a.str("Process Group Name")} AS pg_name,
       {a.str("Process Group Description")} AS pg_desc,
       {a.str("Process Group Ranks")} AS pg_ranks,
       {a.int("Seq")} AS seq,
       {a.json("Input Dims")} AS input_dims,
       {a.json("Input type")} AS input_types,
       {a.json("Concrete Inputs")} AS concrete_inputs,
       {a.int("wait_on_stream")} AS wait_on_stream,
       {a.int("wait_on_cuda_event_record_corr_id")} AS wait_on_event_correlation,
       {a.int("Comm rank")} AS comm_rank
FROM raw WHERE ph = 'X' AND {_ts_ok()} AND {_dur_ok()}
"""


def flows_sql(rank: int | str, base_ns: int | str) -> str:
    return f"""
SELECT {rank}::INTEGER AS rank, TRY_CAST(id AS BIGINT) AS flow_id, cat, ph AS phase,
       {_id("pid")} AS pid, {_id("tid")} AS tid, {_ns("ts", base_ns)} AS ts_ns
FROM raw WHERE ph IN ('s', 'f', 't') AND {_ts_ok()}
"""


def memory_sql(rank: int | str, base_ns: int | str, typed: bool) -> str:
    a = _Args(typed)
    return f"""
SELECT {rank}::INTEGER AS rank, {_ns("ts", base_ns)} AS ts_ns,
       {_id("pid")} AS pid, {_id("tid")} AS tid,
       {a.int("Device Type")} AS device_type, {a.int("Device Id")} AS device_id,
       {a.int("Addr")} AS addr, {a.int("Bytes")} AS bytes,
       {a.int("Total Allocated")} AS total_allocated, {a.int("Total Reserved")} AS total_reserved
FROM raw WHERE ph = 'i' AND name = '[memory]' AND {_ts_ok()}
"""


def threads_sql(rank: int | str, typed: bool) -> str:
    """Latest thread/process name per (pid, tid); process labels ("GPU 0", "CPU")."""
    a = _Args(typed)
    return f"""
SELECT {rank}::INTEGER AS rank, {_id("pid")} AS pid,
       CASE WHEN name = 'thread_name' THEN {_id("tid")} END AS tid,
       CASE name WHEN 'thread_name' THEN 'thread' WHEN 'process_name' THEN 'process'
                 ELSE 'labels' END AS what,
       arg_max(coalesce({a.str("name")}, {a.str("labels")}), coalesce(ts, 0)) AS name
FROM raw
WHERE ph = 'M' AND name IN ('thread_name', 'process_name', 'process_labels')
GROUP BY ALL
"""


# TraceLens TraceFusion: process names `RANK r - CPU` / `RANK r - GPU`, pids offset by r×10⁸;
# tracekit's own export (`tracekit export`): `rank r` and `rank r - GPU 0`
_MERGED_PROCESS = r"(?i)^rank ([0-9]+)(?: - |$)"
MERGED_PID_OFFSET = 100_000_000


def merged_ranks(con: duckdb.DuckDBPyConnection, header: Header, typed: bool) -> list[int] | None:
    """The ranks of a merged multi-rank file (TraceLens TraceFusion), or None for a
    one-rank trace. Merged files have no distributedInfo; their processes are named
    `RANK r - CPU` / `RANK r - GPU` and their events carry `args.rank`. `typed`: what
    `load_raw` returned."""
    if header.distributedInfo:
        return None
    a = _Args(typed)
    rows = con.execute(f"""
        SELECT DISTINCT TRY_CAST(regexp_extract({a.str("name")}, '{_MERGED_PROCESS}', 1) AS INT)
        FROM raw WHERE ph = 'M' AND name = 'process_name'
          AND regexp_matches({a.str("name")}, '{_MERGED_PROCESS}')""").fetchall()
    ranks = sorted(r for (r,) in rows if r is not None)
    if not ranks:
        return None
    con.execute(f"""
        CREATE OR REPLACE TABLE _pid_rank AS
        SELECT pid, any_value(TRY_CAST(regexp_extract({a.str("name")}, '{_MERGED_PROCESS}', 1)
                                       AS INT)) AS rank
        FROM raw WHERE ph = 'M' AND name = 'process_name'
          AND regexp_matches({a.str("name")}, '{_MERGED_PROCESS}')
        GROUP BY pid""")
    return ranks


def merged_rank_sql(rank: int) -> str:
    """One rank's raw events out of a merged file (`_raw_all`): by `args.rank`, else by the
    process the event belongs to; pids lose the rank's offset (r×10⁸)."""
    off = rank * MERGED_PID_OFFSET
    return f"""
SELECT r.* REPLACE (
    CASE WHEN {rank} > 0 AND TRY_CAST(r.pid AS BIGINT) >= {off}
         THEN (TRY_CAST(r.pid AS BIGINT) - {off})::VARCHAR ELSE r.pid END AS pid)
FROM _raw_all r LEFT JOIN _pid_rank p ON p.pid = r.pid
WHERE coalesce(TRY_CAST(r.args."rank" AS BIGINT), p.rank,
               TRY_CAST(TRY_CAST(r.pid AS BIGINT) // {MERGED_PID_OFFSET} AS INT)) = {rank}
"""


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _ranks(value: Any) -> list[int]:
    ints = (_as_int(r) for r in value) if isinstance(value, list) else ()
    return [r for r in ints if r is not None]


RANK_INFO = (
    ("rank", "INTEGER"),
    ("rank_source", "VARCHAR"),
    ("source", "VARCHAR"),
    ("world_size", "BIGINT"),
    ("backend", "VARCHAR"),
    ("nccl_version", "VARCHAR"),
    ("base_time_ns", "BIGINT"),
    ("host_name", "VARCHAR"),
    ("device_id", "BIGINT"),
    ("device_name", "VARCHAR"),
    ("device_memory_bytes", "BIGINT"),
    ("device_sms", "BIGINT"),
    ("device_compute_capability", "VARCHAR"),
    ("device_count", "BIGINT"),
    ("has_device_events", "BOOLEAN"),
    ("record_shapes", "BOOLEAN"),
    ("profile_memory", "BOOLEAN"),
    ("trace_start_ns", "BIGINT"),
    ("trace_end_ns", "BIGINT"),
    ("event_count", "BIGINT"),
    ("pg_count", "BIGINT"),
    ("distributed_info", "VARCHAR"),
)
PROCESS_GROUPS = (
    ("rank", "INTEGER"),
    ("pg_name", "VARCHAR"),
    ("pg_desc", "VARCHAR"),
    ("pg_size", "BIGINT"),
    ("ranks", "BIGINT[]"),
    ("backend_config", "VARCHAR"),
)


def rank_stats(con: duckdb.DuckDBPyConnection) -> dict[int, tuple]:
    """Per rank of `events`: (its most used device, first start, last end, events, whether
    any ran on a device) — what `rank_info_rows` reads from the events."""
    rows = con.execute(
        "SELECT rank, mode(device), min(ts_ns), max(ts_ns + dur_ns), count(*), "
        "count(*) FILTER (kind IN ('kernel', 'memcpy', 'memset')) > 0 FROM events GROUP BY rank"
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


NO_EVENTS = (None, None, None, 0, False)  # `rank_stats` of a rank without events


def rank_info_rows(
    rank: int, rank_source: str, path: Path, header: Header, stats: tuple = NO_EVENTS
) -> tuple[dict, list[dict]]:
    """The `rank_info` row and the `process_groups` rows of one rank (`stats`: its
    `rank_stats`)."""
    dev_id, start, end, n, has_dev = stats
    info = header.distributedInfo or {}
    devices = {d.get("id"): d for d in header.deviceProperties or [] if isinstance(d, dict)}
    dev = devices.get(dev_id) or (next(iter(devices.values())) if devices else {})
    pgs = info.get("pg_config") or []
    if isinstance(pgs, dict):  # some versions key the groups by name
        pgs = [{"pg_name": k, **v} for k, v in pgs.items() if isinstance(v, dict)]
    pgs = [p for p in pgs if isinstance(p, dict)]
    cc = f"{dev['computeMajor']}.{dev.get('computeMinor', 0)}" if "computeMajor" in dev else None

    def text(v: Any) -> str | None:
        return str(v) if v not in (None, "") else None

    row = {
        "rank": rank,
        "rank_source": rank_source,
        "source": str(path),
        "world_size": _as_int(info.get("world_size")),
        "backend": text(info.get("backend")),
        "nccl_version": text(info.get("nccl_version")),
        "base_time_ns": header.baseTimeNanoseconds,
        "host_name": text(header.host_name),
        "device_id": dev_id,
        "device_name": text(dev.get("name")),
        "device_memory_bytes": _as_int(dev.get("totalGlobalMem")),
        "device_sms": _as_int(dev.get("numSms")),
        "device_compute_capability": cc,
        "device_count": len(devices),
        "has_device_events": bool(has_dev),
        "record_shapes": bool(header.record_shapes),
        "profile_memory": bool(header.profile_memory),
        "trace_start_ns": start,
        "trace_end_ns": end,
        "event_count": n,
        "pg_count": _as_int(info.get("pg_count")),
        "distributed_info": json.dumps(info) if info else None,
    }
    pg = [
        {
            "rank": rank,
            "pg_name": str(p.get("pg_name")),
            "pg_desc": text(p.get("pg_desc")),
            "pg_size": _as_int(p.get("pg_size")),
            "ranks": _ranks(p.get("ranks")),
            "backend_config": text(p.get("backend_config")),
        }
        for p in pgs
    ]
    return row, pg
