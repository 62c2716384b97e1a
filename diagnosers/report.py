"""The full report: the engine's breakdown plus the four levels, the collectives and
the findings, as the DESIGN JSON contract lays it out (rendered by tracekit.report)."""

from __future__ import annotations

from typing import Any

from diagnosers import run_all
from diagnosers.context import build as build_context
from tracekit.metrics.samples import per_step
from tracekit.report.render import build
from tracekit.store.run import Run

SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def cached_full_report(
    run: Run, window: str = "steps", steps: str | None = None, overrides=None, debug: bool = False
) -> dict[str, Any]:
    """`full_report`, read back from the run's report cache when this exact report (same
    sources, job.json, options and code) was computed before (`tracekit.report.cache`).
    `debug` always computes, so a diagnoser's error shows its traceback."""
    from dataclasses import asdict

    from tracekit.report import cache as reportcache

    def compute() -> dict[str, Any]:
        return full_report(run, window=window, steps=steps, overrides=overrides, debug=debug)

    if debug:
        return compute()
    options = {
        "window": window,
        "steps": steps,
        "overrides": asdict(overrides) if overrides is not None else None,
    }
    return reportcache.cached(run, options, compute)


def full_report(
    run: Run, window: str = "steps", steps: str | None = None, overrides=None, debug: bool = False
) -> dict[str, Any]:
    """The whole report: breakdown, the four levels, collectives, findings."""
    run.materialize()
    ctx = build_context(run, window=window, steps=steps, overrides=overrides)
    levels = run_all(ctx, debug=debug)
    by = {lv.level: lv for lv in levels}
    findings = [f for lv in levels for f in lv.findings]
    findings.sort(key=lambda f: (-(f.impact_ms or 0), SEVERITY_ORDER[f.severity]))
    comp = by.get("compute")
    comm = by.get("communication")
    scal = by.get("scaling")
    mem = by.get("memory")
    rep = build(run, window=window, steps=steps, ranks=ctx.ranks)
    for r in rep["ranks"]:  # per-rank figures the levels computed
        c = next(
            (x for x in (comp.metrics.get("ranks", []) if comp else []) if x["rank"] == r["rank"]),
            {},
        )
        r["mfu"] = c.get("mfu")
        r["hfu"] = c.get("hfu")
        r["host_bound_fraction"] = c.get("host_bound_fraction")
        m = next(
            (x for x in (mem.metrics.get("ranks", []) if mem else []) if x["rank"] == r["rank"]), {}
        )
        r["peak_memory_fraction"] = m.get("fraction")
        r["peak_reserved_bytes"] = m.get("peak_reserved_bytes")
        n = next(
            (x for x in (comm.metrics.get("ranks", []) if comm else []) if x["rank"] == r["rank"]),
            {},
        )
        r["exposed_slow_fraction"] = n.get("exposed_slow_fraction")
    proj = (scal.predicted.get("projection") if scal else None) or {}
    summary = {
        "step_time_ms": ctx.step_ms,
        "mfu": comp.measured.get("mfu") if comp else None,
        "hfu": comp.measured.get("hfu") if comp else None,
        "gemm_efficiency": comp.measured.get("gemm_efficiency") if comp else None,
        "peak_flops_source": comp.measured.get("peak_source") if comp else None,
        "peak_flops_by_dtype": comp.metrics.get("peak_flops_by_dtype") if comp else None,
        "flops_per_step": comp.measured.get("flops_per_step") if comp else None,
        "model_flops_per_step": comp.measured.get("model_flops_per_step") if comp else None,
        "predicted_flops_per_step": comp.predicted.get("model_flops_per_step") if comp else None,
        "flops_by_dtype": comp.measured.get("flops_by_dtype") if comp else None,
        "uncounted_ops_per_step": comp.measured.get("uncounted_ops_per_step") if comp else None,
        "idle_fraction": _mean(r["idle_fraction"] for r in ctx.ranks),
        "host_bound_fraction": comp.measured.get("host_bound_fraction") if comp else None,
        "comm_fraction": _mean(r["comm_fraction"] for r in ctx.ranks),
        "compute_fraction": _mean(r["compute_fraction"] for r in ctx.ranks),
        "non_compute_fraction": _mean(r["non_compute_fraction"] for r in ctx.ranks),
        "comm_overlap_fraction": _mean(r["comm_overlap_fraction"] for r in ctx.ranks),
        "exposed_comm_fraction": _mean(r["exposed_comm_fraction"] for r in ctx.ranks),
        "exposed_transfer_fraction": _mean(r["exposed_transfer_fraction"] for r in ctx.ranks),
        "comm_wait_fraction": _mean(r["comm_wait_fraction"] for r in ctx.ranks),
        "exposed_slow_fraction": _mean(r.get("exposed_slow_fraction") for r in rep["ranks"]),
        "unexplained_exposed_fraction": comm.measured.get("unexplained_exposed_fraction")
        if comm
        else None,
        "bubble_fraction": scal.measured.get("bubble_fraction") if scal else None,
        "predicted_bubble_fraction": scal.predicted.get("bubble_fraction") if scal else None,
        "modeled_bubble_fraction": scal.predicted.get("modeled_bubble_fraction") if scal else None,
        "straggler_ranks": scal.measured.get("straggler_ranks") if scal else [],
        # the summary of a per-rank key is its mean over ranks; the worst rank has its own key
        "peak_memory_fraction": _mean(r.get("peak_memory_fraction") for r in rep["ranks"]),
        "max_peak_memory_fraction": mem.measured.get("peak_fraction") if mem else None,
        "peak_memory_bytes": mem.measured.get("peak_bytes") if mem else None,
        "predicted_memory_bytes": mem.predicted.get("total_bytes") if mem else None,
        "projected_efficiency_2x": (proj.get("2x") or {}).get("efficiency"),
        "projected_efficiency_8x": (proj.get("8x") or {}).get("efficiency"),
        "device_spec": ctx.spec.name if ctx.spec else None,
        "manifest": bool(ctx.manifest),
    }
    summary["null_reasons"] = {
        k: next((n for lv in levels for n in lv.notes if _note_for(k, n)), "not measurable")
        for k, v in summary.items()
        if v is None and k != "null_reasons"
    }
    rep["summary"] = summary
    rep["levels"] = [lv.to_dict() for lv in levels]
    rep["collectives"] = comm.metrics.get("collectives", []) if comm else []
    rep["top_ops"] = comp.metrics.get("top_ops", []) if comp else []
    rep["findings"] = [f.to_dict() for f in findings]
    # per-step figures, so `tracekit compare` can tell a change from noise
    rep["samples"] = per_step(run, steps=steps, pipeline=summary["bubble_fraction"] is not None)
    return rep


_NOTE_KEYS = {
    "mfu": "MFU",
    "hfu": "MFU",
    "gemm_efficiency": "MFU",
    "model_flops_per_step": "MFU",
    "flops_per_step": "MFU",
    "peak_flops_source": "MFU",
    "predicted_flops_per_step": "predicted FLOPs",
    "bubble_fraction": "pipeline",
    "predicted_bubble_fraction": "pipeline",
    "modeled_bubble_fraction": "pipeline",
    "peak_memory_fraction": "memory",
    "max_peak_memory_fraction": "memory",
    "predicted_memory_bytes": "predicted memory",
    "peak_memory_bytes": "memory",
}


def _note_for(key: str, note: str) -> bool:
    word = _NOTE_KEYS.get(key)
    return bool(word) and word.lower() in note.lower()


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
