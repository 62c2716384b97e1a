"""The collectives table: one row per collective instance per rank, any backend.

NCCL
    Every `ncclKernel_*` / `ncclDevKernel_*` kernel is one instance. Its metadata
    (`Collective name`, `In/Out msg nelems`, `dtype`, `Group size`, process group)
    comes from the kernel's own args when torch copied them there, else from the
    `record_param_comms` CPU op that encloses the kernel's launch (the runtime
    call with the kernel's `correlation`, on the same thread, inside the op's span).
    Without either, the name and dtype come from the kernel name and the size is null.

gloo (CPU)
    The instance is the `gloo:*` span (the real transfer, waiting for peers
    included) on the process group's worker thread (`send`/`recv` on the caller's).
    Its issuing `c10d::*` op on the main thread is found by order: spans and issue
    ops are paired first-in-first-out per (expected gloo op, message size). The
    span's `External id` is not the issuing op's, so ids cannot be used. The trace
    does not say which process group a gloo span belongs to (`pg_name` is null).
    Reduce-scatter runs as `gloo:all_reduce` over the full input; the issue op keeps
    the collective's real name.

Sizes follow nccl-tests: `bytes` = max(in, out elements) × element size, i.e. the
full (gathered) buffer for all-gather and reduce-scatter.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict, deque
from math import prod
from typing import Any

import duckdb
import pyarrow as pa

CANONICAL = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send",
    "recv",
    "send_recv",
    "barrier",
    "gather",
    "scatter",
)

# Element sizes for NCCL metadata dtypes (`Float`, `BFloat16` …) and the C++ type
# names gloo traces show in `Input type` (`float`, `c10::BFloat16` …); lower-cased.
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "int": 4,
    "int32": 4,
    "long": 8,
    "long int": 8,
    "int64": 8,
    "long long": 8,
    "short": 2,
    "short int": 2,
    "int16": 2,
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "byte": 1,
    "uint8": 1,
    "int8": 1,
    "bool": 1,
    "complexfloat": 8,
    "c10::complex<float>": 8,
    "complexdouble": 16,
}

_KERNEL_COLL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_PREFIXES = ("c10d::", "_c10d_functional::", "gloo:", "nccl:")


def dtype_bytes(dtype: str | None) -> int | None:
    if not dtype:
        return None
    d = dtype.strip().lower()
    if d.startswith(("float8", "c10::float8")):
        return 1
    return DTYPE_BYTES.get(d)


def canonical_name(raw: str | None) -> str | None:
    """`c10d::_allgather_base_`, `allgather`, `ncclDevKernel_AllGather_RING_LL` → `all_gather`."""
    if not raw:
        return None
    m = _KERNEL_COLL.match(raw)
    s = m.group(1) if m else raw
    for p in _PREFIXES:
        if s.startswith(p):
            s = s[len(p) :]
            break
    s = re.sub(r"[^a-z]", "", s.lower())
    for key, name in (
        ("allreduce", "all_reduce"),
        ("allgather", "all_gather"),
        ("reducescatter", "reduce_scatter"),
        ("alltoall", "all_to_all"),
        ("broadcast", "broadcast"),
        ("sendrecv", "send_recv"),
        ("send", "send"),
        ("recv", "recv"),
        ("reduce", "reduce"),
        ("barrier", "barrier"),
        ("monitoredbarrier", "barrier"),
        ("gather", "gather"),
        ("scatter", "scatter"),
    ):
        if s.startswith(key):
            return name
    return None


# ---------------------------------------------------------------------------- gloo

# issue op → the gloo span that executes it
_GLOO_EXEC = {
    "all_reduce": "gloo:all_reduce",
    "reduce_scatter": "gloo:all_reduce",
    "all_gather": "gloo:all_gather",
    "all_to_all": "gloo:all_to_all",
    "broadcast": "gloo:broadcast",
    "barrier": "gloo:barrier",
    "send": "gloo:send",
    "recv": "gloo:recv",
    "reduce": "gloo:reduce",
    "gather": "gloo:gather",
    "scatter": "gloo:scatter",
}
# issue ops whose first two args are (output, input); the rest are in-place
_OUT_IN_OPS = {
    "c10d::_allgather_base_",
    "c10d::_reduce_scatter_base_",
    "c10d::alltoall_base_",
    "c10d::allgather_",
    "c10d::reduce_scatter_",
    "c10d::alltoall_",
    "c10d::allgather_into_tensor_coalesced_",
    "c10d::reduce_scatter_tensor_coalesced_",
}


def _numel(arg: Any) -> int | None:
    """Elements in one op argument: a tensor's dims, or a TensorList of them."""
    if not isinstance(arg, list) or not arg:
        return None
    if all(isinstance(d, int) for d in arg):
        return prod(arg)
    sizes = [_numel(a) for a in arg]
    known = [s for s in sizes if s is not None]
    return sum(known) if known else None


