"""TK-S401 pipeline-bubble."""

from __future__ import annotations

from diagnosers.base import pct
from diagnosers.findings import severity
from diagnosers.rules.base import Rule
from tracekit.model import figures as F
from tracekit.model.pipeline import bubble_fraction, microbatches_for


class PipelineBubble(Rule):
    """What it detects
    Pipeline stages idle (no compute) for 20% of the step or more; measured per stage
    beside the schedule's formula (P−1)/(M+P−1), or (P−1)/(V·M+P−1) interleaved, and
    beside the modeled bubble (the schedule run with the measured stage times, plus the
    time outside the pipeline), with the gap split into stage imbalance, host time,
    transfers and time outside the pipeline.

    Why it matters
    The bubble is time every pipeline rank pays; it shrinks with more microbatches per
    step or virtual stages.

    Example
    bubble 43% on 4 stages with 4 microbatches (formula 43%).

    Fix
    Use M ≥ 4·P microbatches, an interleaved schedule (V > 1), or zero-bubble schedules;
    balance layers across stages when the measured bubble exceeds the formula.
    """

    code = "TK-S401"
    kind = "scaling.pipeline_bubble"
    name = "pipeline-bubble"
    level = "scaling"
    warn = 0.20  # of the step
    critical = 0.40
    microbatches_per_stage = 4  # the M ≥ 4·P remedy
    imbalance = 0.05  # points of bubble worth the balance remedy
    host = 0.10  # points of host time worth the CUDA-graphs remedy
    outside = 0.05  # points outside the pipeline worth naming
    raised_when = (
        "stages idle ≥ {warn:.0%} of the step (critical ≥ {critical:.0%}); remedies fit the "
        'run (no "interleave" to an interleaved one; balance stages or shorten the time '
        "outside the pipeline when the model says so)"
    )

    def check(self, ctx):
        b = ctx.bubble
        if b is None:
            return
        measured, pred, model, pipe = b.measured, b.predicted, b.model, b.pipe
        sev = severity(measured or 0, self.warn, self.critical)
        if sev is None:
            return
        p, m, v = pipe.stages, pipe.microbatches, pipe.virtual
        step_ms = ctx.step_ms or 0
        interleaved = pipe.schedule == "interleaved" or v > 1
        sched_part = pred or 0.0
        remedies = []
        target_m = self.microbatches_per_stage * p
        if m and m < target_m:
            after = bubble_fraction(p, target_m, v)
            remedies.append(
                f"use M ≥ 4·P microbatches: with M = {target_m}, the schedule's bubble would "
                f"drop from {pct(pred)} to {pct(after)}"
            )
            if not interleaved:
                remedies.append(
                    f"or interleave (V = 2: {pct(bubble_fraction(p, m, 2))} at M = {m})"
                )
            win = (sched_part - after) * step_ms
        else:
            win = 0.0
        if model:
            parts = model["parts"]
            if parts["imbalance"] >= self.imbalance:
                slow = model["slowest_stage"]
                remedies.append(
                    f"balance the stages: stage {slow} takes the longest per microbatch, and "
                    f"imbalance costs {100 * parts['imbalance']:.0f} points of bubble"
                )
                win += parts["imbalance"] * step_ms
            host = parts["host_between_ops"] + parts["in_microbatch_non_compute"]
            if host >= self.host:
                remedies.append(
                    f"the stages spend {100 * host:.0f} points of the step on host work and "
                    "waits between and inside microbatch operations: CUDA graphs or "
                    "torch.compile per stage, and "
                    "send/recv posted ahead (batch_isend_irecv)"
                )
            if parts["outside"] >= self.outside:
                remedies.append(
                    f"shorten the {model['outside_ms']:.1f} ms per step outside the pipeline "
                    f"(optimizer, loss, data): {100 * parts['outside']:.0f} points of bubble"
                )
                win += parts["outside"] * step_ms
        if not remedies:
            remedies.append(
                "the schedule already runs at M ≥ 4·P: a zero-bubble schedule (ZB-H1) or "
                f"fewer stages (M = {microbatches_for(p, 0.1, v)} would bring the formula "
                "under 10%)"
            )
        yield self.finding(
            sev,
            f"pipeline stages idle {pct(measured)} of the step (P = {p}, M = {m}, V = {v}, "
            f"{pipe.schedule or 'schedule unknown'}; formula {pct(pred)}"
            + (f", modeled {pct(model['modeled'])}" if model else "")
            + ")",
            ranks=[s["rank"] for s in b.per_stage if s[F.BUBBLE_FRACTION.key] >= self.warn],
            measured={F.BUBBLE_FRACTION.key: measured},
            predicted={
                F.BUBBLE_FRACTION.key: pred,
                F.MODELED_BUBBLE_FRACTION.key: model["modeled"] if model else None,
            },
            impact_ms=max(min(win, (measured or 0) * step_ms), 0.0),
            remedy="; ".join(remedies),
            details={"model": model},
        )

    def candidates(self, ctx, finding):
        """M = 4·P microbatches where M is fewer, and an interleaved schedule (V = 2)
        where the pipeline runs one chunk per stage."""
        pipe = ctx.pipeline
        if pipe is None or not pipe.microbatches:
            return []
        out = []
        target = self.microbatches_per_stage * pipe.stages
        if target > pipe.microbatches:
            out.append(f"microbatches={target}")
        if pipe.virtual == 1 and pipe.schedule != "interleaved":
            out.append("interleave=2")
        return out
