"""The report's run-level charts (breakdown, step times, bus bandwidth, exposed
communication, bubble, MFU, top ops) and `charts()`, every chart the page draws, in its
order. Vega-Lite specs from the typed report; no figure computed here."""

from __future__ import annotations

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.charts_detail import (
    _level,
    chart_memory,
    chart_memory_timeline,
    chart_region_ranks,
    chart_regions,
    charts_step_model,
)
from tracekit.report.schema import CollectiveRow, Report
from tracekit.report.vega import (
    Chart,
    _color,
    _layered,
    _n,
    _num,
    _o,
    _q,
    _spec,
    _zoom,
)


def chart_breakdown(report: Report) -> Chart | None:
    """Per rank, a step's time: idle, compute, exposed communication, other (the report's
    per-rank figures over its window, ÷ its steps)."""
    rows = []
    for r in report.ranks:
        steps = r.steps or 1
        window, busy = _num(r.window_ms), _num(r.busy_ms)
        comp, exp = _num(r.compute_ms), _num(r.exposed_comm_ms)
        if None in (window, busy, comp, exp):
            continue
        parts = {
            "compute": comp,
            "exposed communication": exp,
            "other": max(busy - comp - exp, 0.0),
            "idle": max(window - busy, 0.0),
        }
        for i, (part, ms) in enumerate(parts.items()):
            rows.append({"rank": f"rank {r.rank}", "part": part, "order": i, "ms": ms / steps})
    if not rows:
        return None
    return Chart(
        "breakdown",
        "Where a step goes, per rank",
        _spec(
            rows,
            mark={"type": "bar", "tooltip": True},
            encoding={
                "y": _n("rank", None, sort=None),
                "x": _q("ms", "ms per step", stack="zero"),
                "color": _n("part", "", scale=_color(list(dict.fromkeys(x["part"] for x in rows)))),
                "order": {"field": "order"},
            },
        ),
        "compute, communication no compute hides, other device work (memcpy, memset) and "
        "idle, from each rank's window ÷ its steps.",
    )


def chart_step_times(report: Report) -> Chart | None:
    rows = [
        {"rank": f"rank {s.rank}", "step": step, "ms": ms}
        for s in (report.samples.ranks if report.samples else [])
        for step, ms in zip(s.step, s.step_time_ms, strict=False)
        if _num(ms) is not None
    ]
    if not rows:
        return None
    mark = {"type": "line", "point": True, "tooltip": True}
    return Chart(
        "step_times",
        "Step time per step, per rank",
        _spec(
            rows,
            mark=mark,
            encoding={
                "x": _o("step", "ProfilerStep"),
                "y": _q("ms", F.STEP_TIME_MS.label + " (ms)"),
                "color": _n("rank", ""),
            },
        ),
        "A straggler is a line above the others; noise is a line that jumps.",
    )


def _coll_label(c: CollectiveRow) -> str:
    size = units.fmt(c.bytes, "bytes") if c.bytes is not None else "?"
    group = c.group_size or "?"
    return f"{c.name or '(unknown)'} {size} ×{group}"


def chart_busbw(report: Report) -> Chart | None:
    rows = []
    for c in report.collectives or []:
        n, kind = _num(c.bytes), c.name or "(unknown)"
        if not n:
            continue
        if _num(c.busbw_GBps) is not None:
            rows.append(
                {
                    "kind": kind,
                    "bytes": n,
                    "GBps": c.busbw_GBps,
                    "what": "measured",
                    "collective": _coll_label(c),
                }
            )
        if _num(c.predicted_busbw_GBps) is not None:
            rows.append(
                {
                    "kind": kind,
                    "bytes": n,
                    "GBps": c.predicted_busbw_GBps,
                    "what": "α-β model",
                    "collective": _coll_label(c),
                }
            )
    measured = [r for r in rows if r["what"] == "measured"]
    model = [r for r in rows if r["what"] != "measured"]
    if not measured:
        return None  # nothing measured to set beside the model
    x = _q("bytes", "message size (bytes)", scale={"type": "log"})
    y = _q("GBps", "bus bandwidth (GB/s)")
    layers = [
        {
            "data": {"values": measured},
            "params": _zoom(),
            "mark": {"type": "point", "filled": True, "size": 70, "tooltip": True},
            "encoding": {
                "x": x,
                "y": y,
                "color": _n("kind", "collective"),
                "shape": _n("what", ""),
            },
        }
    ]
    if model:
        layers.append(
            {
                "data": {"values": model},
                "mark": {"type": "line", "strokeDash": [4, 3], "point": True, "tooltip": True},
                "encoding": {"x": x, "y": y, "color": _n("kind", "collective")},
            }
        )
    spec = _layered(layers)
    return Chart(
        "busbw",
        "Bus bandwidth against message size, per collective",
        spec,
        "Points: measured (nccl-tests bus bandwidth of matched instances); dashed: the α-β "
        "model at the same sizes.",
    )


def chart_exposed(report: Report) -> Chart | None:
    rows = []
    for c in (report.collectives or [])[:15]:
        exp, wait = _num(c.exposed_ms), _num(c.exposed_wait_ms) or 0.0
        if not exp:
            continue
        label = _coll_label(c)
        rows.append({"collective": label, "part": "waiting for peers", "ms": wait})
        rows.append({"collective": label, "part": "transfer", "ms": max(exp - wait, 0.0)})
    if not rows:
        return None
    return Chart(
        "exposed",
        "Exposed communication by collective",
        _spec(
            rows,
            mark={"type": "bar", "tooltip": True},
            encoding={
                "y": _n("collective", None, sort="-x", axis={"labelLimit": 300}),
                "x": _q("ms", F.EXPOSED_MS.label + " (ms per step)", stack="zero"),
                "color": _n(
                    "part",
                    "",
                    scale={
                        "domain": ["transfer", "waiting for peers"],
                        "range": ["#e45756", "#b279a2"],
                    },
                ),
            },
        ),
        "The part of each collective's time no compute hides, per step (mean over ranks).",
    )


