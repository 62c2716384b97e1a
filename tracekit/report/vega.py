"""The Vega-Lite vocabulary of tracekit's charts: a `Chart`, the spec helpers (data,
fields, zoom, colours) and vega-embed's JavaScript, bundled once per version. Used by
the report's page (`tracekit.report.html`) and the gate's (`tracekit.gate.html`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit.stepmodel.replay import COLOURS as PATH_COLOURS

PALETTE = {
    "idle": "#bab0ac",
    "compute": "#4c78a8",
    "exposed communication": "#e45756",
    "other": "#f58518",
    "waiting": "#b279a2",
    "host": "#72b7b2",
    "communication": "#e45756",
}


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if v == v and abs(v) != float("inf") else None


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
