"""Level 4, scaling: does it improve with more devices?

- Pipeline bubble per stage, measured as the share of the step the stage does not
  compute (1 − compute fraction), beside (P−1)/(M+P−1) or (P−1)/(V·M+P−1), and beside
  the modeled bubble: the schedule run with the measured stage times, hops and host
  time, plus the time outside the pipeline (`tracekit.model.pipeline.simulate`).
- Projection: step time and weak-scaling efficiency at 2× and 8× the job's world size —
  compute per rank stays, each data-parallel collective's time follows the α-β model
  to the new group size (in a node, then between nodes past `gpus_per_node`), and the
  communication that compute hides today stays hidden up to the same amount.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracekit.analysis.base import mean
from tracekit.analysis.communication import predict_seconds
from tracekit.analysis.pipeline import Pipeline, measure
from tracekit.model import figures as F
from tracekit.model.pipeline import bubble_fraction, simulate

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts
    from tracekit.report.schema import CollectiveRow

NOT_A_PIPELINE = (
    "not a pipeline-parallel run (no job.json pp, PP labels, mesh_pp or send/recv pipeline pattern)"
)


def pct1(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


@dataclass
class BubbleFacts:
    pipe: Pipeline
    measured: float | None  # mean over stages of 1 − compute fraction
    predicted: float | None  # the schedule's formula
    model: dict[str, Any] | None  # the schedule run with the measured stage times
    per_stage: list[dict[str, Any]]  # rank → its bubble fraction
    notes: list[str] = field(default_factory=list)
    modeled_why: str | None = None  # why the schedule could not be modeled

    def metrics(self) -> dict[str, Any]:
        p = self.pipe
        return {
            "stages": p.stages,
            "microbatches": p.microbatches,
            "virtual_stages": p.virtual,
            "schedule": p.schedule,
            "source": p.source,
            "per_rank": self.per_stage,
            "model": self.model,
        }


def bubble(ctx: Facts) -> BubbleFacts | None:
    """The pipeline bubble (`ctx.bubble` caches it); None when the run has no pipeline."""
    pipe = ctx.pipeline
    if pipe is None:
        return None
    per_stage = [
        {"rank": r.rank, F.BUBBLE_FRACTION.key: 1 - r.compute_fraction}
        for r in ctx.ranks
        if r.compute_fraction is not None
    ]
    measured = (
        sum(s[F.BUBBLE_FRACTION.key] for s in per_stage) / len(per_stage) if per_stage else None
    )
    pred = (
        bubble_fraction(pipe.stages, pipe.microbatches, pipe.virtual) if pipe.microbatches else None
    )
    model = _model(ctx, pipe, pred)
    notes = []
    why = None
    if model is None:
        why = (
            "modeled pipeline bubble unknown: no per-microbatch stage labels (PP:… or "
            "Forward i / Backward i) to time each stage's forward and backward"
        )
        notes.append(why)
    elif measured is not None and pred is not None:
        parts = model["parts"]
        notes.append(
            f"pipeline bubble: measured {pct1(measured)}, formula {pct1(pred)}, modeled "
            f"{pct1(model['modeled'])} (the {pipe.schedule} schedule run with the measured "
            "stage times, plus the time outside it). Of the "
            f"{100 * (measured - pred):+.1f} points between measured and formula: stage "
            f"imbalance {100 * parts['imbalance']:+.1f}, host time between microbatch "
            f"operations {100 * parts['host_between_ops']:+.1f}, transfers between stages "
            f"{100 * parts['transfer']:+.1f}, time outside the pipeline (optimizer, loss, "
            f"data: {model['outside_ms']:.1f} ms per step) {100 * parts['outside']:+.1f}, "
            "time inside microbatch operations that is not compute (host work; waiting, where "
            f"the labels wrap the receive) {100 * parts['in_microbatch_non_compute']:+.1f}, "
            f"unexplained {100 * (measured - model['modeled']):+.1f}"
        )
    return BubbleFacts(pipe, measured, pred, model, per_stage, notes, modeled_why=why)


def bubble_null_reasons(b: BubbleFacts | None) -> dict[str, str]:
    """Why the bubble figures of the summary are null where they are."""
    keys = (F.BUBBLE_FRACTION.key, F.PREDICTED_BUBBLE_FRACTION.key, F.MODELED_BUBBLE_FRACTION.key)
    if b is None:
        return dict.fromkeys(keys, NOT_A_PIPELINE)
    no_compute = "no rank has a compute fraction in the analysed window"
    return {
        F.BUBBLE_FRACTION.key: no_compute,
        F.PREDICTED_BUBBLE_FRACTION.key: "the pipeline's microbatch count M is unknown",
        F.MODELED_BUBBLE_FRACTION.key: b.modeled_why or no_compute,
    }


def _model(ctx: Facts, pipe: Pipeline, pred: float | None) -> dict | None:
    """The schedule fed with the measured stage times, and the bubble's parts."""
    meas = measure(ctx, pipe)
    if meas is None or not meas.duration:
        return None
    with_host = {op: d + meas.overhead_ms.get(op, 0.0) for op, d in meas.duration.items()}
    try:
        bare = simulate(meas.orders, meas.duration, meas.stage_rank, 0.0)
        no_hop = simulate(meas.orders, with_host, meas.stage_rank, 0.0)
        sim = simulate(
            meas.orders, with_host, meas.stage_rank, meas.hop_ms, default_latency=meas.latency_ms
        )
    except ValueError:
        return None
    ranks = [r for r in ctx.ranks if r.compute_fraction is not None]
    if not ranks or not sim.makespan:
        return None
    step = {r.rank: r.step_time_ms or r.window_ms for r in ranks}
    compute = {r.rank: r.compute_fraction * step[r.rank] for r in ranks}
    mean_step = sum(step.values()) / len(step)
    outside = max(mean_step - meas.span_ms, 0.0)
    occ = [meas.occupied_ms.get(r, 0.0) for r in compute]
    comp_in = [meas.compute_in_ops_ms.get(r, 0.0) for r in compute]
    mocc = sum(occ) / len(occ)
    b_imb = 1 - mocc / bare.makespan
    b_host = 1 - mocc / no_hop.makespan
    b_pipe = 1 - mocc / sim.makespan
    total = sim.makespan + outside
    # busy time: the operations, plus compute outside them
    out_comp = [compute[r] - c for r, c in zip(compute, comp_in, strict=True)]
    b_out = 1 - sum(o + x for o, x in zip(occ, out_comp, strict=True)) / len(occ) / total
    modeled = 1 - sum(compute.values()) / len(compute) / total
    base = pred if pred is not None else b_imb
    per_stage: dict[int, float] = {}
    for (_k, s, _i), d in meas.duration.items():
        per_stage[s] = per_stage.get(s, 0.0) + d
    return {
        "modeled": min(max(modeled, 0.0), 1.0),
        "span_ms": meas.span_ms,
        "simulated_span_ms": sim.makespan,
        "outside_ms": outside,
        "hop_latency_ms": meas.latency_ms,
        "stage_ms": {str(k): v for k, v in sorted(per_stage.items())},
        "slowest_stage": max(per_stage, key=per_stage.get) if per_stage else None,
        "parts": {
            "schedule": base,
            "imbalance": b_imb - base,
            "host_between_ops": b_host - b_imb,
            "transfer": b_pipe - b_host,
            "outside": b_out - b_pipe,
            "in_microbatch_non_compute": modeled - b_out,
        },
    }


