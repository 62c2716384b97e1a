"""`microbatches=M` and `interleave=V`: the pipeline's schedule with M microbatches and
the same global batch, or with each stage's work split into V virtual chunks.

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
the measured M. `interleave=V` runs Megatron-LM's interleaved 1F1B (`interleaved_orders`)
with each operation split into V chunks and a hop between consecutive chunks, against
the measured schedule at V = 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from tracekit.errors import TracekitError
from tracekit.model.opclass import PARAMETER_SIZED_OPS
from tracekit.model.pipeline import schedule_orders, simulate
from tracekit.stepmodel.edits import Change, NotApplicable


def span_ms(shape, m: int, v: int = 1) -> float:
    """The simulated pipeline span (ms) with `m` microbatches (shape: PipelineShape),
    and with `v` > 1 the interleaved schedule of `interleaved_orders`: each stage's
    operation split into v chunks of 1/v of its work (scaled and per-operation parts
    alike: the chunk holds 1/v of the stage's layers, their launches and host work), one
    hop between every two consecutive chunks (v× the hops)."""
    p = shape.stages
    if v > 1:
        ratio = shape.microbatches / m
        duration = {}
        for ops in (orders := interleaved_orders(p, m, v)).values():
            for kind, vs, i in ops:
                k = (kind, vs % p)
                work = shape.fixed_ms.get(k, 0.0) + shape.scaled_ms.get(k, 0.0) * ratio
                duration[(kind, vs, i)] = work / v
        stage_rank = {vs: vs % p for vs in range(p * v)}
        return simulate(orders, duration, stage_rank, latency=shape.hop_ms).makespan
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


def interleaved_orders(p: int, m: int, v: int) -> dict[int, list[tuple[str, int, int]]]:
    """Each rank's operations in Megatron-LM's interleaved 1F1B schedule (Narayanan et
    al. 2021, §2.2; `forward_backward_pipelining_with_interleaving`): rank r holds the
    virtual stages c·p + r for its chunks c < v; its k-th forward runs chunk
    (k mod p·v) // p (backwards in the reverse chunk order) of microbatch
    (k // (p·v))·p + k mod p; (p − r − 1)·2 + (v − 1)·p warm-up forwards (all of them
    when m = p), then one forward and one backward in turn, then the backwards left.
    The bubble is (p − 1)/(v·m + p − 1) of the span with equal stages and no hops.
    Needs m a multiple of p (as Megatron does): ValueError otherwise."""
    if p < 1 or v < 1 or m < 1 or m % p:
        raise ValueError(f"an interleaved schedule needs M ({m}) a multiple of P ({p})")
    total = m * v

    def op(kind: str, k: int, r: int) -> tuple[str, int, int]:
        chunk = (k % (p * v)) // p
        if kind == "B":
            chunk = v - 1 - chunk
        return (kind, chunk * p + r, (k // (p * v)) * p + k % p)

    out = {}
    for r in range(p):
        warm = total if m == p else min((p - r - 1) * 2 + (v - 1) * p, total)
        seq = [op("F", k, r) for k in range(warm)]
        for i in range(total - warm):
            seq += [op("F", warm + i, r), op("B", i, r)]
        seq += [op("B", k, r) for k in range(total - warm, total)]
        out[r] = seq
    return out


def explain(shape, m: int, before: float, after: float) -> str:
    """One line on what `microbatches=m` did to the pipeline `shape` (PipelineShape):
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


@dataclass
class PipelineShape:
    """What `microbatches=M` needs of a pipeline (the diagnosers measure it): the
    schedule's operations and their measured parts, for `tracekit.stepmodel.pipeline`."""

    stages: int
    microbatches: int
    schedule: str  # 1f1b or gpipe
    stage_rank: dict[int, int]
    scaled_ms: dict[tuple[str, int], float]  # (F|B, stage) → work that scales with FLOPs
    fixed_ms: dict[tuple[str, int], float]  # (F|B, stage) → per-operation host/launch work
    hop_ms: float  # between stages on different ranks, as measured
    notes: list[str] = field(default_factory=list)


class _PipelineChange(Change):
    """A change of the pipeline's schedule, simulated outside the graph
    (`tracekit.stepmodel.pipeline`); its count (M, V) is the spec's number, ≥ 1."""

    pipeline: PipelineShape | None = None  # set by the caller that measured the pipeline
    letter: ClassVar[str]
    absent: ClassVar[str]  # why there is nothing to change, after "no pipeline to …"

    def __init__(self, spec, m):
        super().__init__(spec, m)
        self.count = int(m.group(1))
        if self.count < 1:
            raise TracekitError(f"--change {spec}: {self.letter} must be ≥ 1")

    def shape(self) -> PipelineShape:
        if self.pipeline is None:
            raise NotApplicable(f"--change {self.spec}: no pipeline to {self.absent}")
        return self.pipeline


class Microbatches(_PipelineChange):
    pattern = re.compile(r"microbatches=(\d+)")
    syntax = "microbatches=M"
    letter = "M"
    absent = (
        "change: the run has no 1F1B or GPipe pipeline of one chunk per stage with a known "
        "microbatch count (an interleaved one is not modeled)"
    )

    @property
    def m(self) -> int:
        return self.count

    def apply(self, g, e):
        p = self.shape()
        before, after = span_ms(p, p.microbatches), span_ms(p, self.m)
        e.extra_ms += after - before
        e.notes.append(explain(p, self.m, before, after))


class Interleave(_PipelineChange):
    """The pipeline's schedule interleaved: each stage's work per microbatch split into V
    virtual chunks (Megatron-LM's interleaved 1F1B, Narayanan et al. 2021: the bubble
    (P−1)/(V·M+P−1), about V× smaller), a hop between consecutive chunks (V× the
    point-to-point hops), at the measured M (`tracekit.stepmodel.pipeline.span_ms`)."""

    pattern = re.compile(r"interleave=(\d+)")
    syntax = "interleave=V"
    letter = "V"
    absent = (
        "interleave: the run has no 1F1B pipeline of one chunk per stage with a known "
        "microbatch count (an interleaved one is interleaved already)"
    )

    @property
    def v(self) -> int:
        return self.count

    def apply(self, g, e):
        p = self.shape()
        if p.schedule != "1f1b":
            raise NotApplicable(f"--change {self.spec}: interleaving is a 1F1B schedule's")
        if p.microbatches % p.stages:
            raise NotApplicable(
                f"--change {self.spec}: an interleaved schedule needs M ({p.microbatches}) "
                f"a multiple of P ({p.stages})"
            )
        before = span_ms(p, p.microbatches)
        after = span_ms(p, p.microbatches, self.v)
        e.extra_ms += after - before
        e.notes.append(
            f"pipeline interleaved V={self.v} ({p.stages} stages, M={p.microbatches}; each "
            f"operation split into {self.v} chunks, {p.hop_ms:.2f} ms a hop, {self.v}× the "
            f"hops): the schedule's span {before:.2f} → {after:.2f} ms a step "
            f"({after - before:+.2f} ms)"
        )
