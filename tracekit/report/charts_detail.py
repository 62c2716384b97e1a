"""The report's charts of one part of a step: memory (per rank, and the allocator's
timeline), regions (the icicle and the rank heat map) and the step model's critical path.
Vega-Lite specs from the typed report; no figure computed here."""

from __future__ import annotations

from typing import Any

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.schema import Region, Report, StepModelBlock
from tracekit.report.vega import (
    Chart,
    _layered,
    _n,
    _num,
    _o,
    _path_color,
    _q,
    _spec,
    _zoom,
)


def _level(report: Report, name: str) -> Any:
    return next((lv for lv in report.levels or [] if lv.level == name), None)


def chart_memory(report: Report) -> Chart | None:
    mem = _level(report, "memory")
    rows, caps = [], []
    for r in (mem.metrics if mem else {}).get("ranks") or []:
        for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
            if _num(r.get(key)):
                rows.append(
                    {"rank": f"rank {r['rank']}", "figure": F.label(key), "GB": r[key] / 1e9}
                )
        if _num(r.get("capacity_bytes")):
            caps.append(
                {"rank": f"rank {r['rank']}", "figure": "capacity", "GB": r["capacity_bytes"] / 1e9}
            )
    pred = mem.predicted if mem else None
    eq = [
        {"rank": "equation", "figure": fig.label, "GB": getattr(pred, fig.key) / 1e9}
        for fig in (F.STATES_BYTES, F.ACTIVATIONS_BYTES)
        if _num(getattr(pred, fig.key, None))
    ]
    if not rows and not eq:
        return None
    x = _n("rank", None, sort=None)
    y = _q("GB", "GB", stack=None)
    layers = []
    if rows:
        layers.append(
            {
                "data": {"values": rows},
                "mark": {"type": "bar", "tooltip": True},
                "encoding": {"x": x, "xOffset": _n("figure", ""), "y": y,
                             "color": _n("figure", "")},
            }
        )  # fmt: skip
    if eq:  # the equation's two terms stacked: their sum is the predicted total
        layers.append(
            {
                "data": {"values": eq},
                "mark": {"type": "bar", "tooltip": True},
                "encoding": {"x": x, "y": _q("GB", "GB", stack="zero"),
                             "color": _n("figure", "")},
            }
        )  # fmt: skip
    if caps:
        layers.append(
            {
                "data": {"values": caps},
                "mark": {"type": "tick", "thickness": 3, "color": "#000", "tooltip": True},
                "encoding": {"x": _n("rank", None, sort=None), "y": y},
            }
        )
    spec = _layered(layers)
    return Chart(
        "memory",
        "Memory peak against capacity and the memory equation",
        spec,
        "Black tick: the device's capacity. 'equation': the predicted model states "
        "(16Ψ, sharded) and activations, where job.json gives them.",
    )


def chart_memory_timeline(timeline: list[dict] | None) -> Chart | None:
    """The allocator's total over time per rank (`memory_timeline`: the trace's series the
    CLI adds beside the report when the trace has memory events)."""
    rows = [
        {"rank": f"rank {m['rank']}", "t_ms": m["t_ms"], "GB": m["allocated_bytes"] / 1e9}
        for m in timeline or []
        if _num(m.get("allocated_bytes")) is not None and _num(m.get("t_ms")) is not None
    ]
    if len(rows) < 2:
        return None
    return Chart(
        "memory_timeline",
        "Memory allocated over the trace",
        _spec(
            rows,
            mark={"type": "line", "interpolate": "step-after", "tooltip": True},
            params=_zoom("x"),
            encoding={
                "x": _q("t_ms", "ms from the trace's start"),
                "y": _q("GB", "allocated (GB)"),
                "color": _n("rank", ""),
            },
        ),
        "The allocator's total allocated, highest per span of the trace.",
    )


