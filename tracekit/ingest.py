"""One decoded trace → typed Arrow tables (the DESIGN store contract).

Tables built per rank:

- `events`: one row per complete (`ph: X`) event, integer-ns absolute time.
- `flows`: `ph: s/f/t` flow endpoints (`ac2g` CPU→GPU launches, `fwdbwd`).
- `memory`: `[memory]` instants (allocator deltas and totals).
- `threads`: thread and process names from `ph: M` metadata.
- `rank_info`: one row: rank, world size, backend, device, process groups, source.
- `process_groups`: one row per process group this rank belongs to.

Time: `ts_ns = baseTimeNanoseconds + round(ts_us * 1000)`; the integer and
fractional parts of `ts` are scaled separately so 3-decimal microsecond stamps
land on the exact nanosecond.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.tracefile import Args, Event, TraceDoc

SCHEMA_VERSION = 3  # bump when any cached table changes shape or meaning

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
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_sync": "sync",
    "trace": "trace",
}

_EMPTY_ARGS = Args()


def _as_int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if v.is_integer() else None
    if isinstance(v, str):
        s = v.strip()
        if s.lstrip("-").isdigit():
            return int(s)
        if s.startswith("stream "):  # old traces: tid "stream 7"
            return _as_int(s[7:])
        if s.startswith("0x"):
            try:
                return int(s, 16)
            except ValueError:
                return None
    return None


def int_col(values: list[Any]) -> pa.Array:
    """int64 column; values of the wrong type are normalised, never fatal."""
    try:
        return pa.array(values, type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_as_int(v) for v in values], type=pa.int64())


def str_col(values: list[Any], dictionary: bool = False) -> pa.Array:
    try:
        arr = pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        arr = pa.array(
            [v if v is None or isinstance(v, str) else json.dumps(v) for v in values],
            type=pa.string(),
        )
    return arr.dictionary_encode() if dictionary else arr


def json_col(values: list[Any]) -> pa.Array:
    """Nested args (`Input Dims` …) kept as compact JSON text."""
    dumps = json.dumps
    return pa.array(
        [None if v is None else dumps(v, separators=(",", ":")) for v in values],
        type=pa.string(),
    )


def ts_to_ns(ts: list[Any], base_ns: int) -> np.ndarray:
    """Microsecond stamps (int or 3-decimal float) → absolute integer ns."""
    a = np.asarray(ts, dtype=np.float64)
    whole = np.floor(a)
    ns = whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000.0).astype(np.int64)
    if base_ns:
        ns += base_ns
    return ns


def dur_to_ns(dur: list[Any]) -> np.ndarray:
    return np.rint(np.asarray(dur, dtype=np.float64) * 1000.0).astype(np.int64)


def _ids(values: list[Any]) -> pa.Array:
    # pid/tid are ints, except "Spans"/"Traces" pseudo-processes and old "stream 7" tids
    if all(type(v) is int for v in values):
        return pa.array(values, type=pa.int64())
    return pa.array([v if type(v) is int else _as_int(v) for v in values], type=pa.int64())


def events_table(rank: int, xs: list[Event], base_ns: int) -> pa.Table:
    n = len(xs)
    args = [e.args or _EMPTY_ARGS for e in xs]
    cats = [e.cat for e in xs]
    names = [e.name for e in xs]
    kinds = []
    ckind = CAT_KIND
    for cat, name in zip(cats, names, strict=False):
        k = ckind.get(cat.lower(), "other") if cat else "other"
        if k == "user_annotation" and name.startswith("gloo:"):
            k = "comm_thread"
        kinds.append(k)
    ext = [a.external_id for a in args]
    if any(a.external_id_old is not None for a in args):
        ext = [x if x is not None else a.external_id_old for x, a in zip(ext, args, strict=False)]
    cols = {
        "rank": pa.array(np.full(n, rank, dtype=np.int32)),
        "kind": str_col(kinds, dictionary=True),
        "cat": str_col(cats, dictionary=True),
        "name": str_col(names, dictionary=True),
        "pid": _ids([e.pid for e in xs]),
        "tid": _ids([e.tid for e in xs]),
        "ts_ns": pa.array(ts_to_ns([e.ts for e in xs], base_ns)),
        "dur_ns": pa.array(dur_to_ns([e.dur for e in xs])),
        "correlation": int_col([a.correlation for a in args]),
        "external_id": int_col(ext),
        "device": int_col([a.device for a in args]),
        "stream": int_col([a.stream for a in args]),
        "bytes": int_col([a.bytes for a in args]),
        "coll_name": str_col([a.coll_name for a in args], dictionary=True),
        "in_nelems": int_col([a.in_nelems for a in args]),
        "out_nelems": int_col([a.out_nelems for a in args]),
        "in_split": str_col([a.in_split for a in args]),
        "out_split": str_col([a.out_split for a in args]),
        "group_size": int_col([a.group_size for a in args]),
        "dtype": str_col([a.dtype for a in args], dictionary=True),
        "pg_name": str_col([a.pg_name for a in args], dictionary=True),
        "pg_desc": str_col([a.pg_desc for a in args], dictionary=True),
        "pg_ranks": str_col([a.pg_ranks for a in args], dictionary=True),
        "seq": int_col([a.seq for a in args]),
        "input_dims": json_col([a.input_dims for a in args]),
        "input_types": json_col([a.input_type for a in args]),
        "concrete_inputs": json_col([a.concrete_inputs for a in args]),
    }
    return pa.table(cols)


def flows_table(rank: int, fs: list[Event], base_ns: int) -> pa.Table:
    return pa.table(
        {
            "rank": pa.array(np.full(len(fs), rank, dtype=np.int32)),
            "flow_id": int_col([e.id for e in fs]),
            "cat": str_col([e.cat for e in fs], dictionary=True),
            "phase": str_col([e.ph for e in fs], dictionary=True),
            "pid": _ids([e.pid for e in fs]),
            "tid": _ids([e.tid for e in fs]),
            "ts_ns": pa.array(ts_to_ns([e.ts for e in fs], base_ns)),
        }
    )


def memory_table(rank: int, ms: list[Event], base_ns: int) -> pa.Table:
    args = [e.args or _EMPTY_ARGS for e in ms]
    return pa.table(
        {
            "rank": pa.array(np.full(len(ms), rank, dtype=np.int32)),
            "ts_ns": pa.array(ts_to_ns([e.ts for e in ms], base_ns)),
            "pid": _ids([e.pid for e in ms]),
            "tid": _ids([e.tid for e in ms]),
            "device_type": int_col([a.device_type for a in args]),
            "device_id": int_col([a.device_id for a in args]),
            "addr": int_col([a.addr for a in args]),
            "bytes": int_col([a.mem_bytes for a in args]),
            "total_allocated": int_col([a.total_allocated for a in args]),
            "total_reserved": int_col([a.total_reserved for a in args]),
        }
    )


def threads_table(rank: int, meta: list[Event]) -> pa.Table:
    """Latest thread/process name per (pid, tid); process labels ("GPU 0", "CPU")."""
    names: dict[tuple[int | None, int | None, str], str] = {}
    for e in meta:
        a = e.args or _EMPTY_ARGS
        if e.name == "thread_name":
            names[(_as_int(e.pid), _as_int(e.tid), "thread")] = str(a.meta_name)
        elif e.name == "process_name":
            names[(_as_int(e.pid), None, "process")] = str(a.meta_name)
        elif e.name == "process_labels":
            names[(_as_int(e.pid), None, "labels")] = str(a.labels)
    rows = list(names.items())
    return pa.table(
        {
            "rank": pa.array([rank] * len(rows), type=pa.int32()),
            "pid": pa.array([k[0] for k, _ in rows], type=pa.int64()),
            "tid": pa.array([k[1] for k, _ in rows], type=pa.int64()),
            "what": pa.array([k[2] for k, _ in rows], type=pa.string()),
            "name": pa.array([v for _, v in rows], type=pa.string()),
        }
    )


def split_events(doc: TraceDoc) -> tuple[list[Event], list[Event], list[Event], list[Event]]:
    """(complete, flow, memory, metadata) events."""
    evs = doc.traceEvents
    xs = [e for e in evs if e.ph == "X"]
    flows = [e for e in evs if e.ph in ("s", "f", "t")]
    mem = [e for e in evs if e.ph == "i" and e.name == "[memory]"]
    meta = [e for e in evs if e.ph == "M"]
    return xs, flows, mem, meta


def rank_info(
    rank: int,
    rank_source: str,
    path: Path,
    doc: TraceDoc,
    events: pa.Table,
) -> tuple[pa.Table, pa.Table]:
    """The `rank_info` row and `process_groups` rows of one rank."""
    info = doc.distributedInfo or {}
    devices = {d.get("id"): d for d in (doc.deviceProperties or []) if isinstance(d, dict)}
    # the GPU this rank used: the `device` arg of its device events
    used = events.filter(pc.is_valid(events["device"]))["device"]
    dev_id = pc.mode(used)[0]["mode"].as_py() if len(used) else None
    dev = devices.get(dev_id) or (next(iter(devices.values())) if devices else {})
    ts = events["ts_ns"]
    end = pc.add(ts, events["dur_ns"])
    pgs = info.get("pg_config") or []
    if isinstance(pgs, dict):  # some versions key the groups by name
        pgs = [{"pg_name": k, **v} for k, v in pgs.items() if isinstance(v, dict)]
    row = {
        "rank": [rank],
        "rank_source": [rank_source],
        "source": [str(path)],
        "world_size": [_as_int(info.get("world_size"))],
        "backend": [str(info["backend"]) if info.get("backend") else None],
        "nccl_version": [str(info["nccl_version"]) if info.get("nccl_version") else None],
        "base_time_ns": [doc.baseTimeNanoseconds],
        "host_name": [doc.host_name],
        "device_id": [dev_id],
        "device_name": [dev.get("name")],
        "device_memory_bytes": [_as_int(dev.get("totalGlobalMem"))],
        "device_sms": [_as_int(dev.get("numSms"))],
        "device_compute_capability": [
            f"{dev['computeMajor']}.{dev.get('computeMinor', 0)}" if "computeMajor" in dev else None
        ],
        "device_count": [len(devices)],
        "has_device_events": [
            bool(
                pc.any(
                    pc.is_in(
                        events["kind"].cast(pa.string()),
                        pa.array(["kernel", "memcpy", "memset"]),
                    )
                ).as_py()
            )
        ],
        "record_shapes": [bool(doc.record_shapes)],
        "profile_memory": [bool(doc.profile_memory)],
        "trace_start_ns": [pc.min(ts).as_py()],
        "trace_end_ns": [pc.max(end).as_py()],
        "event_count": [len(events)],
        "pg_count": [_as_int(info.get("pg_count"))],
        "distributed_info": [json.dumps(info) if info else None],
    }
    ri = pa.table(row)
    pg = pa.table(
        {
            "rank": pa.array([rank] * len(pgs), type=pa.int32()),
            "pg_name": pa.array([str(p.get("pg_name")) for p in pgs], type=pa.string()),
            "pg_desc": pa.array([p.get("pg_desc") for p in pgs], type=pa.string()),
            "pg_size": pa.array([_as_int(p.get("pg_size")) for p in pgs], type=pa.int64()),
            "ranks": pa.array(
                [[_as_int(r) for r in p.get("ranks") or []] for p in pgs],
                type=pa.list_(pa.int64()),
            ),
            "backend_config": pa.array([p.get("backend_config") for p in pgs], type=pa.string()),
        }
    )
    return ri, pg
