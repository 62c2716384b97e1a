"""Level 2, compute: is the device busy, and busy with useful work?

- MFU = counted FLOPs in the window ÷ window ÷ peak FLOP/s for the FLOPs' dtype
  (GPU: the spec table; CPU: the calibration in job.json). When fp32 GEMMs run faster
  than the fp32 peak, TF32 was in use and its peak is taken.
- GEMM efficiency = counted FLOPs ÷ the device time of their kernels ÷ peak: how fast
  the kernels themselves run, whatever the idle time around them.
- host-bound time: a device gap (no kernel, memcpy or memset on any stream) before a
  kernel launched only after the previous work had ended — the device waited for the
  host. A gap across the start of a ProfilerStep is left out: that is the previous
  step's tail (waiting on other ranks, a pipeline's cooldown), not launch overhead.
- the FLOPs predicted from job.json: tokens per step × (6N + 12·L·H·Q·T).
"""

from __future__ import annotations

from diagnosers.base import LevelResult, mean, pct, severity
from diagnosers.context import Context
from diagnosers.findings import Finding
from tracekit.model.flops import transformer_flops_per_token
from tracekit.model.hardware import dtype_class

LOW_MFU, VERY_LOW_MFU = 0.25, 0.10
SLOW_GEMMS = 0.40  # GEMM efficiency under which low MFU is the kernels' fault
HOST_WARN, HOST_CRIT = 0.10, 0.25
IDLE_WARN = 0.25
GOOD_GEMM_EFFICIENCY = 0.6  # what well-shaped bf16 GEMMs reach; the impact estimate's target


def _peak(ctx: Context, dclass: str | None, achieved: float | None) -> tuple[float | None, str]:
    if ctx.overrides.peak_tflops:
        return ctx.overrides.peak_tflops * 1e12, "override"
    if ctx.cpu:
        cal = ctx.manifest.calibration if ctx.manifest else None
        if cal and cal.peak_flops:
            return cal.peak_flops, f"job.json calibration ({cal.dtype} matmul)"
        return None, "CPU run without a job.json calibration"
    if ctx.spec is None:
        return None, "device unknown to the spec table (pass --peak-tflops)"
    peak = ctx.spec.peak(dclass or "bf16")
    if dclass == "fp32" and peak and achieved and achieved > 1.05 * peak:
        tf32 = ctx.spec.peak("tf32")
        if tf32:
            return tf32, f"{ctx.spec.name} tf32 (fp32 GEMMs beat the fp32 peak: TF32 is on)"
    if peak is None:
        return None, f"{ctx.spec.name} has no {dclass} peak"
    return peak, f"{ctx.spec.name} {dclass or 'bf16'}"


def _host_bound(ctx: Context) -> dict[int, dict]:
    rows = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()},
        d AS (
            SELECT a.rank, a.ts_ns, a.end_ns, a.correlation, w.n
            FROM device_activity a JOIN w ON a.rank = w.rank
            WHERE a.kind IN ('kernel', 'memcpy', 'memset')
              AND a.ts_ns >= w.start_ns AND a.ts_ns < w.end_ns
        ),
        o AS (
            SELECT *, max(end_ns) OVER (PARTITION BY rank ORDER BY ts_ns, end_ns
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
            FROM d
        ),
        l0 AS (
            SELECT o.*, r.ts_ns AS launch_ns FROM o
            LEFT JOIN events r ON r.rank = o.rank AND r.correlation = o.correlation
                              AND r.kind = 'runtime'
        ),
        -- a gap across a step boundary is the step's tail (waiting on other ranks, a
        -- pipeline's cooldown), not launch overhead
        boundary AS (
            SELECT DISTINCT l0.rank, l0.ts_ns FROM l0 JOIN steps s
              ON s.rank = l0.rank AND s.ts_ns > l0.prev_end AND s.ts_ns <= l0.launch_ns
        ),
        l AS (
            SELECT l0.* FROM l0 ANTI JOIN boundary b ON b.rank = l0.rank AND b.ts_ns = l0.ts_ns
        )
        SELECT rank, any_value(n),
               coalesce(sum(ts_ns - prev_end) FILTER (ts_ns > prev_end
                                                      AND launch_ns >= prev_end), 0),
               count(*) FILTER (ts_ns > prev_end AND launch_ns >= prev_end),
               coalesce(sum(ts_ns - prev_end) FILTER (ts_ns > prev_end), 0),
               median(end_ns - ts_ns)
        FROM l GROUP BY rank""").fetchall()
    return {
        r: {"host_bound_ns": hb, "host_gaps": g, "gap_ns": gap, "steps": n, "median_kernel_ns": mk}
        for r, n, hb, g, gap, mk in rows
    }


def _flops(ctx: Context) -> dict[int, dict]:
    rows = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()},
        f AS (
            SELECT f.* FROM op_flops f JOIN w ON f.rank = w.rank
            WHERE f.ts_ns >= w.start_ns AND f.ts_ns < w.end_ns
        ),
        by_dtype AS (SELECT rank, dtype, sum(flops) AS fl FROM f GROUP BY ALL)
        SELECT f.rank, sum(f.flops), sum(f.device_ns),
               (SELECT arg_max(dtype, fl) FROM by_dtype b WHERE b.rank = f.rank)
        FROM f GROUP BY f.rank""").fetchall()
    return {r: {"flops": fl, "device_ns": dn, "dtype": dt} for r, fl, dn, dt in rows}


