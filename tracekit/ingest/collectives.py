"""The collectives table: one row per collective instance per rank, any backend.

Device kernels (NCCL, RCCL, DeepEP, NVSHMEM, symmetric memory, custom all-reduce,
userbuffers, user patterns: `tracekit.model.commkernels`)
    Every communication kernel is one instance. Its kind, size, dtype, group and
    `Seq` come from, in order: the kernel's own metadata args (recent torch copies
    them there), the `record_param_comms` CPU op that encloses the kernel's launch
    (the runtime call with the kernel's `correlation`, on the same thread, inside the
    op's span), the enclosing `c10d::*` op's `Input Dims` or `nccl:*` annotation's
    (old traces: `c10d::alltoall_base_` run as `ncclKernel_SendRecv` is an
    all_to_all of its input's size), and for the kind alone the kernel name (its
    table entry, or NCCL's `…Kernel_<Coll>_…`). What none of them says is null:
    RCCL's `ncclDevKernel_Generic` without metadata has no kind. `kind_source` and
    `size_source` say where each came from.

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

A send's or recv's `peer` (the global rank at the other end, `global_peer`) comes from
record_param_comms' "Rank" on NCCL runs and from the `c10d::send`/`c10d::recv_` op's
Concrete Inputs on gloo runs: both give the peer's rank in the process group.

The SQL is module `ingest.collectives` (`tracekit/sql/ingest/collectives.sql`).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict, deque
from math import prod
from pathlib import Path
from typing import Any

import duckdb

from tracekit import sql
from tracekit.ingest import coltable
from tracekit.model import commkernels

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
_PREFIXES = ("c10d::", "_c10d_functional::", "gloo:", "nccl:", "vllm::")
# the framework's own collective ops above a kernel that carries no metadata: c10d and
# functional collectives, vLLM's (`vllm::all_reduce(Tensor input, str group_name)`)
_ISSUE_OP_PREFIXES = ("c10d::", "_c10d_functional::", "vllm::")


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

COLUMNS = (
    ("rank", "INTEGER"),
    ("backend", "VARCHAR"),
    ("name", "VARCHAR"),
    ("raw_name", "VARCHAR"),
    ("issue_name", "VARCHAR"),
    ("issue_ts_ns", "BIGINT"),
    ("ts_ns", "BIGINT"),
    ("dur_ns", "BIGINT"),
    ("lane", "BIGINT"),
    ("pg_name", "VARCHAR"),
    ("pg_desc", "VARCHAR"),
    ("pg_ranks", "VARCHAR"),
    ("group_size", "BIGINT"),
    ("dtype", "VARCHAR"),
    ("elem_bytes", "BIGINT"),
    ("in_nelems", "BIGINT"),
    ("out_nelems", "BIGINT"),
    ("bytes", "BIGINT"),
    ("seq", "BIGINT"),
    ("group_ranks", "BIGINT[]"),
    ("kind_source", "VARCHAR"),
    ("size_source", "VARCHAR"),
    ("peer", "BIGINT"),
    ("group_source", "VARCHAR"),
)

KERNEL_CLASSES = (
    ("rank", "INTEGER"),
    ("name", "VARCHAR"),
    ("category", "VARCHAR"),
    ("family", "VARCHAR"),
    ("coll_name", "VARCHAR"),
    ("pattern", "VARCHAR"),
)


def kernel_classes(
    con: duckdb.DuckDBPyConnection, tmp_dir: Path, user: tuple[str, ...] = ()
) -> None:
    """Table `kernel_classes` of `con`: one row per rank and distinct kernel name:
    communication (a `commkernels` entry or a user pattern matches) or compute; the
    collective its name tells. (`tmp_dir`: where `coltable` may write.)"""
    coltable.create(con, "kernel_classes", KERNEL_CLASSES, kernel_class_rows(con, user), tmp_dir)


def kernel_class_rows(con: duckdb.DuckDBPyConnection, user: tuple[str, ...] = ()) -> list[dict]:
    """The `kernel_classes` rows of every rank in `events`, by rank and name (a name is
    classified once, however many ranks ran it)."""
    rx = commkernels.compile_patterns(user, "--comm-kernel")
    pairs = con.execute(sql.query("ingest.collectives", "kernel_names")).fetchall()
    known: dict[str, dict] = {}
    rows = []
    for rank, name in pairs:
        row = known.get(name)
        if row is None:
            c = commkernels.classify(name, rx)
            kind = None
            if c is not None:
                kind = c.kind or (canonical_name(name) if c.family == "nccl" else None)
            row = known[name] = {
                "name": name,
                "category": "communication" if c else "compute",
                "family": c.family if c else None,
                "coll_name": kind,
                "pattern": c.pattern if c else None,
            }
        rows.append({"rank": rank, **row})
    return rows


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


def _default_group(
    pgs: list[dict], world_size: int | None
) -> tuple[int | None, list | None, str | None]:
    """(size, ranks, source) of the group a collective ran on when neither its metadata
    nor its shapes say: the rank's only group size (its ranks when every group of that
    size lists the same; source `pg_config`), or — when the trace lists no groups at
    all — the world (`world`)."""
    groups = [(p["pg_size"], tuple(p["ranks"] or ())) for p in pgs if p["pg_size"]]
    sizes = {n for n, _ in groups}
    if len(sizes) == 1:
        rank_sets = {r for _, r in groups if r}
        n = sizes.pop()
        return n, list(rank_sets.pop()) if len(rank_sets) == 1 else None, "pg_config"
    if not sizes and world_size:
        return world_size, list(range(world_size)), "world"
    return None, None, None


def group_from_shapes(name: str | None, n_in: int | None, n_out: int | None) -> int | None:
    """The group size an all-gather's or reduce-scatter's shapes imply: each rank
    contributes its shard to, or receives its shard of, the whole buffer, so the group
    is the whole ÷ the shard (all-gather out ÷ in; reduce-scatter in ÷ out) when that
    divides exactly and is ≥ 2; None for other collectives or other shapes."""
    if name not in ("all_gather", "reduce_scatter") or not n_in or not n_out:
        return None
    whole, shard = (n_out, n_in) if name == "all_gather" else (n_in, n_out)
    if shard <= 0 or whole % shard or whole // shard < 2:
        return None
    return whole // shard


def parse_ranks(text: str | None) -> list[int] | None:
    """`"[0, 1, 2, 3]"` → [0, 1, 2, 3]; empty, absent or odd → None (unknown)."""
    if not text:
        return None
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if not isinstance(v, list) or not v or not all(isinstance(x, int) for x in v):
        return None
    return v


# collectives whose nccl:* annotation `Input Dims` give the whole message (in = out)
_SAME_SIZE = {"all_reduce", "all_to_all", "broadcast", "reduce", "send", "recv", "send_recv"}


def _innermost(ops: list[dict], pred) -> dict | None:
    hits = [o for o in ops if pred(o)]
    return max(hits, key=lambda o: o["ts_ns"]) if hits else None


def _device_row(r: dict, ops: list[dict], pg_ranks: dict, default: tuple) -> dict:
    """One communication kernel → one collectives row. Kind and size come from the
    kernel's metadata, else the issuing CPU ops (record_param_comms, then a c10d op or
    nccl:* annotation with `Input Dims`), else the kernel name (kind only), else null."""
    rpc = _innermost(ops, lambda o: o["op"] == "record_param_comms")
    c10d = _innermost(ops, lambda o: o["op"].startswith(_ISSUE_OP_PREFIXES))
    ann = _innermost(ops, lambda o: o["op"].startswith("nccl:"))
    rpc = rpc or {}

    name, kind_source, issue_name = None, None, None
    for cand, src in (
        (r["coll_name"], "kernel"),
        (rpc.get("coll_name"), "record_param_comms"),
        (c10d and c10d["op"], "issue_op"),
        (ann and ann["op"], "issue_op"),
    ):
        if cand and canonical_name(cand):
            name, kind_source, issue_name = canonical_name(cand), src, cand
            break
    if name is None and r["name_kind"]:
        name, kind_source = r["name_kind"], "kernel_name"

    n_in = n_out = size_source = None
    if r["in_nelems"] is not None or r["out_nelems"] is not None:
        n_in, n_out, size_source = r["in_nelems"], r["out_nelems"], "kernel"
    elif rpc.get("in_nelems") is not None or rpc.get("out_nelems") is not None:
        n_in, n_out, size_source = rpc["in_nelems"], rpc["out_nelems"], "record_param_comms"
    if size_source is None and c10d:
        i, o = issue_sizes(c10d["op"], c10d["input_dims"])
        if i is not None or o is not None:
            n_in, n_out, size_source = i, o, "issue_op"
    if size_source is None and ann and name in _SAME_SIZE:
        dims = json.loads(ann["input_dims"]) if ann["input_dims"] else None
        n = _numel(dims[0]) if isinstance(dims, list) and dims else None
        if n is not None:
            n_in, n_out, size_source = n, n, "issue_op"
    dtype = (
        r["dtype"]
        or rpc.get("dtype")
        or (c10d and _first_type(c10d["input_types"]))
        or (ann and _first_type(ann["input_types"]))
        or _kernel_dtype(r["raw_name"])
    )
    pg_name = r["pg_name"] or rpc.get("pg_name")
    ranks = parse_ranks(r["pg_ranks"] or rpc.get("pg_ranks")) or pg_ranks.get(pg_name)
    group, group_source = None, None
    for cand, src in (
        (r["group_size"], "kernel"),
        (rpc.get("group_size"), "record_param_comms"),
        (len(ranks) if ranks else None, "pg_ranks"),
        (group_from_shapes(name, n_in, n_out), "shapes"),
    ):
        if cand:
            group, group_source = cand, src
            break
    if group_source == "shapes":
        # the group's ranks: the default group's where it is this size, else unknown
        ranks = default[1] if default[0] == group else None
    elif group is None:
        group, ranks, group_source = default
    eb = dtype_bytes(dtype)
    sizes = [x for x in (n_in, n_out) if x is not None]
    issue_ts = [o["ts_ns"] for o in ops]
    peer = global_peer(name, rpc.get("comm_rank"), ranks)
    return {
        "backend": r["family"],
        "name": name,
        "raw_name": r["raw_name"],
        "issue_name": issue_name,
        "issue_ts_ns": min(issue_ts) if issue_ts else r["rt_ts"],
        "ts_ns": r["ts_ns"],
        "dur_ns": r["dur_ns"],
        "lane": r["lane"],
        "pg_name": pg_name,
        "pg_desc": r["pg_desc"] or rpc.get("pg_desc"),
        "pg_ranks": r["pg_ranks"] or rpc.get("pg_ranks"),
        "group_ranks": ranks,
        "group_size": group,
        "dtype": dtype,
        "elem_bytes": eb,
        "in_nelems": n_in,
        "out_nelems": n_out,
        "bytes": max(sizes) * eb if sizes and eb else None,
        "seq": r["seq"] if r["seq"] is not None else rpc.get("seq"),
        "kind_source": kind_source,
        "size_source": size_source,
        "peer": peer,
        "group_source": group_source,
    }


def global_peer(name: str | None, local: Any, ranks: list[int] | None) -> int | None:
    """The global rank a send goes to or a recv comes from: `local` is its rank in the
    process group (record_param_comms' "Rank" of a send/recv, PyTorch's
    ProcessGroupNCCL::send/recv `dstRank`/`srcRank`; gloo's `c10d::send`/`c10d::recv_`
    third argument), mapped through the group's global ranks. None for other
    collectives, or where the group's ranks are unknown."""
    if name not in ("send", "recv") or not ranks or isinstance(local, bool):
        return None
    if not isinstance(local, int) or not 0 <= local < len(ranks):
        return None
    return int(ranks[local])


