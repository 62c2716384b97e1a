"""The report as one self-contained HTML page (`analyze --format html`): the four levels
with their verdicts, measured beside predicted; the charts; the findings with their
evidence, remedy and a link to their place in the Perfetto export.

Drawn from the typed report only (labels and units from `tracekit.model.figures`, values
written by `tracekit.report.units`); it computes no figure. The charts are Vega-Lite
specs drawn by vega-embed, whose JavaScript comes from `vl-convert-python` (bundled
once per version into the user cache) and is inlined with the styles: the page makes no
request at all, and its Content-Security-Policy forbids any (benchmarks/html_plotting.py
measured the choice; DESIGN.md says why).

Every string from a trace (kernel, op, collective names, paths, notes) is escaped: in
the page as HTML text (`esc`); in a chart as JSON data, which Vega draws as SVG text and
whose tooltips escape HTML.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.render import header, health_lines, healthy_text, level_rows
from tracekit.report.schema import CollectiveRow, Region, Report, StepModelBlock
from tracekit.stepmodel.replay import COLOURS as PATH_COLOURS

LEVELS = ("memory", "compute", "communication", "scaling")
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'unsafe-inline'; img-src data:; font-src data:"
)
PALETTE = {
    "idle": "#bab0ac",
    "compute": "#4c78a8",
    "exposed communication": "#e45756",
    "other": "#f58518",
    "waiting": "#b279a2",
    "host": "#72b7b2",
    "communication": "#e45756",
}


def esc(value: Any) -> str:
    """Text for HTML (element content or a quoted attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def _json_for_script(obj: Any) -> str:
    """JSON safe inside <script>: no `</script>`, `<!--`, or line separators survive."""
    text = json.dumps(obj, allow_nan=False, default=str)
    for ch, rep in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, rep)
    return text


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if v == v and abs(v) != float("inf") else None


@dataclass(frozen=True)
class Link:
    """A finding's place in the Perfetto export: the URL and what it points at."""

    url: str
    what: str


# ---------------------------------------------------------------- vega-embed


def vega_bundle() -> str:
    """vega, vega-lite and vega-embed as one JavaScript module (vl-convert bundles it in
    ~6 s; kept in the user cache per vl-convert version)."""
    import platformdirs
    import vl_convert

    version = getattr(vl_convert, "__version__", "unknown")
    cache = Path(platformdirs.user_cache_dir("tracekit")) / f"vega-embed-{version}.js"
    try:
        return cache.read_text()
    except OSError:
        pass
    text = vl_convert.javascript_bundle()
    try:
        from tracekit.atomic import write_text

        cache.parent.mkdir(parents=True, exist_ok=True)
        write_text(cache, text)
    except OSError:
        pass  # no cache: bundled again next time
    return text


@dataclass
class Chart:
    key: str  # a stable id: the browser test counts charts by it
    title: str
    spec: dict[str, Any]
    note: str = ""


def _layered(layers: list[dict], **rest: Any) -> dict[str, Any]:
    """A chart of layers, each with its own data."""
    return {"width": "container", "height": 240, "layer": layers, **rest}


def _spec(data: list[dict], **rest: Any) -> dict[str, Any]:
    return {
        "data": {"values": data},
        "width": "container",
        "height": 240,
        **rest,
    }


def _zoom(*encodings: str) -> list[dict[str, Any]]:
    """Drag to pan, wheel to zoom (on the continuous axes named, default both)."""
    select: Any = {"type": "interval", "encodings": list(encodings)} if encodings else "interval"
    return [{"name": "zoom", "select": select, "bind": "scales"}]


def _q(field: str, title: str, **kw: Any) -> dict[str, Any]:
    return {"field": field, "type": "quantitative", "title": title, **kw}


def _n(field: str, title: str, **kw: Any) -> dict[str, Any]:
    return {"field": field, "type": "nominal", "title": title, **kw}


def _o(field: str, title: str, **kw: Any) -> dict[str, Any]:
    return {"field": field, "type": "ordinal", "title": title, **kw}


def _color(domain: list[str]) -> dict[str, Any]:
    return {"domain": domain, "range": [PALETTE.get(d, "#54a24b") for d in domain]}


