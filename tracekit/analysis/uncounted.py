"""Uncounted compute: the device time of compute kernels whose FLOPs tracekit cannot know
and that may carry matmul-class FLOPs — the work MFU counts.

MFU counts the ops of the FLOPs table (tracekit/model/flops.py) whose shapes the trace
gives. MFU is of matmul-class work (GEMM, attention, convolution:
tracekit/model/opclass.py); elementwise, normalization, embedding, optimizer and copy
ops have ~zero model FLOPs, are correctly zero in MFU, and are NOT uncounted. Each
compute kernel is attributed (`levels.compute:kernel_attribution`); it is uncounted
when its cause is

- `graph_replay`: a matmul-class kernel (by kernel name) a CUDA/HIP graph launch
  replayed (`cudaGraphLaunch`, `hipGraphLaunch`): no CPU op above it, so no shapes
  (vLLM/SGLang decode, xDiT, torch.compile's cudagraphs);
- `op_without_formula`: a kernel of an op tracekit has no FLOP formula for, where the
  kernel or the op is matmul-class by name (a GEMM or attention op of a library not in
  the table, e.g. `mylib::fused_attention`);
- `op_without_flops`: any kernel of a table op whose FLOPs the trace cannot give (a
  missing argument: the op's note says which);
- `no_op`: a matmul-class kernel with no launching op in the trace.

The rest of the formula-less time (elementwise, norm, embedding, optimizer, copies, and
graph replays or launcher-less kernels that are not matmul-class) is "not matmul work":
it is summed apart (`other_ms_per_step`, its ops in `other_ops`, which `top_ops` shows
with `uncounted` null) and is in neither part of the fraction's numerator.

`uncounted_compute_fraction` (per rank; summary: mean over ranks) = the uncounted
kernels' device time ÷ the device time of all compute kernels in the window (plain sums,
as `top_kernels`). On CPU runs the ops are the device: (the time of table ops without
FLOPs + the time of matmul-class ops by name that are outside every table op and hold
none, outermost only) ÷ the rank's compute time (`compute_ms`), clamped to [0, 1], for
ops starting in the window; `top_ops` lists those ops, and `top_kernels` stays empty.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.metrics import windows as W
from tracekit.metrics.breakdown import windows_of
from tracekit.model.opclass import is_matmul_kernel, is_matmul_op
from tracekit.report import schema as S

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts

CAUSES = ("graph_replay", "op_without_formula", "op_without_flops", "no_op")
CAUSE_TEXT = {
    "graph_replay": "graph replay (GEMM/attention kernels of a CUDA/HIP graph launch: no op "
    "above them)",
    "op_without_formula": "GEMM/attention/convolution ops without a FLOP formula",
    "op_without_flops": "ops whose FLOPs the trace cannot give",
    "no_op": "GEMM/attention kernels with no launching op",
}
TOP = 10


@dataclass
class UncountedFacts:
    by_rank: dict[int, float | None]  # rank → uncounted_compute_fraction
    fraction: float | None  # mean over ranks
    cause_ms_per_step: dict[str, float] = field(default_factory=dict)  # mean over ranks
    compute_ms_per_step: float | None = None  # compute kernel time, mean over ranks
    top_ops: list[S.UncountedOpRow] = field(default_factory=list)
    top_kernels: list[S.UncountedKernelRow] = field(default_factory=list)
    other_ms_per_step: float = 0.0  # formula-less time that is not matmul work, mean over ranks
    # its ops, most time first, as `top_ops` rows (`uncounted` null: not matmul work)
    other_ops: list[S.OpRow] = field(default_factory=list)

    def share(self, cause: str) -> float:
        """The cause's share of compute kernel time (0 when there is none)."""
        if not self.compute_ms_per_step:
            return 0.0
        return self.cause_ms_per_step.get(cause, 0.0) / self.compute_ms_per_step


def is_uncounted(why: str, op: str | None, kernel: str) -> bool:
    """Whether a kernel of `kernel_attribution` cause `why` counts as uncounted: a table
    op without FLOPs always; otherwise only matmul-class work (module docstring)."""
    if why == "counted":
        return False
    if why == "op_without_flops":
        return True
    if why == "op_without_formula":
        return is_matmul_kernel(kernel) or is_matmul_op(op)
    return is_matmul_kernel(kernel)  # graph_replay, no_op