def _first_type(types_json: str | None) -> str | None:
    if not types_json:
        return None
    try:
        types = json.loads(types_json)
    except ValueError:
        return None
    for t in types or []:
        if isinstance(t, str) and t and t not in ("TensorList", "Scalar", "ScalarList"):
            return t
    return None


def issue_sizes(op: str, dims_json: str | None) -> tuple[int | None, int | None]:
    """(in, out) elements of a c10d issue op from its `Input Dims`."""
    if not dims_json:
        return None, None
    try:
        dims = json.loads(dims_json)
    except ValueError:
        return None, None
    if not isinstance(dims, list) or not dims:
        return None, None
    if op in _OUT_IN_OPS and len(dims) >= 2:
        return _numel(dims[1]), _numel(dims[0])
    n = _numel(dims[0])
    return n, n


def _exec_size(name: str, n_in: int | None, n_out: int | None) -> int | None:
    """The element count the gloo span shows for an issue op of this name: its input
    (the shard for all-gather, the full input for reduce-scatter, this rank's send
    buffer for all-to-all — seen in torch 2.13 traces with uneven all-to-all splits)."""
    return n_in


def match_gloo(issue: list[dict], spans: list[dict]) -> list[tuple[dict, dict | None]]:
    """Pair each gloo span with its issue op, FIFO per (gloo op, message size).

    A span that starts before the oldest waiting issue op was issued before the
    trace began and stays unpaired.
    """
    queues: dict[tuple[str, int | None], deque] = defaultdict(deque)
    for op in sorted(issue, key=lambda o: o["ts_ns"]):
        key = (_GLOO_EXEC.get(op["name"], ""), _exec_size(op["name"], op["in"], op["out"]))
        queues[key].append(op)
    out = []
    for sp in sorted(spans, key=lambda s: s["ts_ns"]):
        q = queues.get((sp["raw_name"], sp["size"]))
        if q is None and sp["size"] is not None:
            q = queues.get((sp["raw_name"], None))
        op = None
        if q and q[0]["ts_ns"] <= sp["ts_ns"]:
            op = q.popleft()
        out.append((sp, op))
    return out


# ----------------------------------------------------------------------- the table