def _path_color(domain: list[str]) -> dict[str, Any]:
    """The critical path's kinds in their one colour each (tui's timeline uses the same)."""
    return {"domain": domain, "range": [PATH_COLOURS.get(d, "#54a24b") for d in domain]}


# ---------------------------------------------------------------- the charts


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


def _level(report: Report, name: str) -> Any:
    return next((lv for lv in report.levels or [] if lv.level == name), None)


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


# ---------------------------------------------------------------- the page


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _badge(verdict: str) -> str:
    v = verdict if verdict in ("ok", "info", "warning", "critical", "unknown") else "other"
    return f"<span class='badge {v}'>{esc(verdict)}</span>"


def _levels_html(report: Report) -> str:
    rows = level_rows(report)
    cards = []
    for name in LEVELS:
        lv = report.level(name)
        if lv is None:
            continue
        mine, on = [], False
        for level, fig, m, p, _v in rows:
            if level:
                on = level == name
            if on:  # a part keeps its indent (the exposed communication's two groups)
                depth = (len(fig) - len(fig.lstrip())) // 2
                mine.append(("\u2003" * depth + fig.strip(), m, p))
        why = f"<p class='why'>unknown: {esc(lv.verdict_reason)}</p>" if lv.verdict_reason else ""
        notes = "".join(f"<li>{esc(n)}</li>" for n in lv.notes)
        cards.append(
            f"<section class='level' id='level-{name}'><h3>{esc(name)} {_badge(lv.verdict)}</h3>"
            + why
            + _table(("figure", "measured", "predicted"), mine, "figs")
            + (f"<ul class='notes'>{notes}</ul>" if notes else "")
            + "</section>"
        )
    return "<div class='levels'>" + "".join(cards) + "</div>"


def _figures(v: Any) -> str:
    """A finding's measured or predicted: a mapping of figures in words and units."""
    if isinstance(v, dict):
        return "; ".join(
            f"{F.label(k)} {units.fmt(x, F.unit(k)) if F.get(k) else _value(x)}"
            for k, x in v.items()
            if not isinstance(x, dict | list)
        )
    return _value(v)


def _value(v: Any) -> str:
    if isinstance(v, float):
        return units.sig(v)
    if isinstance(v, list):
        return ", ".join(_value(x) for x in v)
    return "" if v is None else str(v)


def _word(key: str) -> str:
    """A column or row name: the figure's label where the key is a figure."""
    return F.label(key) if F.get(key) else key.replace("_", " ")


def _cell(key: str, value: Any) -> str:
    """A value in its figure's unit where the key is a figure (bare: the header names it)."""
    fig = F.get(key)
    if fig and fig.unit not in ("map", "text") and isinstance(value, int | float):
        return units.fmt(value, fig.unit)
    return _value(value)


def _details_html(details: dict[str, Any]) -> str:
    """A finding's evidence as tables: a list of rows as a table, a mapping as
    key–value rows; never raw JSON."""
    parts, scalars = [], []
    for key, val in details.items():
        if isinstance(val, list) and val and all(isinstance(x, dict) for x in val):
            cols = list(
                dict.fromkeys(k for x in val for k in x if not isinstance(x[k], dict | list))
            )
            parts.append(
                f"<div class='ev'><b>{esc(_word(key))}</b>"
                + _table(
                    [_word(c) for c in cols], ([_cell(c, x.get(c)) for c in cols] for x in val[:12])
                )
                + "</div>"
            )
        elif isinstance(val, dict):
            flat = [
                (_word(k), _cell(k, v)) for k, v in val.items() if not isinstance(v, dict | list)
            ]
            flat += [
                (f"{_word(k)}: {_word(k2)}", _cell(k2, v2))
                for k, v in val.items()
                if isinstance(v, dict)
                for k2, v2 in v.items()
                if not isinstance(v2, dict | list)
            ]
            parts.append(
                f"<div class='ev'><b>{esc(_word(key))}</b>" + _table(("", ""), flat) + "</div>"
            )
        else:
            scalars.append((_word(key), _cell(key, val)))
    if scalars:
        parts.insert(0, "<div class='ev'>" + _table(("", ""), scalars) + "</div>")
    return "".join(parts)


