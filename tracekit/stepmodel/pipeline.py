"""`microbatches=M`: the pipeline's schedule with M microbatches and the same global batch.

Each operation (a stage's forward or backward of one microbatch) is its measured work
split in two: the part that scales with the microbatch's size runs M_old/M times as long;
the per-operation part — host work, launches, the hop to the next stage — stays as
measured. What scales:

- GPU runs: compute kernels with counted FLOPs (their FLOPs are proportional to the
  microbatch);
- CPU runs (`operation_work`): each op's own time beyond one dispatch — the data it
  touches is the microbatch's, whether or not tracekit has a FLOP formula for it (an
  elementwise op on half the rows does half the work). An op's dispatch (the median of
  the view ops, which touch no data), the host time between ops, and work the size of
  the parameters (AccumulateGrad) stay. Measured on the `pp` job (2 stages, batch 8,
  8 runs a side): from M=4 to M=8 the time between ops and the dispatches stayed
  0.87–0.98 of themselves while the work fell to 0.58–0.68 (docs/step-model.md).

The schedule is run by `tracekit.model.pipeline.simulate` (each stage in its 1F1B or
GPipe order, a forward after the previous stage's, a backward after the next stage's,
plus the hop), and the change's effect on the step is the span at M minus the span at
the measured M.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracekit.model.opclass import PARAMETER_SIZED_OPS
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


def explain(shape, m: int, before: float, after: float) -> str:
    """One line on what `microbatches=m` did to the pipeline `shape` (changes.PipelineShape):
    each kind of operation's part that scales and the part that stays (means over the
    stages), and the simulated span (`span_ms`) at the measured M, `before`, and at m,
    `after`."""
    ratio = shape.microbatches / m
    parts = []
    for kind, word in (("F", "forward"), ("B", "backward")):
        keys = [k for k in shape.scaled_ms if k[0] == kind]
        if not keys:
            continue
        scaled = sum(shape.scaled_ms[k] for k in keys) / len(keys)
        fixed = sum(shape.fixed_ms.get(k, 0.0) for k in keys) / len(keys)
        parts.append(
            f"a {word}: {scaled:.2f} ms that scales with the microbatch → {scaled * ratio:.2f} ms,"
            f" {fixed:.2f} ms per operation stays"
        )
    return (
        f"pipeline at M={m} (measured M={shape.microbatches}, {shape.stages} stages, means "
        f"over the stages): {'; '.join(parts)}; the schedule's span {before:.2f} → "
        f"{after:.2f} ms a step ({after - before:+.2f} ms)"
    )


def operation_work(rows: Iterable[tuple], dispatch_ns: float) -> dict[tuple, float]:
    """(rank, label, label_ts_ns) → the work (ns) of each of a CPU run's stage operations
    (module docstring). `rows` are `levels.pipeline:operation_host_ops`: (rank, label,
    label_ts_ns, op, ts_ns, dur_ns), per label in start order with the outer op first. An
    op's self time (its duration less its children's) beyond `dispatch_ns` is work,
    except under a parameter-sized op."""
    out: dict[tuple, float] = {}
    key = None
    stack: list[list] = []  # [end, dur, children's dur, parameter-sized]

    def pop() -> float:
        _end, dur, kids, fixed = stack.pop()
        return 0.0 if fixed else max(dur - kids - dispatch_ns, 0.0)

    for rank, label, lts, name, ts, dur in rows:
        k = (rank, label, lts)
        if k != key:  # the previous label's open ops end with it
            while stack:
                out[key] += pop()
            key = k
            out[k] = 0.0
        while stack and ts >= stack[-1][0]:
            out[k] += pop()
        fixed = bool(stack and stack[-1][3]) or any(p in name for p in PARAMETER_SIZED_OPS)
        if stack:
            stack[-1][2] += dur
        stack.append([ts + dur, dur, 0, fixed])
    while stack:
        out[key] += pop()
    return out
