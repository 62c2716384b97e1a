"""TK-C203 device-idle."""

from __future__ import annotations

from diagnosers.base import pct
from diagnosers.rules.base import Rule
from tracekit.model import figures as F


class DeviceIdle(Rule):
    """What it detects
    Device idle time, at 25% of the step or more, that neither host-bound launches nor a
    pipeline bubble explains.

    Why it matters
    Idle devices are paid for and do nothing.

    Example
    the device is idle 31% of the step; 4% of it is host-bound.

    Fix
    Look at the timeline for waits on the data loader, checkpointing, evaluation or
    cross-rank synchronization inside the step.
    """

    code = "TK-C203"
    kind = "compute.idle"
    name = "device-idle"
    level = "compute"
    warn = 0.25  # of the step, idle less host-bound
    critical = 0.50
    raised_when = (
        "idle not explained by launches or a pipeline ≥ {warn:.0%} of the step "
        "(critical ≥ {critical:.0%})"
    )

    def check(self, ctx):
        if ctx.pipeline is not None:
            return  # a pipeline's idle time is its bubble (scaling.pipeline_bubble)
        flagged = []
        capturing = getattr(ctx.compute, "capture_step_fraction", None) or {}
        for r in ctx.compute.ranks:
            if capturing.get(r.rank, 0) >= 1:
                continue  # capture steps: launches recorded, not run (compute's note)
            unexplained = (r.idle_fraction or 0) - (r.host_bound_fraction or 0)
            if unexplained >= self.warn:
                flagged.append((r, unexplained))
        if not flagged:
            return
        frac = sum(u for _, u in flagged) / len(flagged)
        yield self.finding(
            "critical" if frac >= self.critical else "warning",
            f"the device is idle {pct(frac)} of the step for reasons other than kernel launches",
            ranks=[r.rank for r, _ in flagged],
            measured={F.IDLE_FRACTION.key: frac},
            predicted={F.IDLE_FRACTION.key: 0.0},
            impact_ms=frac * (ctx.step_ms or 0),
            remedy="look in the timeline for waits on the data loader, host synchronizations, "
            "checkpointing or evaluation inside the step",
        )

    def candidates(self, ctx, finding):
        # the waits it names (data loader, syncs) are host time the device waits for
        return ["no-host-gaps"]
