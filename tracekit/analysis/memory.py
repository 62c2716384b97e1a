"""Level 1, memory: does it fit? Peak allocated/reserved per rank from the allocator's
`[memory]` totals, against the device's capacity and the memory equation
(`tracekit.model.memory`: model states — 16Ψ mixed precision, 8Ψ for 16-bit parameters
without master weights — sharded by ZeRO/FSDP and divided by TP and PP, DDP's gradient
buckets, plus activations per Korthikanti et al. and the fp32 logits)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracekit import sql
from tracekit.model import figures as F
from tracekit.model.memory import (
    activation_bytes_per_layer,
    model_state_bytes,
    state_bytes_per_param,
)

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts


@dataclass
class MemoryRank:
    rank: int
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    capacity_bytes: float | None
    fraction: float | None  # max(allocated, reserved) ÷ capacity


@dataclass
class MemoryFacts:
    ranks: list[MemoryRank]
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    peak_bytes: int | None  # the larger of the two on any rank
    worst: MemoryRank | None  # the rank with the largest fraction of its capacity
    predicted: dict[str, Any] | None  # states, activations, total bytes, zero, sp
    predicted_why: str | None  # why there is no prediction
    measured_over_predicted: float | None
    notes: list[str] = field(default_factory=list)
    peak_why: str | None = None  # why no peak is measured
    null_reasons: dict[str, str] = field(default_factory=dict)  # summary figure → why null


def predicted_bytes(ctx: Facts) -> tuple[dict | None, str | None]:
    """Model states + activations per device from job.json, or why not."""
    m = ctx.manifest
    if m is None:
        return None, "no job.json: Ψ and the strategy are unknown"
    cfg = m.model
    if not cfg.params:
        return None, "job.json has no parameter count"
    mesh = m.mesh
    params = float(cfg.params)
    if m.strategy == "moe" and cfg.experts and cfg.top_k and cfg.active_params:
        experts = (params - cfg.active_params) * cfg.experts / (cfg.experts - cfg.top_k)
        params = params - experts + experts / max(mesh.ep, 1)
    # the hybrid job's data parallelism: FSDP (ZeRO-3) or DDP-style replicate
    replicate = (
        m.strategy == "hybrid" and (m.notes.get("config") or {}).get("hybrid_dp") == "replicate"
    )
    zero = 3 if m.strategy == "fsdp" or (m.strategy == "hybrid" and mesh.dp > 1) else 0
    if replicate:
        zero = 0
    per_param = state_bytes_per_param(m.dtype, m.master_weights)
    states = model_state_bytes(params, dp=mesh.dp, zero=zero, tp=mesh.tp, pp=mesh.pp,
                               per_param=per_param)  # fmt: skip
    if m.strategy == "ddp" or replicate:
        states += per_param[1] * params / (mesh.tp * mesh.pp)  # DDP's gradient buckets
    acts = None
    if cfg.seq and cfg.hidden and cfg.heads and cfg.layers and m.micro_batch:
        q = sql.query("levels.memory", "fused_attention")
        fused = bool(ctx.run.sql(q).fetchall()[0][0])
        per_layer = activation_bytes_per_layer(
            cfg.seq,
            m.micro_batch,
            cfg.hidden,
            cfg.heads,
            tp=mesh.tp,
            recompute="full" if m.activation_checkpointing else "none",
            bytes_per_value=4 if (m.dtype or "float32") == "float32" else 2,
            sequence_parallel=bool(m.sequence_parallel),
            fused_attention=fused,
        )
        in_flight = 1
        if mesh.pp > 1 and m.microbatches:
            in_flight = m.microbatches if m.schedule == "gpipe" else min(mesh.pp, m.microbatches)
        acts = per_layer * cfg.layers / mesh.pp * in_flight
        if cfg.vocab:  # the last stage's fp32 logits for the loss (a vocab-parallel head
            # would hold 1/tp of them: job.json does not say, so the whole)
            acts += 4 * cfg.seq * m.micro_batch * cfg.vocab
    total = states + (acts or 0)
    return {
        "states_bytes": states,
        "activations_bytes": acts,
        "total_bytes": total,
        "zero": zero,
        "sequence_parallel": bool(m.sequence_parallel) if mesh.tp > 1 else None,
    }, None


def facts(ctx: Facts) -> MemoryFacts:
    """The memory facts (`ctx.memory` caches them)."""
    rows = ctx.run.sql(
        sql.query("levels.memory", "peaks"), params={"device_type": 0 if ctx.cpu else 1}
    ).fetchall()
    pred, why = predicted_bytes(ctx)
    per_rank = []
    for rank, alloc, reserved, capacity in rows:
        if ctx.spec is not None and ctx.overrides.device_memory_GB:
            capacity = ctx.spec.memory_bytes
        capacity = capacity or (ctx.spec.memory_bytes if ctx.spec else None)
        peak = max(alloc or 0, reserved or 0)
        per_rank.append(
            MemoryRank(rank, alloc, reserved, capacity, peak / capacity if capacity else None)
        )
    notes = []
    peak_why = None
    if not per_rank:
        peak_why = "no [memory] events with allocator totals: profile with profile_memory=True"
        notes.append(peak_why)
    fr = [r for r in per_rank if r.fraction is not None]
    worst = max(fr, key=lambda r: r.fraction) if fr else None
    peak_alloc = max((r.peak_allocated_bytes or 0 for r in per_rank), default=None)
    if why:
        notes.append(f"predicted memory unknown: {why}")
    elif pred and pred.get("sequence_parallel") is not None:
        notes.append(
            "activations per Korthikanti et al. "
            + (
                "with sequence parallelism: s·b·h·(34 + 5as/h)/t"
                if pred["sequence_parallel"]
                else "without sequence parallelism (job.json sequence_parallel is not set): "
                "s·b·h·(10 + 24/t + 5as/(h·t)), layer norms and dropouts replicated per TP rank"
            )
        )
    if ctx.cpu:
        notes.append("CPU run: host memory has no device capacity to compare with")
    over = None
    if pred and peak_alloc and not ctx.cpu and pred["total_bytes"]:
        over = peak_alloc / pred["total_bytes"]
    return MemoryFacts(
        ranks=per_rank,
        peak_allocated_bytes=peak_alloc,
        peak_reserved_bytes=max((r.peak_reserved_bytes or 0 for r in per_rank), default=None),
        # CPU allocators reserve nothing: the peak is the larger of the two
        peak_bytes=max(
            (max(r.peak_allocated_bytes or 0, r.peak_reserved_bytes or 0) for r in per_rank),
            default=None,
        ),
        worst=worst,
        predicted=pred,
        predicted_why=why,
        measured_over_predicted=over,
        notes=notes,
        peak_why=peak_why,
        null_reasons=_null_reasons(ctx, peak_why, why),
    )


def _null_reasons(ctx: Facts, peak_why: str | None, predicted_why: str | None) -> dict:
    """Why the memory figures of the summary are null where they are."""
    peak = peak_why or (
        "CPU run: host memory has no device capacity to compare with"
        if ctx.cpu
        else "device memory capacity unknown: pass --device-memory-GB"
    )
    peaks = (F.PEAK_MEMORY_FRACTION, F.MAX_PEAK_MEMORY_FRACTION, F.PEAK_MEMORY_BYTES)
    out = {f.key: peak for f in peaks}
    out[F.PREDICTED_MEMORY_BYTES.key] = f"predicted memory unknown: {predicted_why}"
    return out
