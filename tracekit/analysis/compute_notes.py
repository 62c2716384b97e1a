"""What the compute facts say beside their figures (`tracekit.analysis.compute`): an
efficiency above 100% (a counting bug, never a figure), graph captures in the analysed
steps, and why FLOPs went uncounted with what to profile next."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.analysis import uncounted as U
from tracekit.metrics import windows as W
from tracekit.model.ranks import ranges

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts


def over_peak(names: set[str]) -> str | None:
    """The note on efficiencies above 100% on some rank (never a figure), or None:
    `names` are the efficiencies (MFU, HFU, GEMM efficiency) above it."""
    over = sorted(names)
    if over:
        return f"{', '.join(over)} above 100% on some rank: a counting bug, shown as unknown"
    return None


def sanity_notes(
    suspects, peak: dict, per_rank, no_peak: dict, calibrated: bool, over: str | None
) -> list[str]:
    """An efficiency above 100% is a counting bug (or, against a measured calibration, a
    peak measured too low): never a figure, always a note naming the op (`over`: the
    note on a rank's efficiencies above it)."""
    notes = []
    for (name, cls), (ratio, winograd) in sorted(suspects.items()):
        if winograd:  # the count is exact: the algorithm does fewer multiplies than it
            why = (
                "those ops ran Winograd convolution kernels, which compute it with "
                "fewer multiplies than its FLOP count (the count is exact)"
            )
        elif calibrated:
            why = "the calibration's matmul measured this machine's peak too low"
        else:
            why = (
                "its FLOP count is suspect (shapes or arguments misread, or kernels "
                "missing from the trace)"
            )
        notes.append(
            f"{name} ({cls}) runs at up to {ratio:.0%} of the {peak[cls] / 1e12:.2f} TFLOP/s "
            f"{cls} peak: {why}; left out of GEMM efficiency"
        )
    if over:
        notes.append(over)
    counted = {c for r in per_rank for c, v in (r.flops_by_dtype or {}).items() if v}
    for cls, why in sorted(no_peak.items()):
        if cls in counted:
            notes.append(f"MFU leaves out {cls} FLOPs: {why}")
    return notes


def _capture_spans(ctx: Facts) -> str | None:
    """SQL reading the run's CUDA/HIP graph captures (`capture_spans`: a scan of every
    runtime call's name), from a table made once for the steps and the notes; None where
    the run has none."""
    spans = W.rows_of(ctx.run, sql.query("levels.compute", "capture_spans"))
    return spans if ctx.run.sql(f"SELECT EXISTS ({spans})").fetchone()[0] else None


def capture_steps(ctx: Facts) -> dict[int, int]:
    """Per rank: its analysed steps in which a CUDA/HIP graph capture starts."""
    spans = _capture_spans(ctx)
    if spans is None:
        return {}
    src = (
        "SELECT s.rank, s.step, s.ts_ns FROM steps s JOIN (" + spans + ") c "
        "ON c.rank = s.rank AND c.start_ns BETWEEN s.ts_ns AND s.end_ns"
    )
    rows = ctx.run.sql(
        f"SELECT rank, count(DISTINCT step) FROM ({W.starting_in(src, ctx.windows)}) GROUP BY 1"
    ).fetchall()
    return dict(rows)


def capture_notes(ctx: Facts) -> list[str]:
    """A step that captures CUDA/HIP graphs is a capture step: its launches were recorded,
    their kernels did not run, and its ops count no FLOPs (`op_flops`)."""
    spans = _capture_spans(ctx)
    if spans is None:
        return []
    rows = ctx.run.sql(sql.query("levels.compute", "graph_captures", spans=spans)).fetchall()
    by_step: dict[int | None, list] = {}
    for rank, step, caps, launches in rows:
        by_step.setdefault(step, []).append((rank, caps, launches))
    notes = []
    for step, rs in sorted(by_step.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        caps, launches = sum(r[1] for r in rs), sum(r[2] for r in rs)
        where = f"step {step}" if step is not None else "outside the steps"
        notes.append(
            f"graph capture {where} (rank {ranges(sorted({r[0] for r in rs}))}): "
            f"{caps} capture{'s' if caps != 1 else ''}, {launches} kernel launches recorded "
            "into CUDA/HIP graphs, not run — a capture step, not idle time; its ops count "
            "no FLOPs (the graph's replays do the work)"
        )
    return notes


def shapes_recorded(ctx: Facts) -> bool:
    """Whether the trace was recorded with shapes (record_shapes=True in its header, or
    ops carrying Input Dims: older traces lack the header flag), on any rank."""
    rows = ctx.run.sql(
        "SELECT coalesce(bool_or(record_shapes), false) OR EXISTS "
        "(SELECT 1 FROM events WHERE input_dims IS NOT NULL) FROM rank_info"
    ).fetchall()
    return bool(rows and rows[0][0])


_SHAPES_ADVICE = " (profile with record_shapes=True)"


def advice(note: str | None, shapes: bool) -> str | None:
    """An op's note without advice the trace already follows (shapes are recorded)."""
    if note and shapes and note.endswith(_SHAPES_ADVICE):
        return note[: -len(_SHAPES_ADVICE)] + " on this op although the trace records shapes"
    return note


def no_flops_cause(groups: list[dict], unc: U.UncountedFacts, shapes: bool) -> str:
    """Why no op has FLOPs: the real cause, by the compute time it covers — graph replay
    without launching ops, ops without a formula, table ops without shapes."""
    parts = []
    if unc.share("graph_replay"):
        parts.append(
            f"{unc.share('graph_replay'):.0%} of compute time is graph replay (GEMM/attention "
            "kernels of a CUDA/HIP graph launch with no op above them, so no shapes)"
        )
    formula_less = [o.name for o in unc.top_ops if o.why == "op_without_formula"]
    if formula_less:
        parts.append(
            f"{unc.share('op_without_formula'):.0%} of compute time is in GEMM/attention "
            f"ops without a FLOP formula ({', '.join(formula_less[:3])})"
        )
    nulls = sorted({(g["name"], g["note"]) for g in groups if g["n_null"]})
    if nulls:
        parts.append(
            "table ops without their FLOPs: "
            + "; ".join(f"{n}: {advice(w, shapes)}" for n, w in nulls[:3])
        )
    if not parts and not shapes and not groups:
        parts.append(
            "no GEMM, convolution or attention op in the window, and shapes were not "
            "recorded (profile with record_shapes=True)"
        )
    return "; ".join(parts) or "no GEMM, convolution or attention op in the window"