COLUMNS = pa.schema(
    [
        ("rank", pa.int32()),
        ("backend", pa.string()),
        ("name", pa.string()),
        ("raw_name", pa.string()),
        ("issue_name", pa.string()),
        ("issue_ts_ns", pa.int64()),
        ("ts_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("lane", pa.int64()),
        ("pg_name", pa.string()),
        ("pg_desc", pa.string()),
        ("pg_ranks", pa.string()),
        ("group_size", pa.int64()),
        ("dtype", pa.string()),
        ("elem_bytes", pa.int64()),
        ("in_nelems", pa.int64()),
        ("out_nelems", pa.int64()),
        ("bytes", pa.int64()),
        ("seq", pa.int64()),
    ]
)

_NCCL_SQL = """
WITH k AS (
    SELECT row_number() OVER (ORDER BY ts_ns) AS kid, *
    FROM events WHERE kind = 'kernel' AND name LIKE 'nccl%'
), rt AS (
    SELECT correlation, tid AS rt_tid, ts_ns AS rt_ts
    FROM events WHERE kind = 'runtime' AND correlation IS NOT NULL
), rpc AS (
    SELECT tid, ts_ns, ts_ns + dur_ns AS end_ns, coll_name, in_nelems, out_nelems,
           group_size, dtype, pg_name, pg_desc, pg_ranks, seq
    FROM events WHERE name = 'record_param_comms'
)
SELECT k.name AS raw_name, k.ts_ns, k.dur_ns, k.stream AS lane,
       coalesce(k.coll_name, r.coll_name)::VARCHAR AS issue_name,
       coalesce(r.ts_ns, rt.rt_ts) AS issue_ts_ns,
       coalesce(k.in_nelems, r.in_nelems) AS in_nelems,
       coalesce(k.out_nelems, r.out_nelems) AS out_nelems,
       coalesce(k.group_size, r.group_size) AS group_size,
       coalesce(k.dtype, r.dtype)::VARCHAR AS dtype,
       coalesce(k.pg_name, r.pg_name)::VARCHAR AS pg_name,
       coalesce(k.pg_desc, r.pg_desc)::VARCHAR AS pg_desc,
       coalesce(k.pg_ranks, r.pg_ranks)::VARCHAR AS pg_ranks,
       coalesce(k.seq, r.seq) AS seq
FROM k
LEFT JOIN rt USING (correlation)
LEFT JOIN rpc r ON r.tid = rt.rt_tid AND rt.rt_ts BETWEEN r.ts_ns AND r.end_ns
QUALIFY row_number() OVER (PARTITION BY k.kid ORDER BY r.ts_ns DESC NULLS LAST) = 1
ORDER BY k.ts_ns
"""

_GLOO_ISSUE_SQL = """
SELECT name::VARCHAR AS op, ts_ns, input_dims, input_types
FROM events WHERE kind = 'cpu_op' AND name LIKE 'c10d::%' ORDER BY ts_ns
"""
_GLOO_SPAN_SQL = """
SELECT name::VARCHAR AS raw_name, ts_ns, dur_ns, tid, input_dims, input_types
FROM events WHERE kind = 'comm_thread' ORDER BY ts_ns
"""

_KERNEL_DTYPE = re.compile(
    r"_(float|half|bf16|bfloat16|f16|f32|f64|double|i8|u8|i32|u32|i64|u64|fp8_e4m3|fp8_e5m2"
    r"|int8_t|uint8_t|int32_t|uint32_t|int64_t|uint64_t)(?=_|$)",
    re.IGNORECASE,
)
_KERNEL_DTYPE_NAMES = {
    "f32": "float",
    "f16": "half",
    "bf16": "bfloat16",
    "f64": "double",
    "i8": "int8",
    "u8": "uint8",
    "i32": "int32",
    "u32": "int32",
    "i64": "int64",
    "u64": "int64",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "int8_t": "int8",
    "uint8_t": "uint8",
    "int32_t": "int32",
    "uint32_t": "int32",
    "int64_t": "int64",
    "uint64_t": "int64",
}


def _kernel_dtype(name: str) -> str | None:
    m = _KERNEL_DTYPE.search(name.split("(")[0])
    if not m:
        return None
    d = m.group(1).lower()
    return _KERNEL_DTYPE_NAMES.get(d, d)


def _default_group_size(pgs: pa.Table, world_size: int | None) -> int | None:
    """Group size when the trace does not say: the rank's only group size, or the world."""
    sizes = {s for s in pgs["pg_size"].to_pylist() if s}
    if len(sizes) == 1:
        return sizes.pop()
    if not sizes:
        return world_size
    return None


def derive(
    con: duckdb.DuckDBPyConnection, rank: int, pgs: pa.Table, world_size: int | None
) -> pa.Table:
    """The rank-local collectives rows from the `events` table of `con`
    (cross-rank matching is the `collectives` view)."""
    rows: list[dict] = []
    default_n = _default_group_size(pgs, world_size)

    for r in con.sql(_NCCL_SQL).to_arrow_table().to_pylist():
        name = canonical_name(r["issue_name"]) or canonical_name(r["raw_name"])
        dtype = r["dtype"] or _kernel_dtype(r["raw_name"])
        eb = dtype_bytes(dtype)
        n_in, n_out = r["in_nelems"], r["out_nelems"]
        sizes = [x for x in (n_in, n_out) if x is not None]
        r.update(
            backend="nccl",
            name=name,
            dtype=dtype,
            elem_bytes=eb,
            group_size=r["group_size"] or default_n,
            bytes=max(sizes) * eb if sizes and eb else None,
        )
        rows.append(r)

    issue = []
    for r in con.sql(_GLOO_ISSUE_SQL).to_arrow_table().to_pylist():
        name = canonical_name(r["op"])
        if name is None:
            continue
        n_in, n_out = issue_sizes(r["op"], r["input_dims"])
        issue.append(
            {
                "name": name,
                "op": r["op"],
                "ts_ns": r["ts_ns"],
                "in": n_in,
                "out": n_out,
                "dtype": _first_type(r["input_types"]),
            }
        )
    spans = []
    for r in con.sql(_GLOO_SPAN_SQL).to_arrow_table().to_pylist():
        dims = json.loads(r["input_dims"]) if r["input_dims"] else None
        size = _numel(dims[0]) if isinstance(dims, list) and dims else None
        r.update(size=size, dtype=_first_type(r["input_types"]))
        spans.append(r)
    for sp, op in match_gloo(issue, spans):
        name = op["name"] if op else canonical_name(sp["raw_name"])
        n_in = op["in"] if op else sp["size"]
        n_out = op["out"] if op else (None if name == "all_gather" else sp["size"])
        n = default_n
        if n is None and n_in and n_out and name in ("all_gather", "reduce_scatter"):
            n = max(n_in, n_out) // min(n_in, n_out)
        if n_out is None and name == "all_gather" and n_in and n:
            n_out = n_in * n
        dtype = (op and op["dtype"]) or sp["dtype"]
        eb = dtype_bytes(dtype)
        sizes = [x for x in (n_in, n_out) if x is not None]
        rows.append(
            {
                "backend": "gloo",
                "name": name,
                "raw_name": sp["raw_name"],
                "issue_name": op["op"] if op else None,
                "issue_ts_ns": op["ts_ns"] if op else None,
                "ts_ns": sp["ts_ns"],
                "dur_ns": sp["dur_ns"],
                "lane": sp["tid"],
                "group_size": n,
                "dtype": dtype,
                "elem_bytes": eb,
                "in_nelems": n_in,
                "out_nelems": n_out,
                "bytes": max(sizes) * eb if sizes and eb else None,
            }
        )
    for r in rows:
        r["rank"] = rank
    cols = {f.name: [r.get(f.name) for r in rows] for f in COLUMNS}
    return pa.table(cols, schema=COLUMNS)
