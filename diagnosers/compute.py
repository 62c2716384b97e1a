"""Level 2, compute: is the device busy, and busy with useful work?

- FLOPs per op come from the signature table (tracekit/model/flops.py); each op's FLOPs
  are divided by the peak of *its* dtype (fp32, TF32, bf16/fp16, fp8): a step's
  "time at peak" is Σ_dtype FLOPs_dtype ÷ peak_dtype. TF32 is known from the op's kernels
  (`*tf32*`, `*s1688*`), cuDNN's allow_tf32 argument or job.json `allow_tf32` — never
  from speed. GPU peaks: the spec table; CPU: the calibration in job.json.
- MFU = model FLOPs' time at peak ÷ window, model FLOPs = 3 × the forward FLOPs (backward
  = 2× forward; activation recompute and attention's recomputed scores not counted —
  the PaLM / Megatron-LM convention; a trace with no backward pass: the forward alone).
- HFU = hardware FLOPs' time at peak ÷ window, hardware FLOPs = what the counted ops
  executed: forward, backward as run (output masks, flash backward 2.5×), recompute.
- GEMM efficiency = time at peak of the ops that have device time ÷ that device time:
  how fast the kernels themselves run, whatever the idle time around them. An op whose
  count would put it above its peak is left out and named in a note: its count is suspect.
- not counted: ops of the table whose FLOPs the trace cannot give (a missing argument),
  with their device time — never guessed.
- host-bound time: a device gap (no kernel, memcpy or memset on any stream) before a
  kernel launched only after the previous work had ended — the device waited for the
  host. A gap across the start of a ProfilerStep is left out: that is the previous
  step's tail (waiting on other ranks, a pipeline's cooldown), not launch overhead.
- the FLOPs predicted from job.json: tokens per step × (6N + 12·L·H·Q·T), beside the
  model FLOPs.
"""

from __future__ import annotations

from diagnosers.base import LevelResult, mean, pct, severity
from diagnosers.context import Context
from diagnosers.findings import Finding
from tracekit.metrics.breakdown import host_bound_sql
from tracekit.model.flops import transformer_flops_per_token
from tracekit.model.hardware import dtype_class
from tracekit.sql.text import sql_str

LOW_MFU, VERY_LOW_MFU = 0.25, 0.10
SLOW_GEMMS = 0.40  # GEMM efficiency under which low MFU is the kernels' fault
HOST_WARN, HOST_CRIT = 0.10, 0.25
IDLE_WARN = 0.25
GOOD_GEMM_EFFICIENCY = 0.6  # what well-shaped bf16 GEMMs reach; the impact estimate's target


def _op_class(ctx: Context, dtype: str | None, tf32: bool) -> str | None:
    """The peak-table class of an op: its dtype's, fp32 → tf32 when TF32 ran it."""
    cls = dtype_class(dtype)
    if cls == "fp32" and (tf32 or (ctx.manifest and ctx.manifest.allow_tf32)):
        return "tf32"
    return cls


def peaks(ctx: Context, classes) -> tuple[dict[str, float], str, dict[str, str]]:
    """Peak FLOP/s per dtype class, where they came from, and why a class has none."""
    out: dict[str, float] = {}
    missing: dict[str, str] = {}
    if ctx.overrides.peak_tflops:
        return {c: ctx.overrides.peak_tflops * 1e12 for c in classes}, "override", {}
    if ctx.cpu:
        cal = ctx.manifest.calibration if ctx.manifest else None
        if not (cal and cal.peak_flops):
            return {}, "CPU run without a job.json calibration", {}
        cal_cls = dtype_class(cal.dtype) or "fp32"
        for c in classes:
            if c == cal_cls or (c == "tf32" and cal_cls == "fp32"):
                out[c] = cal.peak_flops
            else:
                missing[str(c)] = f"the calibration measured {cal.dtype}, not {c}"
        return out, f"job.json calibration ({cal.dtype} matmul)", missing
    if ctx.spec is None:
        return {}, "device unknown to the spec table (pass --peak-tflops)", {}
    for c in classes:
        p = ctx.spec.peak(c)
        if p is None and c == "tf32":
            p = ctx.spec.peak("fp32")  # no TF32 units (V100, MI355X): fp32 runs as fp32
        if p is None:
            missing[str(c)] = f"{ctx.spec.name} has no {c} peak" if c else "dtype not traced"
        else:
            out[c] = p
    return out, f"{ctx.spec.name} peak per dtype", missing