def _findings_html(report: Report, links: list[Link | None] | None, how: str) -> str:
    if not report.findings:
        verdicts = {lv.level: lv.verdict for lv in report.levels or []}
        return f"<p>None — {esc(healthy_text(verdicts))}.</p>"
    out = []
    for i, f in enumerate(report.findings):
        link = links[i] if links and i < len(links) else None
        impact = f" · {units.fmt(f.impact_ms, 'ms')} per step" if f.impact_ms else ""
        meas = f"measured {esc(_figures(f.measured))}" if f.measured is not None else ""
        pred = f" · predicted {esc(_figures(f.predicted))}" if f.predicted is not None else ""
        go = (
            f"<p class='perfetto'><a href='{esc(link.url)}' target='_blank' "
            f"rel='noopener noreferrer'>open in Perfetto</a> at {esc(link.what)}</p>"
            if link
            else f"<p class='perfetto'>{esc(how)}</p>"
        )
        out.append(
            f"<article class='finding {esc(f.severity)}' id='finding-{esc(f.code)}-{i}'>"
            f"<h3>{_badge(f.severity)} <code>{esc(f.code)}</code> {esc(f.kind)}{esc(impact)}</h3>"
            f"<p class='title'>{esc(f.title)}</p>"
            f"<p class='meta'>level {esc(f.level)} · ranks {esc(units.ranks(f.ranks))}"
            f"{' · ' if meas else ''}{meas}{pred}</p>"
            f"<p class='remedy'><b>Remedy:</b> {esc(f.remedy)}</p>"
            f"{_remedies_html(f.remedies)}"
            f"{go}<details open><summary>evidence</summary>{_details_html(f.details)}</details>"
            "</article>"
        )
    return "".join(out)


def _remedies_html(remedies: list) -> str:
    """The finding's candidate changes replayed, best first."""
    if not remedies:
        return ""
    rows = [
        (r.change, units.fmt(r.predicted_step_ms, "ms"), units.fmt(r.saved_ms, "ms"))
        for r in remedies
    ]
    return (
        "<div class='ev'><b>replayed</b>"
        + _table(("change", "predicted step", "saved"), rows)
        + "</div>"
    )


def _uncounted_html(report: Report) -> str:
    frac = report.summary.uncounted_compute_fraction
    tops = [msgspec.to_builtins(t) for t in report.top_uncounted_ops or []]
    if frac is None and not tops:
        return ""
    out = "<section id='uncounted'><h2>Compute tracekit cannot count</h2>"
    if frac is not None:
        label = F.UNCOUNTED_COMPUTE_FRACTION.label
        out += f"<p>{esc(label)}: <b>{esc(units.fmt(frac, 'fraction'))}</b></p>"
    if tops:  # every column the rows have, in their order
        cols = list(dict.fromkeys(k for t in tops for k in t))
        out += _table(cols, ([_value(t.get(c)) for c in cols] for t in tops[:15]))
    return out + "</section>"


def _chart_divs(items: list[Chart]) -> str:
    return "".join(
        f"<figure class='chart' data-chart='{esc(c.key)}'><figcaption>{esc(c.title)}"
        f"</figcaption><div class='vega' id='chart-{esc(c.key)}'></div>"
        f"<p class='caption'>{esc(c.note)}</p></figure>"
        for c in items
    )


def _script(items: list[Chart]) -> str:
    specs = _json_for_script({f"chart-{c.key}": c.spec for c in items})
    return (
        "<script type='module'>\n" + vega_bundle() + "\n;\n"
        f"const specs = {specs};\n"
        "const opts = {actions: false, renderer: 'svg'};\n"
        "Promise.all(Object.entries(specs).map(([id, spec]) =>\n"
        "  vegaEmbed('#' + id, spec, opts).catch(e => {\n"
        "    document.getElementById(id).textContent = 'chart failed: ' + e; throw e; })))\n"
        "  .then(() => document.body.dataset.charts = 'drawn');\n"
        "</script>"
    )