def _per_step_ms(ctx: Facts, key: str) -> float:
    """Mean over ranks of a per-rank fraction, in ms of that rank's step."""
    return (
        mean(r.per_step_ms(getattr(r, key)) for r in ctx.ranks if getattr(r, key) is not None)
        or 0.0
    )


SCALING = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def job_world_size(ctx: Facts) -> int:
    """The job's world size, not the number of traced ranks: the traces' own
    (distributedInfo world_size), else the largest group a collective names, else the
    traced ranks."""
    (world,) = ctx.run.sql("SELECT max(world_size) FROM rank_info").fetchall()[0]
    groups = [c.group_size for c in ctx.collectives.table if c.group_size]
    return int(world or max(groups, default=0) or len(ctx.ranks))


def projection(ctx: Facts) -> dict | None:
    """Step time and efficiency at 2× and 8× the job's world size (`ctx.projection`
    caches it). The communication that runs today — the union of the rank's collectives
    (concurrent ones counted once), not their sum — scales by the time-weighted ratio of
    its collectives' α-β times at the new size to those at today's; compute per rank stays
    and the communication compute hides today stays hidden up to the same amount. Where a
    collective that grows with the world has no α-β time (no device model or calibration,
    or no size), the projection is null with its reason: an unscaled 1.0 would be a guess."""
    coll = ctx.collectives.table
    world = job_world_size(ctx)
    step_ms = ctx.step_ms
    if not step_ms or world < 1:
        return None
    comm_ms = _per_step_ms(ctx, F.COMM_FRACTION.key)
    exposed_ms = _per_step_ms(ctx, F.EXPOSED_COMM_FRACTION.key)
    hidden_ms = max(comm_ms - exposed_ms, 0.0)
    listed_ms = sum(c.time_ms_per_step for c in coll)
    reason = _unprojectable(ctx, coll, world)
    proj = {}
    for mult in (2, 8):
        if reason:
            proj[f"{mult}x"] = {
                "world_size": world * mult,
                F.STEP_TIME_MS.key: None,
                "efficiency": None,
                "reason": reason,
            }
            continue
        scaled = 0.0
        for c in coll:
            g = c.group_size or world
            now = predict_seconds(ctx, c.name, g, c.bytes or 0)
            later = (
                predict_seconds(ctx, c.name, g * mult, c.bytes or 0)
                if g >= world and c.name in SCALING
                else now
            )
            ratio = later / now if now and later else 1.0
            scaled += c.time_ms_per_step * ratio
        # the union scales as its parts do (the listed collectives' time-weighted ratio)
        new_comm = comm_ms * (scaled / listed_ms) if listed_ms else comm_ms
        new_step = step_ms - exposed_ms + max(new_comm - hidden_ms, 0.0)
        proj[f"{mult}x"] = {
            "world_size": world * mult,
            F.STEP_TIME_MS.key: new_step,
            "efficiency": step_ms / new_step if new_step else None,
        }
    return proj


def _unprojectable(ctx: Facts, coll: list[CollectiveRow], world: int) -> str | None:
    """Why the collectives that grow with the world cannot be projected, if they cannot."""
    grows = [
        c
        for c in coll
        if c.name in SCALING and (c.group_size or world) >= world and c.time_ms_per_step
    ]
    if not grows:
        return None
    if not any(c.bytes for c in grows):
        return "no collective sizes in the trace (no record_param_comms or input shapes)"
    sized = [c for c in grows if c.bytes]
    if any(
        predict_seconds(ctx, c.name, c.group_size or world, c.bytes) is None for c in sized
    ):
        return (
            "no collective model for this run (CPU: no calibration in job.json)"
            if ctx.cpu
            else "no device model for this device: its link bandwidths are unknown"
        )
    if len(sized) < len(grows):
        names = sorted({c.name for c in grows if not c.bytes})
        return "no size for some collectives that grow with the world: " + ", ".join(names)
    return None


__all__ = [
    "NOT_A_PIPELINE",
    "BubbleFacts",
    "bubble",
    "bubble_null_reasons",
    "job_world_size",
    "pct1",
    "projection",
]