def _concrete_peer(op: str, concrete: str | None) -> int | None:
    """A gloo `c10d::send(tensors, pg, dstRank, tag)` / `c10d::recv_(tensors, pg,
    srcRank, tag)`'s peer as the trace's `Concrete Inputs` give it (record_shapes=True),
    its rank in the process group; None when absent."""
    if op not in ("c10d::send", "c10d::recv_") or not concrete:
        return None
    try:
        args = json.loads(concrete)
    except ValueError:
        return None
    if not isinstance(args, list) or len(args) < 3:
        return None
    try:
        return int(args[2])
    except (TypeError, ValueError):
        return None


def derive(
    con: duckdb.DuckDBPyConnection,
    rank: int,
    pgs: list[dict],
    world_size: int | None,
    tmp_dir: Path,
) -> None:
    """Tables `_collectives` and `collective_groups` of `con`: the rank-local collective
    rows from its `events` and `kernel_classes` tables (cross-rank matching is the
    `collectives` view), and the groups they ran on. `pgs`: the rank's `process_groups`
    rows; `tmp_dir`: where `coltable` may write."""
    tables(con, derive_rows(con, {rank: (pgs, world_size)}), tmp_dir)


def derive_rows(
    con: duckdb.DuckDBPyConnection, ranks: dict[int, tuple[list[dict], int | None]]
) -> list[dict]:
    """The rank-local collective rows of the ranks in `events` (`derive`), as dicts of
    `COLUMNS`, rank by rank. `ranks`: each rank's (`process_groups` rows, world size).
    Each query runs once for all the ranks; the rows of each rank are then read as one
    rank's alone."""
    by_rank: dict[str, dict[int, list[dict]]] = {}
    for label, name in (
        ("ops", "issue_ops"),
        ("kernels", "comm_kernels"),
        ("issue", "gloo_issue"),
        ("spans", "gloo_spans"),
    ):
        groups: dict[int, list[dict]] = defaultdict(list)
        for r in coltable.dicts(con.sql(sql.query("ingest.collectives", name))):
            groups[r.pop("rank")].append(r)
        by_rank[label] = groups
    rows: list[dict] = []
    for rank in sorted(ranks):
        pgs, world_size = ranks[rank]
        rows += _rank_rows(rank, pgs, world_size, {k: v.get(rank, []) for k, v in by_rank.items()})
    return rows


