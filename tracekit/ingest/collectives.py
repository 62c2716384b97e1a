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

The SQL is module `ingest.collectives` (`tracekit/sql/ingest/collectives.sql`). The
pieces: `collnames` (kinds, element sizes), `issueops` (what issuing CPU ops say),
`collgroups` (the group a collective ran on), `gloo` (span ↔ issue op pairing),
`kernelclass` (the `kernel_classes` table); here, one row per instance.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import duckdb

from tracekit import sql
from tracekit.ingest import coltable
from tracekit.ingest.collgroups import default_group, global_peer, group_from_shapes, parse_ranks
from tracekit.ingest.collnames import canonical_name, dtype_bytes, kernel_dtype
from tracekit.ingest.gloo import match_gloo
from tracekit.ingest.issueops import (
    ISSUE_OP_PREFIXES,
    concrete_peer,
    first_type,
    issue_sizes,
    numel,
)

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
    c10d = _innermost(ops, lambda o: o["op"].startswith(ISSUE_OP_PREFIXES))
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
        n = numel(dims[0]) if isinstance(dims, list) and dims else None
        if n is not None:
            n_in, n_out, size_source = n, n, "issue_op"
    dtype = (
        r["dtype"]
        or rpc.get("dtype")
        or (c10d and first_type(c10d["input_types"]))
        or (ann and first_type(ann["input_types"]))
        or kernel_dtype(r["raw_name"])
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
    default = default_group(pgs, world_size)
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
                "dtype": first_type(r["input_types"]),
                "peer": concrete_peer(r["op"], r["concrete_inputs"]),
            }
        )
    spans = []
    for r in fetched["spans"]:
        dims = json.loads(r["input_dims"]) if r["input_dims"] else None
        size = numel(dims[0]) if isinstance(dims, list) and dims else None
        r.update(size=size, dtype=first_type(r["input_types"]))
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


_GROUPS = (("rank", "INTEGER"), ("gid", "BIGINT"), ("group_ranks", "BIGINT[]"))


def tables(con: duckdb.DuckDBPyConnection, rows: list[dict], tmp_dir: Path) -> None:
    """Tables `_collectives` and `collective_groups` of `con` from collective rows (of one
    rank or several: `derive_rows`), which it takes over (each row's group becomes the
    number `gid` of its rank's distinct groups)."""
    # each rank's distinct groups go to DuckDB once, the rows a number of theirs: a
    # world-sized list per row was 1M numbers written as JSON, read back and hashed per
    # 128 ranks of a 1,024-rank run (0.065 s of the batch's CPU)
    groups: list[dict] = []
    gid: dict[tuple, int] = {}
    by_object: dict[tuple[int, int], int] = {}  # most rows share their group's list object
    for r in rows:
        ranks = r.pop("group_ranks")
        if ranks is None:
            continue
        key = (r["rank"], id(ranks))
        g = by_object.get(key)
        if g is None:
            g = gid.setdefault((r["rank"], tuple(ranks)), len(groups))
            if g == len(groups):
                groups.append({"rank": r["rank"], "gid": g, "group_ranks": ranks})
            by_object[key] = g
        r["gid"] = g
    coltable.create(con, "_groups", _GROUPS, groups, tmp_dir)
    coltable.create(con, "_derived", (*COLUMNS, ("gid", "BIGINT")), rows, tmp_dir)
    # a group's ranks once per group (collective_groups), the rows a 64-bit key of them:
    # matching then never carries a world-sized list per collective row
    con.execute(sql.query("ingest.collectives", "groups_table"))
    con.execute(sql.query("ingest.collectives", "collectives_table"))
    con.execute(sql.query("ingest.collectives", "collective_groups_table"))
    con.execute("DROP TABLE _derived")
    con.execute("DROP TABLE _groups")
