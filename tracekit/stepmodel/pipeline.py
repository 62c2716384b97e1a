"""`microbatches=M`: the pipeline's schedule with M microbatches and the same global batch.

Each operation (a stage's forward or backward of one microbatch) is its measured work
split in two: the part that scales with the microbatch's size — compute, whose FLOPs
are proportional to the microbatch (compute kernels; on CPU runs the ops with counted
FLOPs) — runs M_old/M times as long; the per-operation part — host work, launches, the
hop to the next stage — stays as measured. The schedule is run by
`tracekit.model.pipeline.simulate` (each stage in its 1F1B or GPipe order, a forward
after the previous stage's, a backward after the next stage's, plus the hop), and the
change's effect on the step is the span at M minus the span at the measured M.
"""

from __future__ import annotations

from tracekit.model.pipeline import schedule_orders, simulate


def span_ms(shape, m: int) -> float:
    """The simulated pipeline span (ms) with `m` microbatches (shape: changes.PipelineShape)."""
    p = shape.stages
    orders = schedule_orders("gpipe" if shape.schedule == "gpipe" else "1f1b", p, m)
    ratio = shape.microbatches / m
    duration = {}
    for ops in orders.values():
        for kind, s, i in ops:
            k = (kind, s)
            fixed, scaled = shape.fixed_ms.get(k, 0.0), shape.scaled_ms.get(k, 0.0)
            duration[(kind, s, i)] = fixed + scaled * ratio
    # one stage per rank: the orders are keyed by stage
    return simulate(orders, duration, {s: s for s in range(p)}, latency=shape.hop_ms).makespan