STYLE = "".join(
    (
        "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;"
        "color:#222;background:#fafafa}",
        "main{max-width:1200px;margin:0 auto;padding:16px 24px}",
        "h1{font-size:20px;margin:8px 0}",
        "h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}",
        "h3{font-size:15px;margin:4px 0 6px}",
        ".sub{color:#555;margin:2px 0}",
        ".warn{color:#a15c00}",
        ".levels{display:grid;grid-template-columns:repeat(auto-fit,minmax(270px,1fr));gap:12px}",
        ".level,.finding,.chart{background:#fff;border:1px solid #e2e2e2;border-radius:6px;"
        "padding:10px 12px;margin:0}",
        "table{border-collapse:collapse;font-size:13px;width:100%}",
        "th,td{text-align:left;padding:2px 6px;border-bottom:1px solid #f0f0f0;vertical-align:top}",
        "td:not(:first-child){font-variant-numeric:tabular-nums}",
        ".badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;"
        "color:#fff;background:#888}",
        ".badge.ok{background:#2e7d32}",
        ".badge.info{background:#1565c0}",
        ".badge.warning{background:#ef6c00}",
        ".badge.critical{background:#c62828}",
        ".badge.unknown{background:#757575}",
        ".charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px}",
        ".chart figcaption{font-weight:600;margin-bottom:4px}",
        ".vega{width:100%}",
        ".caption{color:#666;font-size:12px;margin:4px 0 0}",
        ".finding{margin:10px 0}",
        ".finding.critical{border-left:4px solid #c62828}",
        ".finding.warning{border-left:4px solid #ef6c00}",
        ".finding.info{border-left:4px solid #1565c0}",
        ".title{font-weight:600}",
        ".meta{color:#555;margin:2px 0}",
        ".ev{margin:6px 0;overflow-x:auto}",
        ".notes{color:#555;font-size:12px;padding-left:18px}",
        "code{font-size:13px}",
    )
)


def page(title: str, body: str, items: list[Chart]) -> str:
    """The whole document: CSP, styles and scripts inlined."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body><main>"
        + body
        + "</main>"
        + (_script(items) if items else "")
        + "</body></html>\n"
    )


def to_html(
    report: Report,
    links: list[Link | None] | None = None,
    how: str = "",
    memory_timeline: list[dict] | None = None,
) -> str:
    """The report as a self-contained page; `links`: each finding's place in the Perfetto
    export (`tracekit.report.export`), `how`: the line that says how to get one;
    `memory_timeline`: the allocator's series (`export.memory_timeline`), drawn beside it."""
    head = header(report)
    body = f"<h1>tracekit · {esc(head[0])}</h1>" + "".join(
        f"<p class='sub'>{esc(h)}</p>" for h in head[1:]
    )
    body += "".join(f"<p class='warn'>{esc(w)}</p>" for w in health_lines(report))
    items: list[Chart] = []
    if report.full:
        body += "<h2>The four levels</h2>" + _levels_html(report)
        items = charts(report, memory_timeline)
        body += "<h2>Charts</h2><div class='charts'>" + _chart_divs(items) + "</div>"
        body += _uncounted_html(report)
        body += f"<h2>Findings</h2>{_findings_html(report, links, how)}"
        if report.collectives:
            from tracekit.report.render import COLLECTIVE_COLUMNS

            body += "<h2>Collectives</h2>" + _table(
                [t for _, t, _ in COLLECTIVE_COLUMNS],
                (
                    [fmt(getattr(c, k)) for k, _, fmt in COLLECTIVE_COLUMNS]
                    for c in report.collectives[:20]
                ),
            )
        if report.top_kernels:
            body += "<h2>Top kernels</h2>" + _table(
                ("kernel", "per step", "ms per step"),
                (
                    [
                        k.name,
                        units.fmt(k.count_per_step, "count"),
                        units.fmt(k.time_ms_per_step, "ms"),
                    ]
                    for k in report.top_kernels[:15]
                ),
            )
    else:
        items = [c for c in [chart_breakdown(report)] if c]
        body += "<h2>Charts</h2><div class='charts'>" + _chart_divs(items) + "</div>"
    return page(f"tracekit · {report.run.path}", body, items)
