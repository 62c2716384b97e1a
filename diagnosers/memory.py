"""Level 1, memory: does it fit? Peak allocated/reserved per rank from the allocator's
`[memory]` totals, against the device's capacity and the memory equation."""

from __future__ import annotations

from diagnosers.base import LevelResult, gb, pct, severity
from diagnosers.context import Context
from diagnosers.findings import Finding
from tracekit.model.memory import activation_bytes_per_layer, model_state_bytes

NEAR, FULL = 0.90, 0.97


def predicted_bytes(ctx: Context) -> tuple[dict | None, str | None]:
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
    zero = 3 if m.strategy == "fsdp" or (m.strategy == "hybrid" and mesh.dp > 1) else 0
    if m.strategy == "hybrid" and (m.notes.get("config") or {}).get("hybrid_dp") == "replicate":
        zero = 0
    states = model_state_bytes(params, dp=mesh.dp, zero=zero, tp=mesh.tp, pp=mesh.pp)
    acts = None
    if cfg.seq and cfg.hidden and cfg.heads and cfg.layers and m.micro_batch:
        per_layer = activation_bytes_per_layer(
            cfg.seq,
            m.micro_batch,
            cfg.hidden,
            cfg.heads,
            tp=mesh.tp,
            recompute="full" if m.activation_checkpointing else "none",
            bytes_per_value=4 if (m.dtype or "float32") == "float32" else 2,
            sequence_parallel=bool(m.sequence_parallel),
        )
        in_flight = 1
        if mesh.pp > 1 and m.microbatches:
            in_flight = m.microbatches if m.schedule == "gpipe" else min(mesh.pp, m.microbatches)
        acts = per_layer * cfg.layers / mesh.pp * in_flight
    total = states + (acts or 0)
    return {
        "states_bytes": states,
        "activations_bytes": acts,
        "total_bytes": total,
        "zero": zero,
        "sequence_parallel": bool(m.sequence_parallel) if mesh.tp > 1 else None,
    }, None


def diagnose(ctx: Context) -> LevelResult:
    res = LevelResult("memory")
    dev_type = 0 if ctx.cpu else 1
    rows = ctx.run.sql(f"""
        SELECT m.rank, max(m.total_allocated) AS alloc, max(m.total_reserved) AS reserved,
               any_value(r.device_memory_bytes) AS capacity
        FROM memory m JOIN rank_info r USING (rank)
        WHERE m.device_type = {dev_type} AND m.total_allocated IS NOT NULL
        GROUP BY m.rank ORDER BY m.rank""").fetchall()
    pred, why = predicted_bytes(ctx)
    per_rank = []
    for rank, alloc, reserved, capacity in rows:
        if ctx.spec is not None and ctx.overrides.device_memory_GB:
            capacity = ctx.spec.memory_bytes
        capacity = capacity or (ctx.spec.memory_bytes if ctx.spec else None)
        peak = max(alloc or 0, reserved or 0)
        per_rank.append(
            {
                "rank": rank,
                "peak_allocated_bytes": alloc,
                "peak_reserved_bytes": reserved,
                "capacity_bytes": capacity,
                "fraction": peak / capacity if capacity else None,
            }
        )
    res.metrics["ranks"] = per_rank
    if not per_rank:
        res.notes.append(
            "no [memory] events with allocator totals: profile with profile_memory=True"
        )
    fr = [r for r in per_rank if r["fraction"] is not None]
    worst = max(fr, key=lambda r: r["fraction"]) if fr else None
    peak_alloc = max((r["peak_allocated_bytes"] or 0 for r in per_rank), default=None)
    res.measured = {
        "peak_allocated_bytes": peak_alloc,
        "peak_reserved_bytes": max((r["peak_reserved_bytes"] or 0 for r in per_rank), default=None),
        # CPU allocators reserve nothing: the peak is the larger of the two
        "peak_bytes": max(
            (max(r["peak_allocated_bytes"] or 0, r["peak_reserved_bytes"] or 0) for r in per_rank),
            default=None,
        ),
        "capacity_bytes": worst["capacity_bytes"] if worst else None,
        "peak_fraction": worst["fraction"] if worst else None,
    }
    res.predicted = pred or {"total_bytes": None}
    if why:
        res.notes.append(f"predicted memory unknown: {why}")
    elif pred and pred.get("sequence_parallel") is not None:
        res.notes.append(
            "activations per Korthikanti et al. "
            + (
                "with sequence parallelism: s·b·h·(34 + 5as/h)/t"
                if pred["sequence_parallel"]
                else "without sequence parallelism (job.json sequence_parallel is not set): "
                "s·b·h·(10 + 24/t + 5as/(h·t)), layer norms and dropouts replicated per TP rank"
            )
        )
    if ctx.cpu:
        res.notes.append("CPU run: host memory has no device capacity to compare with")
    if fr:
        flagged = [r for r in fr if severity(r["fraction"], NEAR, FULL)]
        if flagged:
            sev = severity(max(r["fraction"] for r in flagged), NEAR, FULL)
            w = max(flagged, key=lambda r: r["fraction"])
            slack = (w["peak_reserved_bytes"] or 0) - (w["peak_allocated_bytes"] or 0)
            res.findings.append(
                Finding(
                    "memory.near_capacity",
                    sev,
                    f"rank {w['rank']} reserves {gb(w['peak_reserved_bytes'])} of "
                    f"{gb(w['capacity_bytes'])} ({pct(w['fraction'])})",
                    ranks=[r["rank"] for r in flagged],
                    measured={
                        "peak_fraction": w["fraction"],
                        "peak_reserved_bytes": w["peak_reserved_bytes"],
                    },
                    predicted={"total_bytes": pred["total_bytes"]} if pred else None,
                    remedy=(
                        f"{gb(slack)} of it is reserved but unallocated: "
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; "
                        if slack > 2e9
                        else ""
                    )
                    + "activation checkpointing, FSDP/ZeRO sharding of "
                    "optimizer states and gradients, or a smaller micro-batch",
                )
            )
    if pred and peak_alloc and not ctx.cpu:
        over = peak_alloc / pred["total_bytes"] if pred["total_bytes"] else None
        res.metrics["measured_over_predicted"] = over
        if over and over > 1.5 and peak_alloc - pred["total_bytes"] > 2e9:
            res.findings.append(
                Finding(
                    "memory.over_prediction",
                    "warning",
                    f"peak allocated {gb(peak_alloc)} is {over:.1f}× the {gb(pred['total_bytes'])} "
                    "the memory equation predicts",
                    ranks=[r["rank"] for r in per_rank],
                    measured=peak_alloc,
                    predicted=pred["total_bytes"],
                    remedy="look for tensors kept across steps, unsharded modules or extra copies "
                    "(torch.cuda.memory_snapshot())",
                )
            )
    return res