def facts(ctx: Facts) -> UncountedFacts:
    if ctx.cpu:
        return _cpu(ctx)
    # the per-kernel attribution is rank-local, built at ingest (`rank.kernel_ops`): here
    # it is only clipped to the windows and summed
    windows = W.values(ctx.run, windows_of(ctx.ranks))
    rows = ctx.run.sql(sql.query("levels.compute", "kernel_attribution", windows=windows))
    rows = rows.fetchall()
    steps = {r.rank: max(r.steps, 1) for r in ctx.ranks}
    n_ranks = max(len(ctx.ranks), 1)
    total: dict[int, int] = {}
    unc: dict[int, int] = {}
    causes: dict[str, float] = {}
    ops: dict[tuple[str, str | None], dict] = {}
    kernels: dict[tuple[str, str], dict] = {}
    other: dict[str | None, dict] = {}
    other_ms = 0.0
    for rank, why, op, kernel, note, ns, n, n_ops in rows:
        total[rank] = total.get(rank, 0) + ns
        if why == "counted":
            continue
        if not is_uncounted(why, op, kernel):
            other_ms += ns / 1e6 / steps.get(rank, 1) / n_ranks
            name = op or "(no op)"
            oo = other.setdefault(name, {"name": name, "why": None, "note": None, "ops": {},
                                         "device_ns": 0})  # fmt: skip
            oo["device_ns"] += ns
            oo["ops"][rank] = oo["ops"].get(rank, 0) + n_ops
            continue
        unc[rank] = unc.get(rank, 0) + ns
        per_step_ms = ns / 1e6 / steps.get(rank, 1) / n_ranks
        causes[why] = causes.get(why, 0.0) + per_step_ms
        o = ops.setdefault(
            (why, op),
            {"name": op or "(no op)", "why": why, "note": note, "ops": {}, "device_ns": 0},
        )
        o["device_ns"] += ns
        o["ops"][rank] = max(o["ops"].get(rank, 0), n_ops)  # an op's kernels: count it once
        kk = kernels.setdefault(
            (why, kernel),
            {"name": kernel, "why": why, "op": op, "count_per_step": 0.0, "time_ms_per_step": 0.0},
        )
        kk["count_per_step"] += n / steps.get(rank, 1) / n_ranks
        kk["time_ms_per_step"] += per_step_ms
    by_rank = {
        r.rank: (unc.get(r.rank, 0) / total[r.rank] if total.get(r.rank) else None)
        for r in ctx.ranks
    }
    known = [v for v in by_rank.values() if v is not None]
    top_ops = [
        S.UncountedOpRow(
            name=o["name"],
            why=o["why"],
            note=o["note"],
            count=sum(o["ops"].values()),
            device_ms=o["device_ns"] / 1e6,
        )
        for o in sorted(ops.values(), key=lambda o: (-o["device_ns"], o["name"], o["why"]))[:TOP]
    ]
    other_ops = [
        _other_op(o["name"], sum(o["ops"].values()), o["device_ns"])
        for o in sorted(other.values(), key=lambda o: (-o["device_ns"], o["name"]))[:TOP]
    ]
    top_kernels = [
        S.UncountedKernelRow(**k)
        for k in sorted(
            kernels.values(), key=lambda k: (-k["time_ms_per_step"], k["name"], k["why"])
        )[:TOP]
    ]
    compute_ms = (
        sum(ns / 1e6 / steps.get(r, 1) for r, ns in total.items()) / n_ranks if total else None
    )
    return UncountedFacts(
        by_rank=by_rank,
        fraction=sum(known) / len(known) if known else None,
        cause_ms_per_step=causes,
        compute_ms_per_step=compute_ms,
        top_ops=top_ops,
        top_kernels=top_kernels,
        other_ms_per_step=other_ms,
        other_ops=other_ops,
    )


def _other_op(name: str, count: int, device_ns: int) -> S.OpRow:
    """A formula-less op that is not matmul work, as a `top_ops` row: no FLOPs, none
    counted, `uncounted` null."""
    return S.OpRow(name=name, dtype=None, count=count, flops=None, device_ms=device_ns / 1e6,
                   not_counted=count, achieved_tflops=None, op_peak_fraction=None)  # fmt: skip


def _count(found: dict[tuple[str, str], dict], name: str, why: str, note, ns: int) -> None:
    """One more op `name` of cause `why` (its first note kept) in `found`."""
    o = found.setdefault((name, why), {"name": name, "why": why, "note": note, "count": 0, "ns": 0})
    o["count"] += 1
    o["ns"] += ns