def top_ops(ctx: Context, limit: int = 10) -> list[dict]:
    rows = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()}
        SELECT f.name, any_value(f.dtype), count(*), sum(f.flops), sum(f.device_ns)
        FROM op_flops f JOIN w ON f.rank = w.rank
        WHERE f.ts_ns >= w.start_ns AND f.ts_ns < w.end_ns
        GROUP BY f.name ORDER BY sum(f.device_ns) DESC NULLS LAST LIMIT {limit}""").fetchall()
    return [
        {
            "name": n,
            "dtype": d,
            "count": c,
            "flops": fl,
            "device_ms": (ns or 0) / 1e6,
            "achieved_tflops": fl / ns * 1e-3 if ns else None,
        }
        for n, d, c, fl, ns in rows
    ]


def predicted_flops_per_step(ctx: Context) -> tuple[float | None, str | None]:
    m = ctx.manifest
    if m is None:
        return None, "no job.json"
    c = m.model
    tokens = m.tokens_per_step or ((m.global_batch or 0) * (c.seq or 0)) or None
    if not (tokens and c.params and c.layers and c.heads and c.hidden and c.seq):
        return None, "job.json lacks the model size or tokens per step"
    n = float(c.active_params or c.params) - float(c.embedding_params or 0)
    per_token = transformer_flops_per_token(n, c.layers, c.heads, c.hidden // c.heads, c.seq)
    return tokens * per_token, None


def diagnose(ctx: Context) -> LevelResult:
    res = LevelResult("compute")
    flops = _flops(ctx)
    hb = {} if ctx.cpu else _host_bound(ctx)
    per_rank, mfus, effs = [], [], []
    peak_src = None
    for r in ctx.ranks:
        rank, win_ns = r["rank"], r["window_ms"] * 1e6
        f = flops.get(rank, {})
        achieved = f["flops"] / f["device_ns"] * 1e9 if f.get("device_ns") else None
        peak, peak_src = _peak(ctx, dtype_class(f.get("dtype")), achieved)
        steps = max(r["steps"], 1)
        mfu = f["flops"] / (win_ns * 1e-9) / peak if f.get("flops") and peak and win_ns else None
        eff = achieved / peak if achieved and peak else None
        h = hb.get(rank, {})
        host_frac = h.get("host_bound_ns", 0) / win_ns if win_ns and h else (None if ctx.cpu else 0)
        row = {
            "rank": rank,
            "flops_per_step": f.get("flops", 0) / steps if f else None,
            "dtype": f.get("dtype"),
            "peak_flops": peak,
            "mfu": mfu,
            "gemm_efficiency": eff,
            "achieved_tflops": achieved / 1e12 if achieved else None,
            "idle_fraction": r["idle_fraction"],
            "compute_fraction": r["compute_fraction"],
            "host_bound_fraction": host_frac,
            "host_bound_ms_per_step": h.get("host_bound_ns", 0) / 1e6 / steps if h else None,
            "host_gaps_per_step": h.get("host_gaps", 0) / steps if h else None,
            "median_kernel_us": (h.get("median_kernel_ns") or 0) / 1e3 if h else None,
        }
        per_rank.append(row)
        if mfu is not None:
            mfus.append(mfu)
        if eff is not None:
            effs.append(eff)
    res.metrics["ranks"] = per_rank
    res.metrics["top_ops"] = top_ops(ctx)
    mfu = sum(mfus) / len(mfus) if mfus else None
    eff = sum(effs) / len(effs) if effs else None
    ctx.metrics["compute"] = {"mfu": mfu, "gemm_efficiency": eff, "ranks": per_rank}
    if mfu is None:
        why = "no FLOPs counted: profile with record_shapes=True" if not flops else peak_src
        res.notes.append(f"MFU unknown: {why}")
    counted = sum((f["flops"] or 0) for f in flops.values()) / max(
        max((r["steps"] for r in ctx.ranks), default=1), 1
    )
    pred, why = predicted_flops_per_step(ctx)
    res.measured = {
        "mfu": mfu,
        "gemm_efficiency": eff,
        "peak_source": peak_src,
        "flops_per_step": counted or None,
        "idle_fraction": mean(r["idle_fraction"] for r in ctx.ranks),
        "host_bound_fraction": mean(r["host_bound_fraction"] for r in per_rank),
    }
    res.predicted = {"flops_per_step": pred}
    if why:
        res.notes.append(f"predicted FLOPs unknown: {why}")
    elif counted and pred:
        ratio = counted / pred
        res.metrics["counted_over_predicted_flops"] = ratio
        if abs(ratio - 1) > 0.2:
            res.notes.append(
                f"counted FLOPs are {ratio:.2f}× the 6N + 12LHQT model: recompute, "
                "non-transformer work, or ops without recorded shapes explain the difference"
            )
    _low_mfu(res, ctx, mfu, eff, per_rank)
    _host_bound_finding(res, ctx, per_rank)
    _idle_finding(res, ctx, per_rank)
    return res


def _idle_finding(res: LevelResult, ctx: Context, per_rank) -> None:
    from diagnosers.pipeline import detect_pipeline

    if detect_pipeline(ctx) is not None:
        return  # a pipeline's idle time is its bubble (scaling.pipeline_bubble)
    flagged = []
    for r in per_rank:
        unexplained = (r["idle_fraction"] or 0) - (r["host_bound_fraction"] or 0)
        if unexplained >= IDLE_WARN:
            flagged.append((r, unexplained))
    if not flagged:
        return
    frac = sum(u for _, u in flagged) / len(flagged)
    step_ms = ctx.step_ms or 0
    res.findings.append(
        Finding(
            "compute.idle",
            "critical" if frac >= 0.5 else "warning",
            f"the device is idle {pct(frac)} of the step for reasons other than kernel launches",
            ranks=[r["rank"] for r, _ in flagged],
            measured={"idle_fraction": frac},
            predicted={"idle_fraction": 0.0},
            impact_ms=frac * step_ms,
            remedy="look in the timeline for waits on the data loader, host synchronizations, "
            "checkpointing or evaluation inside the step",
        )
    )


def _low_mfu(res: LevelResult, ctx: Context, mfu, eff, per_rank) -> None:
    if mfu is None or mfu >= LOW_MFU or eff is None or eff >= SLOW_GEMMS:
        return  # high MFU, or low MFU that idle / communication explains (their findings)
    sev = "critical" if mfu < VERY_LOW_MFU else "warning"
    lost = 0.0
    for r in per_rank:
        if r["gemm_efficiency"] and r["flops_per_step"] and r["peak_flops"]:
            now = r["flops_per_step"] / (r["gemm_efficiency"] * r["peak_flops"])
            good = r["flops_per_step"] / (GOOD_GEMM_EFFICIENCY * r["peak_flops"])
            lost += max(0.0, now - good)
    impact = lost / max(len(per_rank), 1) * 1e3
    dtype = per_rank[0]["dtype"] if per_rank else None
    res.findings.append(
        Finding(
            "compute.low_mfu",
            sev,
            f"MFU {pct(mfu)}: the counted GEMM/attention work runs at {pct(eff)} of the "
            f"{(per_rank[0]['peak_flops'] or 0) / 1e12:.0f} TFLOP/s peak ({dtype})",
            ranks=[r["rank"] for r in per_rank if r["mfu"] is not None and r["mfu"] < LOW_MFU],
            measured={"mfu": mfu, "gemm_efficiency": eff},
            predicted={"gemm_efficiency": GOOD_GEMM_EFFICIENCY},
            impact_ms=impact,
            remedy="bf16 autocast or TF32 for fp32 GEMMs, matmul shapes that are multiples of 64, "
            "flash/fused attention, torch.compile; confirm tensor-core kernels in the top ops",
            details={"top_ops": res.metrics["top_ops"][:5]},
        )
    )


def _host_bound_finding(res: LevelResult, ctx: Context, per_rank) -> None:
    if ctx.cpu:
        return
    flagged = [r for r in per_rank if severity(r["host_bound_fraction"] or 0, HOST_WARN, HOST_CRIT)]
    if not flagged:
        return
    frac = mean(r["host_bound_fraction"] for r in flagged)
    ms = mean(r["host_bound_ms_per_step"] for r in flagged)
    gaps = mean(r["host_gaps_per_step"] for r in flagged)
    res.findings.append(
        Finding(
            "compute.host_bound",
            severity(frac, HOST_WARN, HOST_CRIT) or "warning",
            f"the device waits for kernel launches {pct(frac)} of each step ({ms:.1f} ms, "
            f"{gaps:.0f} gaps per step)",
            ranks=[r["rank"] for r in flagged],
            measured={"host_bound_fraction": frac},
            predicted={"host_bound_fraction": 0.0},
            impact_ms=ms,
            remedy=f"median kernel {flagged[0]['median_kernel_us'] or 0:.0f} µs: CUDA graphs "
            "(torch.compile mode='reduce-overhead'), fuse small ops, a larger batch per launch, "
            "and no host syncs (.item(), .cpu(), cudaStreamSynchronize) inside the step",
        )
    )