def _rank_rows(
    rank: int, pgs: list[dict], world_size: int | None, fetched: dict[str, list[dict]]
) -> list[dict]:
    """One rank's collective rows from its rows of the four queries of `derive_rows`."""
    rows: list[dict] = []
    default = _default_group(pgs, world_size)
    default_n = default[0]
    pg_ranks = {p["pg_name"]: list(p["ranks"]) for p in pgs if p["ranks"]}
    ops: dict[int, list[dict]] = defaultdict(list)
    for o in fetched["ops"]:
        ops[o["kid"]].append(o)
    for r in fetched["kernels"]:
        rows.append(_device_row(r, ops.get(r["kid"], []), pg_ranks, default))

    issue = []
    for r in fetched["issue"]:
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
                "peer": _concrete_peer(r["op"], r["concrete_inputs"]),
            }
        )
    spans = []
    for r in fetched["spans"]:
        dims = json.loads(r["input_dims"]) if r["input_dims"] else None
        size = _numel(dims[0]) if isinstance(dims, list) and dims else None
        r.update(size=size, dtype=_first_type(r["input_types"]))
        spans.append(r)
    for sp, op in match_gloo(issue, spans):
        name = op["name"] if op else canonical_name(sp["raw_name"])
        n_in = op["in"] if op else sp["size"]
        n_out = op["out"] if op else (None if name == "all_gather" else sp["size"])
        shaped = group_from_shapes(name, n_in, n_out)
        n, group_source = (shaped, "shapes") if shaped else (default_n, default[2])
        if n_out is None and name == "all_gather" and n_in and n:
            n_out = n_in * n
        dtype = (op and op["dtype"]) or sp["dtype"]
        eb = dtype_bytes(dtype)
        sizes = [x for x in (n_in, n_out) if x is not None]
        group_ranks = default[1] if n == default_n else None
        group_source = group_source if n else None
        rows.append(
            {
                "backend": "gloo",
                "kind_source": "issue_op" if op else "span_name",
                "size_source": ("issue_op" if op else "span") if sizes else None,
                "group_ranks": group_ranks,
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
                "peer": global_peer(name, op and op["peer"], group_ranks),
                "group_source": group_source,
            }
        )
    for r in rows:
        r["rank"] = rank
    return rows


def tables(con: duckdb.DuckDBPyConnection, rows: list[dict], tmp_dir: Path) -> None:
    """Tables `_collectives` and `collective_groups` of `con` from collective rows (of one
    rank or several: `derive_rows`)."""
    coltable.create(con, "_derived", COLUMNS, rows, tmp_dir)
    # a group's ranks once per group (collective_groups), the rows a 64-bit key of them:
    # matching then never carries a world-sized list per collective row
    con.execute(sql.query("ingest.collectives", "collectives_table"))
    con.execute(sql.query("ingest.collectives", "collective_groups_table"))
    con.execute("DROP TABLE _derived")