def _cpu(ctx: Facts) -> UncountedFacts:
    flops_rows = ctx.run.sql("SELECT rank, tid, ts_ns, ts_ns + dur_ns FROM op_flops").fetchall()
    in_win = W.ops_in("SELECT * FROM op_flops WHERE flops IS NULL", ctx.windows)
    without: dict[int, int] = {}
    found: dict[tuple[str, str], dict] = {}
    for rank, name, note, dur in ctx.run.sql(
        f"SELECT rank, name, flops_note, dur_ns FROM ({in_win})"
    ).fetchall():
        without[rank] = without.get(rank, 0) + dur
        _count(found, name, "op_without_flops", note, dur)
    # matmul-class ops by name outside every table op (innermost table ops on a thread
    # never overlap, so starts and ends are both sorted), outermost only
    table: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for rank, tid, ts, end in sorted(flops_rows, key=lambda r: r[2]):
        starts, ends = table.setdefault((rank, tid), ([], []))
        starts.append(ts)
        ends.append(end)
    names = [
        n for (n,) in ctx.run.sql(
            "SELECT DISTINCT name::VARCHAR FROM events WHERE kind = 'cpu_op'"
        ).fetchall() if is_matmul_op(n)
    ]  # fmt: skip
    matmul_ns: dict[int, int] = {}
    if names:
        src = (
            "SELECT rank, tid, name::VARCHAR AS name, ts_ns, dur_ns FROM events "
            "WHERE kind = 'cpu_op' AND name::VARCHAR IN (SELECT unnest($names))"
        )
        cand = ctx.run.sql(
            f"SELECT rank, tid, name, ts_ns, dur_ns FROM ({W.starting_in(src, ctx.windows)}) "
            "ORDER BY rank, tid, ts_ns, dur_ns DESC",
            params={"names": names},
        ).fetchall()
        cover: dict[tuple[int, int], int] = {}
        captures = ctx.run.sql(sql.query("levels.compute", "capture_spans")).fetchall()
        for rank, tid, name, ts, dur in cand:
            if any(c[0] == rank and c[1] == tid and c[2] <= ts <= c[3] for c in captures):
                continue  # recorded into a CUDA graph, not run: no work (op_flops)
            end = ts + dur
            starts, ends = table.get((rank, tid), ([], []))
            i = bisect.bisect_left(starts, end) - 1
            if i >= 0 and ends[i] > ts:
                continue  # holds or sits in a table op: its time is that op's
            if ts < cover.get((rank, tid), -1):
                continue  # inside a matmul-class op already taken
            cover[(rank, tid)] = end
            matmul_ns[rank] = matmul_ns.get(rank, 0) + dur
            _count(found, name, "op_without_formula", None, dur)
    by_rank: dict[int, float | None] = {}
    for r in ctx.ranks:
        comp_ns = (r.compute_ms or 0) * 1e6
        unc_ns = (without.get(r.rank) or 0) + matmul_ns.get(r.rank, 0)
        by_rank[r.rank] = min(1.0, max(0.0, unc_ns / comp_ns)) if comp_ns else None
    known = [v for v in by_rank.values() if v is not None]
    top_ops = [
        S.UncountedOpRow(name=o["name"], why=o["why"], note=o["note"], count=o["count"],
                         device_ms=o["ns"] / 1e6)
        for o in sorted(found.values(), key=lambda o: (-o["ns"], o["name"], o["why"]))[:TOP]
    ]  # fmt: skip
    return UncountedFacts(
        by_rank=by_rank, fraction=sum(known) / len(known) if known else None, top_ops=top_ops
    )


def describe(u: UncountedFacts) -> str:
    """'72% of compute time: graph replay 68%, ops without a FLOP formula 4% (…)'."""
    parts = []
    for cause in CAUSES:
        s = u.share(cause)
        if s >= 0.005:
            parts.append(f"{CAUSE_TEXT[cause]} {s:.0%}")
    names = [o.name for o in u.top_ops[:3]]
    tail = f" — most in {', '.join(names)}" if names else ""
    if not parts and u.fraction and not u.compute_ms_per_step:  # CPU run: no kernels
        return "CPU run: GEMM/attention/convolution ops without FLOPs" + tail
    return "; ".join(parts) + tail
