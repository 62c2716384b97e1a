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

The SQL is module `ingest.tables` (`tracekit/sql/ingest/tables.sql`); what depends on the
trace (the rank, the base time, typed or JSON `args`, Kineto's categories) is built here
as SQL expressions and filled into its placeholders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from tracekit import sql
from tracekit.ingest.tracefile import COMM_RANK, Header
from tracekit.sql.text import sql_str

_M = "ingest.tables"

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
    COMM_RANK: "BIGINT",  # record_param_comms' "Rank" (`arg_types`, `tracefile.decode`)
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


def arg_types(comm_rank_key: str = COMM_RANK) -> dict[str, str]:
    """`ARG_TYPES` for events whose record_param_comms' "Rank" is under `comm_rank_key`
    (`tracefile.comm_rank_key`): "Rank" as torch writes it replaces "Comm rank" and
    "rank" (a file with distributedInfo has no per-event rank, and a DuckDB struct
    cannot hold names that differ only in case)."""
    if comm_rank_key == COMM_RANK:
        return ARG_TYPES
    kept = {k: t for k, t in ARG_TYPES.items() if k != "rank"}
    return {(comm_rank_key if k == COMM_RANK else k): t for k, t in kept.items()}


def raw_columns(typed: bool, comm_rank_key: str = COMM_RANK) -> str:
    types = arg_types(comm_rank_key)
    args = ", ".join(f'"{k}" {t if typed else "JSON"}' for k, t in types.items())
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


def load_raw(
    con: duckdb.DuckDBPyConnection, events_json: Path, comm_rank_key: str = COMM_RANK
) -> bool:
    """Parse the events array file into the `raw` table; True when its args are typed
    (the fast path), False when every arg is JSON. `comm_rank_key`: `arg_types`'.

    Fast path: args read with their usual types. A trace where some value has
    another type (a string stream id, a list where a count belongs) fails that
    cast; it is read again with every arg as JSON and cast with TRY_CAST, so the
    odd value becomes NULL and the rest of the file is kept. A trace whose events
    themselves are odd (a string `ts`, an event that is not an object, `args` that
    is not an object) is read a third time event by event (`load_raw_lenient`).
    """
    for typed in (True, False):
        try:
            path, columns = sql_str(str(events_json)), raw_columns(typed, comm_rank_key)
            con.execute(sql.query(_M, "read", path=path, columns=columns))
            return typed
        except duckdb.ConversionException:
            if not typed:
                load_raw_lenient(con, events_json, comm_rank_key)
                return False
        except duckdb.InvalidInputException as exc:
            if "transform error" not in str(exc):
                raise
            if not typed:
                load_raw_lenient(con, events_json, comm_rank_key)
                return False
    raise AssertionError("unreachable")


def load_raw_lenient(
    con: duckdb.DuckDBPyConnection, events_json: Path, comm_rank_key: str = COMM_RANK
) -> None:
    """`raw` from each event as JSON: any field of the wrong type becomes NULL.

    Same columns as the all-JSON read of `load_raw`; an element that is not an object
    has a NULL `ph` (counted by `skipped_events`)."""

    obj = "json_type(j->'args') = 'OBJECT'"
    args = ", ".join(
        f"\"{k}\" := CASE WHEN {obj} THEN j->'args'->{sql_str(k)} END"
        for k in arg_types(comm_rank_key)
    )
    con.execute(sql.query(_M, "read_lenient", args=args, path=sql_str(str(events_json))))


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
    query = sql.query(
        _M,
        "skipped",
        ts_ok=_ts_ok(),
        dur_max=str(DUR_MAX_US),
        device_cat=sql_str(UNMODELED_DEVICE),
        host_cat=sql_str(UNMODELED_HOST),
        modeled="(" + ", ".join(sql_str(c) for c in CAT_KIND) + ")",
        part=part,
    )
    rows = con.execute(query).fetchall()
    out: dict = {}
    for part, reason, n in rows:
        out.setdefault(part, {})[reason] = n
    return out


def _kind_case() -> str:
    whens = "\n".join(f"        WHEN '{c}' THEN '{k}'" for c, k in CAT_KIND.items())
    return f"""CASE
        WHEN lower(cat) = 'user_annotation' AND prefix(name, 'gloo:') THEN 'comm_thread'
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


# `events` columns read from `args`: column (placeholder) → (args key, how it is read)
EVENT_ARGS = {
    "correlation": ("correlation", "int"),
    "external_id": ("External id", "int"),
    "device": ("device", "int"),
    "stream": ("stream", "int"),
    "bandwidth": ("memory bandwidth (GB/s)", "float"),
    "coll_name": ("Collective name", "str"),
    "in_nelems": ("In msg nelems", "int"),
    "out_nelems": ("Out msg nelems", "int"),
    "in_split": ("In split size", "str"),
    "out_split": ("Out split size", "str"),
    "group_size": ("Group size", "int"),
    "dtype": ("dtype", "str"),
    "pg_name": ("Process Group Name", "str"),
    "pg_desc": ("Process Group Description", "str"),
    "pg_ranks": ("Process Group Ranks", "str"),
    "seq": ("Seq", "int"),
    "input_dims": ("Input Dims", "json"),
    "input_types": ("Input type", "json"),
    "concrete_inputs": ("Concrete Inputs", "json"),
    "wait_on_stream": ("wait_on_stream", "int"),
    "wait_on_event_correlation": ("wait_on_cuda_event_record_corr_id", "int"),
    "comm_rank": (COMM_RANK, "int"),
}
MEMORY_ARGS = {
    "device_type": ("Device Type", "int"),
    "device_id": ("Device Id", "int"),
    "addr": ("Addr", "int"),
    "bytes": ("Bytes", "int"),
    "total_allocated": ("Total Allocated", "int"),
    "total_reserved": ("Total Reserved", "int"),
}


def _read_args(typed: bool, spec: dict[str, tuple[str, str]]) -> dict[str, str]:
    a = _Args(typed)
    return {col: getattr(a, how)(key) for col, (key, how) in spec.items()}


def _located(rank: int | str, base_ns: int | str) -> dict[str, str]:
    """The placeholders every table of `raw` shares: its rank, ids and start time."""
    return {"rank": str(rank), "pid": _id("pid"), "tid": _id("tid"), "ts_ns": _ns("ts", base_ns)}


def events_sql(
    rank: int | str, base_ns: int | str, typed: bool, comm_rank_key: str = COMM_RANK
) -> str:
    spec = {**EVENT_ARGS, "comm_rank": (comm_rank_key, "int")}
    return sql.query(
        _M,
        "events",
        kind=_kind_case(),
        **_located(rank, base_ns),
        **_read_args(typed, spec),
        ts_ok=_ts_ok(),
        dur_ok=_dur_ok(),
    )


def flows_sql(rank: int | str, base_ns: int | str) -> str:
    return sql.query(_M, "flows", **_located(rank, base_ns), ts_ok=_ts_ok())


def memory_sql(rank: int | str, base_ns: int | str, typed: bool) -> str:
    return sql.query(
        _M, "memory", **_located(rank, base_ns), **_read_args(typed, MEMORY_ARGS), ts_ok=_ts_ok()
    )


def threads_sql(rank: int | str, typed: bool) -> str:
    """Latest thread/process name per (pid, tid); process labels ("GPU 0", "CPU")."""
    a = _Args(typed)
    return sql.query(
        _M,
        "threads",
        rank=str(rank),
        pid=_id("pid"),
        tid=_id("tid"),
        name_arg=a.str("name"),
        labels_arg=a.str("labels"),
    )


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
    parts = {"name_arg": _Args(typed).str("name"), "pattern": sql_str(_MERGED_PROCESS)}
    rows = con.execute(sql.query(_M, "merged_ranks", **parts)).fetchall()
    ranks = sorted(r for (r,) in rows if r is not None)
    if not ranks:
        return None
    con.execute(sql.query(_M, "pid_ranks", **parts))
    return ranks


def merged_rank_sql(rank: int) -> str:
    """One rank's raw events out of a merged file (`_raw_all`): by `args.rank`, else by the
    process the event belongs to; pids lose the rank's offset (r×10⁸)."""
    return sql.query(
        _M,
        "merged_rank",
        offset=str(int(rank) * MERGED_PID_OFFSET),
        pid_offset=str(MERGED_PID_OFFSET),
        rank=str(int(rank)),
    )


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
    rows = con.execute(sql.query(_M, "rank_stats")).fetchall()
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
