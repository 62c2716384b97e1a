"""The four levels of the report — memory → compute → communication → scaling — each
figure measured beside predicted, from the context's facts. No figure is computed here:
a level only lays out facts (`tracekit/analysis/`) in the report's typed blocks
(`tracekit.report.schema`) and gathers their notes."""

from __future__ import annotations

from collections.abc import Callable

from msgspec import to_builtins
from msgspec.structs import asdict

from diagnosers.base import mean
from diagnosers.context import Context
from tracekit.analysis.compute import op_json
from tracekit.analysis.scaling import NOT_A_PIPELINE
from tracekit.model import figures as F
from tracekit.report import schema as S
from tracekit.report import units


def memory(ctx: Context) -> S.MemoryLevel:
    m = ctx.memory
    pred = m.predicted
    level = S.MemoryLevel(
        measured=S.MemoryMeasured(
            peak_allocated_bytes=m.peak_allocated_bytes,
            peak_reserved_bytes=m.peak_reserved_bytes,
            peak_memory_bytes=m.peak_bytes,
            capacity_bytes=m.worst.capacity_bytes if m.worst else None,
            max_peak_memory_fraction=m.worst.fraction if m.worst else None,
        ),
        predicted=(
            S.MemoryPredicted(
                states_bytes=pred["states_bytes"],
                activations_bytes=pred["activations_bytes"],
                predicted_memory_bytes=pred["total_bytes"],
                zero=pred["zero"],
                sequence_parallel=pred["sequence_parallel"],
            )
            if pred
            else S.MemoryPredicted()
        ),
        metrics={
            "ranks": [
                {
                    "rank": r.rank,
                    "peak_allocated_bytes": r.peak_allocated_bytes,
                    "peak_reserved_bytes": r.peak_reserved_bytes,
                    "capacity_bytes": r.capacity_bytes,
                    "fraction": r.fraction,
                }
                for r in m.ranks
            ]
        },
        notes=list(m.notes),
    )
    if pred and m.peak_allocated_bytes and not ctx.cpu:
        level.metrics["measured_over_predicted"] = m.measured_over_predicted
    return level


def compute(ctx: Context) -> S.ComputeLevel:
    c = ctx.compute
    metrics = {  # JSON values, as a report read back has them
        "ranks": [to_builtins(r) for r in c.ranks],
        "top_ops": [op_json(o) for o in c.top_ops],
        F.PEAK_FLOPS_BY_DTYPE.key: c.peak_flops_by_dtype,
    }
    if c.counted_over_predicted is not None:
        metrics["counted_over_predicted_flops"] = c.counted_over_predicted
    return S.ComputeLevel(
        measured=S.ComputeMeasured(
            mfu=c.mfu,
            hfu=c.hfu,
            gemm_efficiency=c.gemm_efficiency,
            peak_flops_source=c.peak_source,
            flops_per_step=c.flops_per_step,
            model_flops_per_step=c.model_flops_per_step,
            flops_by_dtype=c.flops_by_dtype,
            uncounted_ops_per_step=c.uncounted_ops_per_step,
            idle_fraction=c.idle_fraction,
            host_bound_fraction=c.host_bound_fraction,
            uncounted_compute_fraction=c.uncounted_compute_fraction,
        ),
        predicted=S.ComputePredicted(predicted_flops_per_step=c.predicted_flops_per_step),
        metrics=metrics,
        notes=list(c.notes),
    )


def communication(ctx: Context) -> S.CommunicationLevel:
    comm = ctx.communication
    table = ctx.collectives.table
    ranks = ctx.ranks
    return S.CommunicationLevel(
        measured=S.CommunicationMeasured(
            exposed_comm_fraction=mean(r.exposed_comm_fraction for r in ranks),
            exposed_transfer_fraction=mean(r.exposed_transfer_fraction for r in ranks),
            comm_wait_fraction=mean(r.comm_wait_fraction for r in ranks),
            exposed_slow_fraction=mean(r.exposed_slow_fraction for r in comm.ranks),
            comm_fraction=mean(r.comm_fraction for r in ranks),
            comm_overlap_fraction=mean(r.comm_overlap_fraction for r in ranks),
            busbw_by_collective={_key(r.name): r.busbw_GBps for r in table[:5]},
            straggler_wait_fraction=comm.straggler_wait_fraction,
            exposed_pipeline_fraction=comm.exposed_pipeline_fraction,
            unexplained_exposed_fraction=comm.unexplained_exposed_fraction,
        ),
        predicted=S.CommunicationPredicted(
            predicted_busbw_by_collective={
                _key(r.name): r.predicted_busbw_GBps for r in table[:5]
            },
            predicted_exposed_comm_fraction=0.0,
        ),
        metrics={
            "collectives": [asdict(r) for r in table],
            "ranks": [vars(r).copy() for r in comm.ranks],
            "attribution": comm.attribution(),
            # exposed_comm_fraction per step in ms, mean over ranks: what the collectives'
            # exposed_ms add to, less the time outside their spans (host waits for them)
            "exposed_ms_per_step": mean(r.exposed_ms for r in comm.ranks),
        },
        notes=list(comm.notes),
    )