def _host_bound(ctx: Context) -> dict[int, dict]:
    rows = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()}
        SELECT h.rank, w.n, h.host_bound_ns, h.host_gaps, h.gap_ns, h.median_kernel_ns
        FROM {host_bound_sql("SELECT rank, 0 AS wid, start_ns, end_ns FROM w")} h
        JOIN w USING (rank)""").fetchall()
    return {
        r: {"host_bound_ns": hb, "host_gaps": g, "gap_ns": gap, "steps": n, "median_kernel_ns": mk}
        for r, n, hb, g, gap, mk in rows
    }


def _op_groups(ctx: Context) -> tuple[list[dict], dict, str, dict]:
    """Counted ops in each rank's window, grouped by (rank, name, dtype, tf32, phase, and
    whether the op ran faster than its dtype's peak — a suspect count); the peaks."""
    win = ctx.window_sql()
    kinds = ctx.run.sql(f"""
        WITH w AS {win}
        SELECT DISTINCT f.dtype, f.tf32 FROM op_flops f JOIN w ON f.rank = w.rank
        WHERE f.ts_ns >= w.start_ns AND f.ts_ns < w.end_ns""").fetchall()
    cls = {(d, bool(t)): _op_class(ctx, d, bool(t)) for d, t in kinds}
    peak, src, missing = peaks(ctx, set(cls.values()))
    values = ", ".join(
        f"({sql_str(d) if d is not None else 'NULL'}, {bool(t)}, {peak.get(c) or 'NULL'}::DOUBLE)"
        for (d, t), c in cls.items()
    )
    p = f"(SELECT * FROM (VALUES {values}) AS p(dtype, tf32, peak))" if values else None
    rows = ctx.run.sql(f"""
        WITH w AS {win}, p AS {p or "(SELECT NULL AS dtype, false AS tf32, NULL AS peak)"}
        SELECT f.rank, f.name, f.dtype, f.tf32, f.phase,
               coalesce(f.achieved_flops_per_s > p.peak, false) AS suspect, count(*),
               count(*) FILTER (f.flops IS NULL), sum(f.flops),
               sum(f.flops) FILTER (f.device_ns > 0), sum(f.device_ns) FILTER (f.flops IS NOT NULL),
               sum(f.device_ns) FILTER (f.flops IS NULL), min(f.flops_note),
               max(f.achieved_flops_per_s / p.peak)
        FROM op_flops f JOIN w ON f.rank = w.rank
        LEFT JOIN p ON p.dtype IS NOT DISTINCT FROM f.dtype AND p.tf32 = coalesce(f.tf32, false)
        WHERE f.ts_ns >= w.start_ns AND f.ts_ns < w.end_ns
        GROUP BY ALL
        ORDER BY ALL  -- the sums below then add in one order: the same report every time
        """).fetchall()
    keys = ("rank", "name", "dtype", "tf32", "phase", "suspect", "n", "n_null", "flops")
    keys += ("timed_flops", "device_ns", "null_device_ns", "note", "max_peak_ratio")
    groups = [dict(zip(keys, r, strict=True)) for r in rows]
    for g in groups:
        g["cls"] = cls.get((g["dtype"], bool(g["tf32"])))
    return groups, peak, src, missing


def _suspects(groups: list[dict]) -> dict[tuple[str, str | None], float]:
    """(op, class) → the worst ratio to the peak among its ops that ran faster than it."""
    out: dict[tuple[str, str | None], float] = {}
    for g in groups:
        if g["suspect"]:
            key = (g["name"], g["cls"])
            out[key] = max(out.get(key, 0.0), g["max_peak_ratio"] or 0.0)
    return out


def _rank_flops(groups: list[dict], peak: dict) -> dict[int, dict]:
    """Per rank: model and hardware FLOPs, their time at peak, GEMM efficiency inputs."""
    out: dict[int, dict] = {}
    for g in groups:
        r = out.setdefault(
            g["rank"],
            {
                "fwd": {},
                "hw": {},
                "bwd": 0,
                "at_peak_timed": 0.0,
                "timed_ns": 0,
                "n_null": 0,
                "null_ns": 0,
                "no_peak_flops": 0.0,
            },
        )
        fl = g["flops"] or 0.0
        r["hw"][g["cls"]] = r["hw"].get(g["cls"], 0.0) + fl
        if g["phase"] == "forward":
            r["fwd"][g["cls"]] = r["fwd"].get(g["cls"], 0.0) + fl
        elif g["phase"] == "backward" and fl:
            r["bwd"] += 1
        r["n_null"] += g["n_null"]
        r["null_ns"] += g["null_device_ns"] or 0
        p = peak.get(g["cls"])
        if p is None:
            r["no_peak_flops"] += fl
        elif g["timed_flops"] and g["device_ns"] and not g["suspect"]:
            r["at_peak_timed"] += g["timed_flops"] / p
            r["timed_ns"] += g["device_ns"]
    return out


def _at_peak(flops_by_class: dict, peak: dict) -> float:
    return sum(fl / peak[c] for c, fl in flops_by_class.items() if peak.get(c))


