"""One rank's counted ops: FLOPs from the signature table, nesting, and phase.

Runs at ingest over the rank's `events`. For every op in `tracekit.model.flops.SIGNATURES`
it records the FLOPs (or why they are unknown), whether it is the innermost op of the
table on its thread (only those count: `aten::conv2d` → `aten::convolution` →
`aten::_convolution` → `aten::cudnn_convolution` is one convolution, counted at
`cudnn_convolution`), and its phase:

- `backward`: inside an autograd node on its thread (`autograd::engine::evaluate_function: …`,
  or, in traces older than that span, the node itself: `AddmmBackward0`,
  `CudnnConvolutionBackward`). Activation-checkpoint recompute runs there too, so the
  forward ops it re-runs are backward-phase work: executed (hardware FLOPs), not model FLOPs.
- `optimizer`: inside `Optimizer.step#…` / `Optimizer.zero_grad#…`.
- `forward`: everything else.

The query is module `ingest.opscan`.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import groupby
from pathlib import Path

from tracekit import sql
from tracekit.ingest import coltable
from tracekit.model.flops import COUNTED_OPS, ConvGeometry, count, loads, op_dtype

SCHEMA = (
    ("rank", "INTEGER"),
    ("tid", "BIGINT"),
    ("name", "VARCHAR"),
    ("ts_ns", "BIGINT"),
    ("dur_ns", "BIGINT"),
    ("flops", "DOUBLE"),
    ("flops_note", "VARCHAR"),
    ("dtype", "VARCHAR"),
    ("phase", "VARCHAR"),
    ("tf32_arg", "BOOLEAN"),
    ("innermost", "BOOLEAN"),
)


# an op's JSON-text args decoded once per distinct text: a run repeats a few hundred
# shapes over millions of ops (0.027 → 0.018 s of Python per 128 small ranks). The decoded
# lists are shared between the ops that spelled them alike: the formulas only read them.
_loads = lru_cache(maxsize=4096)(loads)
_op_dtype = lru_cache(maxsize=4096)(op_dtype)


def scan(con, tmp_dir: Path) -> None:
    """Table `_ops` of `con`: the rank's counted ops (needs `events`; `tmp_dir`: where
    `coltable` may write)."""
    coltable.create(con, "_ops", SCHEMA, scan_rows(con), tmp_dir)


def scan_rows(con) -> list[dict]:
    """The counted ops (`scan`) of every rank in `events`, rank by rank, as dicts of
    `SCHEMA`: one query for all the ranks, each rank's rows then swept alone."""
    query = sql.query("ingest.opscan", "ops_and_phases")
    fetched = con.sql(query, params={"names": sorted(COUNTED_OPS)}).fetchall()
    out: list[dict] = []
    for _, rows in groupby(fetched, key=lambda r: r[0]):
        out += _scan_rank(list(rows))
    return out


def _scan_rank(rows: list[tuple]) -> list[dict]:
    """One rank's counted ops from its rows of `scan_rows`' query (in its order)."""
    geometry = ConvGeometry()
    ops = []
    for r in rows:
        if r[8] == "op":
            dims = _loads(r[5])
            geometry.learn(r[2], dims)
            ops.append(
                {"row": r, "dims": dims, "innermost": True, "phase": "forward", "parent": None}
            )
        else:
            ops.append({"row": r, "mark": r[8]})
    # one sweep per thread with a stack of open spans: nesting and phase
    stack: list[dict] = []
    tid = None
    for o in ops:
        _, t, _, ts, dur, *_ = o["row"]
        if t != tid:
            stack, tid = [], t
        end = ts + (dur or 0)
        while stack and not (end <= stack[-1]["end"] and (ts < stack[-1]["end"] or not dur)):
            stack.pop()  # not inside the top span (every span starts at or before ts)
        if "mark" not in o:
            for s in stack:
                if "mark" in s["o"]:
                    # the innermost enclosing mark decides (optimizer inside backward is rare)
                    o["phase"] = s["o"]["mark"]
                else:
                    s["o"]["innermost"] = False
                    o["parent"] = (s["o"]["row"][2], s["o"]["dims"])  # the nearest wins
        stack.append({"o": o, "end": end})
    counted: list[dict] = []
    for o in ops:
        if "mark" in o:
            continue
        rank, t, name, ts, dur, _, types, concrete, _ = o["row"]
        c = (
            count(name, o["dims"], _loads(concrete), geometry, o["parent"])
            if o["innermost"]
            else None
        )
        counted.append(
            {
                "rank": rank,
                "tid": t,
                "name": name,
                "ts_ns": ts,
                "dur_ns": dur,
                "flops": c.flops if c else None,
                "flops_note": c.reason if c else None,
                "dtype": _op_dtype(types),
                "phase": o["phase"],
                "tf32_arg": c.tf32 if c else False,
                "innermost": o["innermost"],
            }
        )
    return counted
