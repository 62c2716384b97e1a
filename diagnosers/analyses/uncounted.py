"""Uncounted compute: the device time of compute kernels whose FLOPs tracekit cannot know.

MFU counts the ops of the FLOPs table (tracekit/model/flops.py) whose shapes the trace
gives. The rest of the compute time is named here, by cause
(`levels.compute:kernel_attribution`):

- `graph_replay`: kernels a CUDA/HIP graph launch replayed (`cudaGraphLaunch`,
  `hipGraphLaunch`): no CPU op above them, so no shapes (vLLM/SGLang decode, xDiT,
  torch.compile's cudagraphs);
- `op_without_formula`: kernels launched by an op tracekit has no FLOP formula for —
  elementwise and normalization ops (little FLOPs), but also attention or GEMM ops of
  libraries not in the table;
- `op_without_flops`: kernels of a table op whose FLOPs the trace cannot give (a missing
  argument: the op's note says which);
- `no_op`: kernels with no launching op in the trace.

`uncounted_compute_fraction` (per rank; summary: mean over ranks) = their device time ÷
the device time of all compute kernels in the window (plain sums, as `top_kernels`). On
CPU runs the ops are the device: 1 − the time of the counted ops (innermost table ops
with FLOPs starting in the window) ÷ the rank's compute time (`compute_ms`), clamped to
[0, 1]; the top lists need kernels and stay empty there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.metrics import windows as W

if TYPE_CHECKING:
    from diagnosers.context import Context

CAUSES = ("graph_replay", "op_without_formula", "op_without_flops", "no_op")
CAUSE_TEXT = {
    "graph_replay": "graph replay (kernels of a CUDA/HIP graph launch: no op above them)",
    "op_without_formula": "ops without a FLOP formula",
    "op_without_flops": "ops whose FLOPs the trace cannot give",
    "no_op": "kernels with no launching op",
}
TOP = 10


@dataclass
class UncountedFacts:
    by_rank: dict[int, float | None]  # rank → uncounted_compute_fraction
    fraction: float | None  # mean over ranks
    cause_ms_per_step: dict[str, float] = field(default_factory=dict)  # mean over ranks
    compute_ms_per_step: float | None = None  # compute kernel time, mean over ranks
    top_ops: list[dict] = field(default_factory=list)
    top_kernels: list[dict] = field(default_factory=list)

    def share(self, cause: str) -> float:
        """The cause's share of compute kernel time (0 when there is none)."""
        if not self.compute_ms_per_step:
            return 0.0
        return self.cause_ms_per_step.get(cause, 0.0) / self.compute_ms_per_step


def facts(ctx: Context) -> UncountedFacts:
    if ctx.cpu:
        return _cpu(ctx)
    rows = ctx.run.sql(
        sql.query("levels.compute", "kernel_attribution", windows=ctx.windows)
    ).fetchall()
    steps = {r.rank: max(r.steps, 1) for r in ctx.ranks}
    n_ranks = max(len(ctx.ranks), 1)
    total: dict[int, int] = {}
    unc: dict[int, int] = {}
    causes: dict[str, float] = {}
    ops: dict[tuple[str, str | None], dict] = {}
    kernels: dict[tuple[str, str], dict] = {}
    for rank, why, op, kernel, note, ns, n, n_ops in rows:
        total[rank] = total.get(rank, 0) + ns
        if why == "counted":
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
        {
            "name": o["name"],
            "why": o["why"],
            "note": o["note"],
            "count": sum(o["ops"].values()),
            "device_ms": o["device_ns"] / 1e6,
        }
        for o in sorted(ops.values(), key=lambda o: (-o["device_ns"], o["name"], o["why"]))[:TOP]
    ]
    top_kernels = sorted(
        kernels.values(), key=lambda k: (-k["time_ms_per_step"], k["name"], k["why"])
    )[:TOP]
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
    )


def _cpu(ctx: Context) -> UncountedFacts:
    ops = W.starting_in("SELECT * FROM op_flops WHERE flops IS NOT NULL", ctx.windows)
    counted = dict(
        ctx.run.sql(f"SELECT rank, sum(device_ns) FROM ({ops}) GROUP BY rank").fetchall()
    )
    by_rank: dict[int, float | None] = {}
    for r in ctx.ranks:
        comp_ns = (r.compute_ms or 0) * 1e6
        by_rank[r.rank] = (
            min(1.0, max(0.0, 1 - (counted.get(r.rank) or 0) / comp_ns)) if comp_ns else None
        )
    known = [v for v in by_rank.values() if v is not None]
    return UncountedFacts(by_rank=by_rank, fraction=sum(known) / len(known) if known else None)


def describe(u: UncountedFacts) -> str:
    """'72% of compute time: graph replay 68%, ops without a FLOP formula 4% (…)'."""
    parts = []
    for cause in CAUSES:
        s = u.share(cause)
        if s >= 0.005:
            parts.append(f"{CAUSE_TEXT[cause]} {s:.0%}")
    names = [o["name"] for o in u.top_ops[:3]]
    tail = f" — most in {', '.join(names)}" if names else ""
    if not parts and u.fraction and not u.compute_ms_per_step:  # CPU run: no kernels
        return "CPU run: the ops outside the counted ones and the host time around them"
    return "; ".join(parts) + tail