def top_ops(ctx: Context, groups: list[dict], peak: dict, limit: int = 10) -> list[dict]:
    agg: dict[str, dict] = {}
    for g in groups:
        a = agg.setdefault(
            g["name"],
            {
                "name": g["name"],
                "dtype": g["dtype"],
                "count": 0,
                "flops": 0.0,
                "device_ns": 0,
                "not_counted": 0,
                "_timed": 0.0,
                "_at_peak": 0.0,
                "_peak_ns": 0,
            },
        )
        a["count"] += g["n"]
        a["not_counted"] += g["n_null"]
        a["flops"] += g["flops"] or 0.0
        a["device_ns"] += (g["device_ns"] or 0) + (g["null_device_ns"] or 0)
        if g["timed_flops"] and g["device_ns"] and not g["suspect"]:
            a["_timed"] += g["timed_flops"]
            a["_peak_ns"] += g["device_ns"]
            if peak.get(g["cls"]):
                a["_at_peak"] += g["timed_flops"] / peak[g["cls"]]
    rows = sorted(agg.values(), key=lambda a: (-a["device_ns"], a["name"]))[:limit]
    for a in rows:
        ns = a.pop("_peak_ns")
        timed, at_peak = a.pop("_timed"), a.pop("_at_peak")
        a["device_ms"] = a.pop("device_ns") / 1e6
        a["achieved_tflops"] = timed / ns * 1e-3 if ns else None
        frac = at_peak / (ns * 1e-9) if ns and at_peak else None
        a["peak_fraction"] = frac if frac is not None and frac <= 1 else None
        a["flops"] = a["flops"] or None
    return rows


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
    groups, peak, peak_src, no_peak = _op_groups(ctx)
    suspects = _suspects(groups)
    flops = _rank_flops(groups, peak)
    hb = {} if ctx.cpu else _host_bound(ctx)
    per_rank = []
    for r in ctx.ranks:
        rank, win_s = r["rank"], r["window_ms"] * 1e-3
        f = flops.get(rank)
        steps = max(r["steps"], 1)
        row: dict = {"rank": rank}
        if f:
            model = {c: 3 * v for c, v in f["fwd"].items()} if f["bwd"] else f["fwd"]
            mfu = _at_peak(model, peak) / win_s if win_s and peak else None
            hfu = _at_peak(f["hw"], peak) / win_s if win_s and peak else None
            eff = f["at_peak_timed"] / (f["timed_ns"] * 1e-9) if f["timed_ns"] else None
            hw_total = sum(f["hw"].values())
            row |= {
                "flops_per_step": hw_total / steps,
                "model_flops_per_step": sum(model.values()) / steps,
                "flops_by_dtype": {str(c): v / steps for c, v in f["hw"].items() if v},
                "mfu": mfu if mfu and mfu <= 1 else None,
                "hfu": hfu if hfu and hfu <= 1 else None,
                "gemm_efficiency": eff if eff and eff <= 1 else None,
                "at_peak_ms_per_step": _at_peak(f["hw"], peak) / steps * 1e3,
                "uncounted_ops_per_step": f["n_null"] / steps,
                "uncounted_device_ms_per_step": f["null_ns"] / 1e6 / steps,
                "_over_peak": [
                    k
                    for k, v in (("MFU", mfu), ("HFU", hfu), ("GEMM efficiency", eff))
                    if v and v > 1
                ],
            }
        h = hb.get(rank, {})
        win_ns = win_s * 1e9
        row |= {
            "idle_fraction": r["idle_fraction"],
            "compute_fraction": r["compute_fraction"],
            "host_bound_fraction": (
                h.get("host_bound_ns", 0) / win_ns if win_ns and h else (None if ctx.cpu else 0)
            ),
            "host_bound_ms_per_step": h.get("host_bound_ns", 0) / 1e6 / steps if h else None,
            "host_gaps_per_step": h.get("host_gaps", 0) / steps if h else None,
            "median_kernel_us": (h.get("median_kernel_ns") or 0) / 1e3 if h else None,
        }
        per_rank.append(row)
    _sanity_notes(res, suspects, peak, per_rank, no_peak, calibrated=ctx.cpu)
    for row in per_rank:
        row.pop("_over_peak", None)
    res.metrics["ranks"] = per_rank
    res.metrics["top_ops"] = top_ops(ctx, groups, peak)
    res.metrics["peak_flops_by_dtype"] = {str(c): v for c, v in peak.items()}
    mfu = mean(r.get("mfu") for r in per_rank)
    eff = mean(r.get("gemm_efficiency") for r in per_rank)
    if mfu is None:
        counted = any(g["flops"] for g in groups)
        why = peak_src if counted else "no FLOPs counted: profile with record_shapes=True"
        res.notes.append(f"MFU unknown: {why}")
    nsteps = max(max((r["steps"] for r in ctx.ranks), default=1), 1)

    def run_total(key):  # per step, all ranks
        vals = [
            r[key] * max(x["steps"], 1)
            for r, x in zip(per_rank, ctx.ranks, strict=True)
            if key in r
        ]
        return sum(vals) / nsteps if vals else None

    by_dtype: dict[str, float] = {}
    for r in per_rank:
        for c, v in (r.get("flops_by_dtype") or {}).items():
            by_dtype[c] = by_dtype.get(c, 0.0) + v
    pred, why = predicted_flops_per_step(ctx)
    model_total = run_total("model_flops_per_step")
    res.measured = {
        "mfu": mfu,
        "hfu": mean(r.get("hfu") for r in per_rank),
        "gemm_efficiency": eff,
        "peak_source": peak_src,
        "flops_per_step": run_total("flops_per_step") or None,
        "model_flops_per_step": model_total or None,
        "flops_by_dtype": by_dtype,
        "uncounted_ops_per_step": run_total("uncounted_ops_per_step"),
        "idle_fraction": mean(r["idle_fraction"] for r in ctx.ranks),
        "host_bound_fraction": mean(r["host_bound_fraction"] for r in per_rank),
    }
    res.predicted = {"model_flops_per_step": pred}
    ctx.metrics["compute"] = {"mfu": mfu, "gemm_efficiency": eff, "ranks": per_rank}
    uncounted = run_total("uncounted_ops_per_step")
    if uncounted:
        names = sorted({(g["name"], g["note"]) for g in groups if g["n_null"]})
        res.notes.append(
            f"{uncounted:.0f} ops per step not counted (FLOPs unknown from the trace): "
            + "; ".join(f"{n}: {why}" for n, why in names[:4])
        )
    if why:
        res.notes.append(f"predicted FLOPs unknown: {why}")
    elif model_total and pred:
        ratio = model_total / pred
        res.metrics["counted_over_predicted_flops"] = ratio
        if abs(ratio - 1) > 0.2:
            res.notes.append(
                f"model FLOPs counted are {ratio:.2f}× the 6N + 12LHQT model: "
                "non-transformer work, or ops without recorded shapes explain the difference"
            )
    _low_mfu(res, ctx, mfu, eff, per_rank)
    _host_bound_finding(res, ctx, per_rank)
    _idle_finding(res, ctx, per_rank)
    return res