def charts_step_model(model: StepModelBlock | Any) -> list[Chart]:
    if not isinstance(model, StepModelBlock):
        return []
    cp = model.critical_path
    out = []
    kinds = [{"kind": k, "ms": v} for k, v in (cp.by_kind if cp else {}).items() if _num(v)]
    if kinds:
        out.append(
            Chart(
                "critical_path",
                "Critical path by kind",
                _spec(
                    kinds,
                    mark={"type": "bar", "tooltip": True},
                    encoding={
                        "y": _n("kind", None, sort="-x"),
                        "x": _q("ms", "ms on the critical path"),
                        "color": _n("kind", "", scale=_path_color([k["kind"] for k in kinds])),
                    },
                ),
                f"measured step {units.fmt(model.measured_step_ms, 'ms')}, "
                f"replayed {units.fmt(model.replayed_step_ms, 'ms')}, "
                f"replay error {units.fmt(model.replay_error, 'fraction')}.",
            )
        )
    segs = [
        {
            "rank": f"rank {s.rank}",
            "kind": s.kind,
            "name": s.name,
            "start": s.start_ms,
            "end": s.start_ms + s.ms,
        }
        for s in (cp.segments if cp else [])
        if _num(s.start_ms) is not None and _num(s.ms) is not None
    ]
    if segs:
        out.append(
            Chart(
                "critical_path_timeline",
                "The critical path, segment by segment",
                _spec(
                    segs,
                    mark={"type": "bar", "tooltip": True},
                    params=_zoom("x"),
                    encoding={
                        "y": _n("rank", None, sort=None),
                        "x": _q("start", "ms"),
                        "x2": {"field": "end"},
                        "color": _n(
                            "kind",
                            "",
                            scale=_path_color(list(dict.fromkeys(s["kind"] for s in segs))),
                        ),
                    },
                ),
                "Each bar a segment of the path that decides the step's length.",
            )
        )
    return out


def chart_regions(report: Report, limit: int = 40) -> Chart | None:
    """An icicle of device time by region (`regions[]`): each region a bar as wide as its
    device time per step, its children side by side beneath it, the heaviest first. Only
    the layout is computed here (where each bar starts), from the report's figures."""
    regions = [g for g in report.regions or [] if _num(g.device_ms_per_step)]
    if not regions:
        return None
    top = regions[:limit]
    paths = {tuple(g.path) for g in top}
    kids: dict[tuple, list[Region]] = {}
    for g in top:  # the report's order: the heaviest first
        up = tuple(g.path[:-1])
        while up and up not in paths:
            up = up[:-1]
        kids.setdefault(up, []).append(g)
    rows: list[dict] = []

    def place(up: tuple, x0: float, depth: int) -> None:
        x = x0
        for g in kids.get(up, []):
            ms = g.device_ms_per_step
            rows.append(
                {
                    "region": g.path[-1],
                    "path": " / ".join(g.path),
                    "kind": g.kind,
                    "depth": depth,
                    "x0": x,
                    "x1": x + ms,
                    "device_ms": ms,
                    "self_ms": g.device_self_ms_per_step,
                    "TFLOPs": g.achieved_tflops,
                }
            )
            place(tuple(g.path), x, depth + 1)
            x += ms

    place((), 0.0, 0)
    x_end = max(r["x1"] for r in rows)
    spec = _layered(
        [
            {
                "params": _zoom("x"),
                "mark": {"type": "rect", "stroke": "#fff", "tooltip": {"content": "data"}},
                "encoding": {
                    "x": _q("x0", "device time / step (ms)"),
                    "x2": {"field": "x1"},
                    "y": _o("depth", "depth"),
                    "color": _n("kind", "kind"),
                },
            },
            {  # a name on the bars wide enough to hold one
                "transform": [{"filter": f"datum.x1 - datum.x0 >= {0.05 * x_end!r}"}],
                "mark": {"type": "text", "align": "left", "dx": 3, "limit": 120},
                "encoding": {
                    "x": {"field": "x0", "type": "quantitative"},
                    "y": _o("depth", "depth"),
                    "text": {"field": "region"},
                },
            },
        ],
        data={"values": rows},
    )
    return Chart(
        "regions",
        "Regions: device time by region",
        spec,
        "Each bar a region (annotated range or nn.Module) as wide as the device time it "
        "launched per step, its children beneath it; mean over the ranks holding it.",
    )


def chart_region_ranks(report: Report, limit: int = 12) -> Chart | None:
    """A rank × region heat map of device time per step for the top regions."""
    regions = [g for g in report.regions or [] if g.device_ms_by_rank][:limit]
    rows = [
        {"region": " / ".join(g.path), "rank": int(r), "device_ms": v}
        for g in regions
        for r, v in g.device_ms_by_rank.items()
        if _num(v) is not None
    ]
    if len({r["rank"] for r in rows}) < 2:
        return None
    spec = _spec(
        rows,
        mark={"type": "rect", "tooltip": True},
        encoding={
            "x": _o("rank", "rank"),
            "y": _n("region", None, sort=None, axis={"labelLimit": 320}),
            "color": _q("device_ms", "device ms / step", scale={"scheme": "blues"}),
        },
    )
    return Chart(
        "region_ranks",
        "Regions across ranks",
        spec,
        "Device time per step of the top regions on each rank: a rank whose row stands out "
        "spends that region longer than the others.",
    )