def chart_bubble(report: Report) -> Chart | None:
    scal = _level(report, "scaling")
    pipe = (scal.metrics if scal else {}).get("pipeline") or {}
    per = pipe.get("per_rank") or []
    if not per:
        return None
    rows = [
        {"stage": f"rank {p['rank']}", "bubble": p[F.BUBBLE_FRACTION.key], "what": "measured"}
        for p in per
        if _num(p.get(F.BUBBLE_FRACTION.key)) is not None
    ]
    pred = scal.predicted
    rules = [
        {"what": "formula (P−1)/(M+P−1)", "bubble": pred.predicted_bubble_fraction},
        {"what": "modeled (schedule replayed)", "bubble": pred.modeled_bubble_fraction},
    ]
    rules = [r for r in rules if _num(r["bubble"]) is not None]
    y = _q("bubble", "bubble (fraction of the step)", axis={"format": "%"})
    layers = [
        {
            "data": {"values": rows},
            "mark": {"type": "bar", "tooltip": True},
            "encoding": {
                "x": _n("stage", "stage (rank)", sort=None),
                "y": y,
                "color": {"value": "#4c78a8"},
            },
        }
    ]
    if rules:
        layers.append(
            {
                "data": {"values": rules},
                "mark": {"type": "rule", "strokeWidth": 2, "strokeDash": [6, 3], "tooltip": True},
                "encoding": {"y": y, "color": _n("what", "predicted")},
            }
        )
    spec = _layered(layers)
    return Chart(
        "bubble",
        "Pipeline bubble per stage: measured, formula, modeled",
        spec,
        f"{pipe.get('schedule', '?')} schedule, P={pipe.get('stages', '?')} stages, "
        f"M={pipe.get('microbatches', '?')} microbatches.",
    )


def chart_mfu(report: Report) -> Chart | None:
    comp = _level(report, "compute")
    rows = []
    for r in (comp.metrics if comp else {}).get("ranks") or []:
        for fig in (F.MFU, F.HFU):  # the level's per-rank rows: JSON values
            if _num(r.get(fig.key)) is not None:
                rows.append({"rank": f"rank {r['rank']}", "figure": fig.label, "value": r[fig.key]})
    if not rows:
        return None
    summary = report.summary
    dtypes = units.fmt(summary.flops_by_dtype, "map", of="flops")
    peaks = summary.peak_flops_by_dtype
    return Chart(
        F.MFU.key,
        "MFU and HFU per rank",
        _spec(
            rows,
            mark={"type": "bar", "tooltip": True},
            encoding={
                "x": _n("rank", None, sort=None),
                "xOffset": _n("figure", ""),
                "y": _q("value", "of peak", axis={"format": "%"}),
                "color": _n("figure", ""),
            },
        ),
        f"Executed FLOPs per step by dtype: {dtypes}. Peaks: "
        f"{units.fmt(peaks, 'map', of='flops_per_s')}.",
    )


def chart_ops(report: Report) -> Chart | None:
    ops = [o for o in (report.top_ops or [])[:12] if _num(o.achieved_tflops) is not None]
    if not ops:
        return None
    rows = [
        {
            "op": f"{o.name} ({o.dtype or '?'})",
            "TFLOPs": o.achieved_tflops,
            "of_peak": o.op_peak_fraction,
        }
        for o in ops
    ]
    peaks = [
        {"peak": f"{k} peak", "TFLOPs": v / 1e12}
        for k, v in (report.summary.peak_flops_by_dtype or {}).items()
        if _num(v)
    ]
    x = _q("TFLOPs", "achieved TFLOP/s")
    layers = [
        {
            "data": {"values": rows},
            "mark": {"type": "bar", "tooltip": True},
            "encoding": {
                "y": _n("op", None, sort="-x", axis={"labelLimit": 360}),
                "x": x,
                "color": {"value": "#4c78a8"},
            },
        }
    ]
    if peaks:
        layers.append(
            {
                "data": {"values": peaks},
                "mark": {"type": "rule", "strokeWidth": 2, "strokeDash": [6, 3], "tooltip": True},
                "encoding": {"x": x, "color": _n("peak", "")},
            }
        )
    spec = _layered(layers)
    return Chart(
        "ops",
        "Top ops: achieved TFLOP/s against peak",
        spec,
        "Counted FLOPs ÷ device time per op; dashed: the device's peak per dtype.",
    )


def charts(report: Report, memory_timeline: list[dict] | None = None) -> list[Chart]:
    """Every chart the report has data for, in the order of the page (`memory_timeline`:
    the allocator's series, `tracekit.report.export.memory_timeline`, not in the report)."""
    made = [
        chart_breakdown(report),
        chart_step_times(report),
        chart_busbw(report),
        chart_exposed(report),
        chart_bubble(report),
        chart_mfu(report),
        chart_ops(report),
        chart_memory(report),
        chart_memory_timeline(memory_timeline),
        chart_regions(report),
        chart_region_ranks(report),
    ]
    return [c for c in made if c] + charts_step_model(report.step_model)
