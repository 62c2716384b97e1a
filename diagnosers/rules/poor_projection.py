"""TK-S403 poor-scaling-projection."""

from __future__ import annotations

from diagnosers.base import pct
from diagnosers.rules.base import Rule
from tracekit.model import figures as F


class PoorProjection(Rule):
    """What it detects
    Weak-scaling efficiency projected below 60% at twice the world size, from the α-β
    model and the measured compute, when no communication finding already explains it.

    Why it matters
    A job that scales badly wastes the GPUs added to it.

    Example
    at 2× ranks the step would take 1.9× longer (efficiency 53%).

    Fix
    Overlap communication, shard differently (FSDP hybrid sharding, TP within a node),
    raise the per-rank batch.
    """

    code = "TK-S403"
    kind = "scaling.poor_projection"
    name = "poor-scaling-projection"
    level = "scaling"
    efficiency = 0.6  # projected at 2× ranks
    raised_when = (
        "(info) projected efficiency at 2× ranks < {efficiency:.0%} and no communication finding"
    )

    def check(self, ctx):
        proj = ctx.projection
        if not proj:
            return
        eff2 = proj["2x"]["efficiency"]
        comm_found = any(f.level == "communication" for f in ctx.raised)
        if eff2 is None or eff2 >= self.efficiency or comm_found:
            return
        step_ms, step2 = ctx.step_ms, proj["2x"][F.STEP_TIME_MS.key]
        # a projection, not a measurement: information, never a warning
        yield self.finding(
            "info",
            f"at {proj['2x']['world_size']} ranks the step would take "
            f"{step2:.1f} ms (efficiency {pct(eff2)})",
            ranks=[],
            measured={F.STEP_TIME_MS.key: step_ms},
            predicted=proj,
            impact_ms=step2 - step_ms,
            remedy="overlap communication with compute, shard within a node (TP/HSDP), or "
            "raise the per-rank batch so compute grows with communication",
        )