def _sanity_notes(
    res: LevelResult, suspects, peak: dict, per_rank, no_peak: dict, calibrated: bool
) -> None:
    """An efficiency above 100% is a counting bug (or, against a measured calibration, a
    peak measured too low): never a figure, always a note naming the op."""
    for (name, cls), ratio in sorted(suspects.items()):
        why = (
            "the calibration's matmul measured this machine's peak too low"
            if calibrated
            else "its FLOP count is suspect (shapes or arguments misread, or kernels "
            "missing from the trace)"
        )
        res.notes.append(
            f"{name} ({cls}) runs at up to {ratio:.0%} of the {peak[cls] / 1e12:.2f} TFLOP/s "
            f"{cls} peak: {why}; left out of GEMM efficiency"
        )
    over = sorted({k for r in per_rank for k in r.get("_over_peak", [])})
    if over:
        res.notes.append(
            f"{', '.join(over)} above 100% on some rank: a counting bug, shown as unknown"
        )
    counted = {c for r in per_rank for c, v in (r.get("flops_by_dtype") or {}).items() if v}
    for cls, why in sorted(no_peak.items()):
        if cls in counted:
            res.notes.append(f"MFU leaves out {cls} FLOPs: {why}")


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
    for r in per_rank:  # the kernels' time now, against the time at a good efficiency
        if r.get("gemm_efficiency") and r.get("at_peak_ms_per_step"):
            at_peak = r["at_peak_ms_per_step"]
            lost += max(0.0, at_peak / r["gemm_efficiency"] - at_peak / GOOD_GEMM_EFFICIENCY)
    impact = lost / max(len(per_rank), 1)
    peaks = res.metrics.get("peak_flops_by_dtype", {})
    peak_txt = ", ".join(f"{c} {p / 1e12:.0f}" for c, p in peaks.items()) or "—"
    res.findings.append(
        Finding(
            "compute.low_mfu",
            sev,
            f"MFU {pct(mfu)}: the counted GEMM/attention work runs at {pct(eff)} of its "
            f"dtype's peak (TFLOP/s: {peak_txt})",
            ranks=[r["rank"] for r in per_rank if r.get("mfu") is not None and r["mfu"] < LOW_MFU],
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