def scaling(ctx: Context) -> S.ScalingLevel:
    b = ctx.bubble
    level = S.ScalingLevel(
        measured=S.ScalingMeasured(
            bubble_fraction=b.measured if b else None,
            # measured at collectives matched across the analysed ranks: with one rank,
            # or none matched with a wait, unknown (`why`), not "none"
            straggler_ranks=(
                None if ctx.stragglers.why else [f.rank for f in ctx.stragglers.found]
            ),
        ),
        predicted=S.ScalingPredicted(
            predicted_bubble_fraction=b.predicted if b else None,
            modeled_bubble_fraction=b.model["modeled"] if b and b.model else None,
        ),
        notes=list(b.notes) if b else [NOT_A_PIPELINE],
    )
    if b:
        level.metrics["pipeline"] = b.metrics()
    rows = ctx.run.sql(_LAST_ARRIVALS).fetchall()
    level.metrics["last_arrivals"] = [
        {"rank": r, "instances": n, "skew_ms": s / 1e6} for r, n, s in rows
    ]
    imposed = ctx.stragglers.imposed_ms
    level.metrics["imposed_wait_ms"] = {str(k): v for k, v in sorted(imposed.items())}
    if ctx.projection is not None:
        level.predicted.projection = ctx.projection
    return level


def _last_arrivals() -> str:
    from tracekit import sql

    return sql.query("levels.stragglers", "last_arrivals")


_LAST_ARRIVALS = _last_arrivals()

BUILDERS: dict[str, Callable[[Context], S.Level]] = {
    "memory": memory,
    "compute": compute,
    "communication": communication,
    "scaling": scaling,
}


def _key(name: str | None) -> str:
    """A collective's name as a JSON key: an unknown kind (RCCL's generic kernel without
    metadata) is "null", as the report has always written it."""
    return "null" if name is None else name


# ---------------------------------------------------------------- verdicts on what is known

# What each level's verdict stands on (issue 29): alternatives, each a set of headline
# figures that together answer the level's question. A level is "ok" only when one
# alternative is known in full; otherwise its verdict is "unknown", with the reason each
# alternative lacks (a warning or critical finding stands either way: it is measured).
# Keys are the summary's figures, whose reason is `summary.null_reasons`, or the facts
# named in `_FACTS` below, each with the reason its fact gives.
HEADLINE: dict[str, tuple[tuple[str, ...], ...]] = {
    # does it fit: the worst rank's peak against its device's capacity, or the peak
    # against the memory equation (device memory only: the model predicts no host memory)
    "memory": ((F.MAX_PEAK_MEMORY_FRACTION.key,), ("measured_over_predicted",)),
    # is the device busy with useful work: MFU (or HFU) over most of the compute time
    "compute": ((F.MFU.key, "counted_compute"), (F.HFU.key, "counted_compute")),
    # is the network hidden: the exposed share of the step
    "communication": ((F.EXPOSED_COMM_FRACTION.key,),),
    # does it scale: the pipeline's bubble, or the ranks' arrivals at matched collectives
    "scaling": ((F.BUBBLE_FRACTION.key,), ("stragglers",)),
}


def unknown_verdicts(
    ctx: Context, levels: list[S.Level], summary: S.Summary, failed: dict[str, str]
) -> None:
    """Turn each level that no finding judged ("ok") into "unknown" when none of its
    `HEADLINE` alternatives is known, with the reasons in `verdict_reason`."""
    for level in levels:
        if level.verdict != "ok":
            continue
        if level.level in failed:  # its figures are null: the note that says why
            reasons = [failed[level.level]]
        else:
            reasons = headline_unknown(ctx, level.level, summary)
        if reasons:
            level.verdict = "unknown"
            level.verdict_reason = "; ".join(reasons)


def headline_unknown(ctx: Context, name: str, summary: S.Summary) -> list[str]:
    """Why none of level `name`'s headline alternatives is known: each alternative's
    first unknown figure's reason, distinct, in order ([] when one is known)."""
    reasons: list[str] = []
    for alternative in HEADLINE[name]:
        why = next((w for w in (_why_unknown(ctx, k, summary) for k in alternative) if w), None)
        if why is None:
            return []
        if why not in reasons:
            reasons.append(why)
    return reasons


def _why_unknown(ctx: Context, key: str, summary: S.Summary) -> str | None:
    """None when headline figure `key` is known, else why not."""
    fact = _FACTS.get(key)
    if fact is not None:
        return fact(ctx, summary)
    if getattr(summary, key) is not None:
        return None
    return summary.null_reasons.get(key) or "not measurable"


def _measured_over_predicted(ctx: Context, summary: S.Summary) -> str | None:
    if ctx.memory.measured_over_predicted is not None:
        return None
    if summary.peak_memory_bytes is None:
        return summary.null_reasons.get(F.PEAK_MEMORY_BYTES.key) or "no peak memory measured"
    if ctx.cpu:
        return "the memory equation predicts device memory only"
    why = summary.null_reasons.get(F.PREDICTED_MEMORY_BYTES.key)
    return why or "predicted memory unknown"


def _counted_compute(ctx: Context, summary: S.Summary) -> str | None:
    """MFU judges the compute only where most of it is counted (the low-MFU rule's own
    limit: below it, a low MFU is an info note)."""
    from diagnosers.rules.low_mfu import LowMfu

    unc = summary.uncounted_compute_fraction
    if unc is None:
        return summary.null_reasons.get(F.UNCOUNTED_COMPUTE_FRACTION.key) or "not measurable"
    if unc < LowMfu.mostly_uncounted:
        return None
    return (
        f"MFU is of the counted work only: {units.percent(unc, 0)} of compute time is "
        "GEMM/attention work whose FLOPs tracekit cannot count"
    )


def _stragglers(ctx: Context, summary: S.Summary) -> str | None:
    """Stragglers are measured at collectives matched across the analysed ranks."""
    return ctx.stragglers.why


_FACTS = {
    "measured_over_predicted": _measured_over_predicted,
    "counted_compute": _counted_compute,
    "stragglers": _stragglers,
}
