"""Formatting of report values for the screens, through the report's own figures and
units: a key that is a report figure (`tracekit.model.figures`) takes its label and unit
from it — also where a level block names it differently (`peak_fraction` is the worst
rank's peak memory) — and every value is written by `tracekit.report.units`, as text,
Markdown and the gate write it. Keys that are not figures (the levels' supporting tables)
take their unit from their name (`_fraction` → %, `_bytes` → bytes, `_ms` → ms …), so
keys the report gains later show up formatted. The report is the typed one
(`tracekit.report.schema`): a screen that lists every figure of a block walks the
Struct's fields (`fields`, `table_rows`), so fields the schema gains show up too. No
Textual import: the tests use it alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import msgspec

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.schema import UNSET, Level

# a report table's row (`table_rows`) keeps its Struct under this key, beside the values
ITEM = "item"

PERCENT_KEYS = (F.MFU.key, F.HFU.key, F.GEMM_EFFICIENCY.key, "efficiency")


def fields(item: msgspec.Struct) -> Iterator[tuple[str, Any]]:
    """(JSON key, value) of each field of a report Struct, in the schema's order — what
    the JSON report writes; a field left unset is left out."""
    for f in msgspec.structs.fields(item):
        v = getattr(item, f.name)
        if v is not UNSET:
            yield f.encode_name, v


def table_rows(items: list) -> list[dict]:
    """A report table (its rows Structs) as a sortable table's rows: each field's value
    under its JSON key, the Struct itself under `ITEM`."""
    return [{**dict(fields(it)), ITEM: it} for it in items]


def scalar_keys(rows: list[dict], skip: tuple[str, ...] = ()) -> list[str]:
    """The keys of the rows' scalar values, first seen first (nested values and the
    Struct left out)."""
    keys: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in keys and k != ITEM and k not in skip and _scalar(v):
                keys.append(k)
    return keys


def _scalar(v: Any) -> bool:
    return not isinstance(v, dict | list | tuple | msgspec.Struct)


def as_json(block: msgspec.Struct | None) -> dict[str, Any]:
    """A block's figures as the JSON report writes them (their keys and plain values),
    for the pages that list every figure generically."""
    return msgspec.to_builtins(block) if block is not None else {}


@cache
def _level_figures() -> dict[tuple[str, str, str], F.Figure]:
    """(level, "measured" | "predicted", JSON key) → the figure that key is."""
    from tracekit.report import schema as S

    out = {}
    for level, cls in S.LEVEL_TYPES.items():
        for side in ("measured", "predicted"):
            block = next(f for f in msgspec.structs.fields(cls) if f.name == side).type
            for f in msgspec.structs.fields(block):
                fig = _figure_of(f.type)
                if fig is not None:
                    out[(level, side, f.encode_name)] = fig
    return out


def _figure_of(tp: Any) -> F.Figure | None:
    """The figure an annotated schema type carries (`Figure.type`), if any."""
    for arg in getattr(tp, "__metadata__", ()) or ():
        extra = getattr(arg, "extra", None) or {}
        if "fig" in extra:
            return extra["fig"]
    for inner in getattr(tp, "__args__", ()) or ():
        fig = _figure_of(inner)
        if fig is not None:
            return fig
    return None


def figure(path: tuple[str, ...], level: str | None = None, side: str | None = None):
    """The report figure a key path names, if it is one."""
    if level and side and len(path) == 1:
        fig = _level_figures().get((level, side, path[0]))
        if fig is not None:
            return fig
    return F.get(path[0]) if len(path) == 1 else None


def unit_of(path: tuple[str, ...]) -> str:
    """The unit of a (possibly nested) key path: a figure's own, else the innermost key
    whose name says one."""
    fig = F.get(path[-1]) if path else None
    if fig is not None and fig.unit != "map":
        return fig.unit
    if fig is not None and fig.unit == "map":
        return fig.of or ""
    for key in reversed(path):
        k = key.lower()
        if k.endswith("_fraction") or k == "fraction" or k in PERCENT_KEYS:
            return "fraction"
        if k.endswith("efficiency"):
            return "fraction"
        if k.endswith("_bytes") or k == "bytes":
            return "bytes"
        if k.endswith("_gbps"):
            return "GBps"
        if k.endswith("tflops"):
            return "tflops"
        if k.endswith("flops_per_s"):
            return "flops_per_s"
        if "flops" in k:
            return "flops"
        if k.endswith("_ms") or k.startswith("ms_"):
            return "ms"
        if k.endswith("_ns"):
            return "ns"
        if k.endswith("_us"):
            return "us"
        if k.endswith("_s") and not k.endswith("_ranks"):
            return "s"
    return ""


def fmt(v: Any, unit: str = "") -> str:
    """One value as the screens show it ("—" for a null), written by the units module."""
    if isinstance(v, list | tuple) and v and not all(not isinstance(x, dict | list) for x in v):
        return f"{len(v)} entries"
    return units.fmt(v, unit or None, of=unit or None)


def fmt_key(key: str, v: Any) -> str:
    return fmt(v, unit_of((key,)))


def label(path: tuple[str, ...], level: str | None = None, side: str | None = None) -> str:
    """A key path in words: the figure's label where the path is one."""
    fig = figure(path, level, side)
    if fig is not None:
        return fig.label
    return " · ".join(p.replace("_", " ") for p in path)


def leaves(d: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(key path, value) of every figure in a nested dict; lists are figures themselves."""
    if isinstance(d, dict):
        for k, v in d.items():
            yield from leaves(v, (*path, str(k)))
    else:
        yield path, d


def gap(measured: Any, predicted: Any, unit: str) -> str:
    """Measured beside predicted: points for fractions, a ratio otherwise."""
    return units.gap(measured, predicted, "fraction" if unit in ("fraction", "pct") else unit)


def level_rows(level: Level) -> list[dict]:
    """One row per figure of a level: the measured keys in report order, then the predicted
    ones that have no measured twin. Each row keeps the raw values beside the text."""
    name = level.level
    measured = dict(leaves(as_json(level.measured)))
    predicted = dict(leaves(as_json(level.predicted)))
    rows = []
    for path in [*measured, *(p for p in predicted if p not in measured)]:
        m, p = measured.get(path), predicted.get(path)
        side = "measured" if path in measured else "predicted"
        fig = figure(path[:1], name, side)
        unit = unit_of(path) if fig is None else (fig.of or "") if fig.unit == "map" else fig.unit
        rows.append(
            {
                "level": name,
                "path": path,
                "label": label(path, name, side) if len(path) == 1 else _nested_label(path, fig),
                "measured": m,
                "predicted": p,
                "has_measured": path in measured,
                "has_predicted": path in predicted,
                "measured_text": fmt(m, unit) if path in measured else "",
                "predicted_text": fmt(p, unit) if path in predicted else "",
                "gap": gap(m, p, unit),
            }
        )
    return rows


def _nested_label(path: tuple[str, ...], fig: F.Figure | None) -> str:
    """A key inside a figure's mapping (`flops_by_dtype` → `fp32`): the figure's label,
    then the key ("FLOPs / step by dtype · fp32")."""
    if fig is None:
        return label(path)
    return " · ".join([fig.label, *path[1:]])


def ms(ns: int | float | None) -> str:
    return units.fmt(ns, "ns")


# ---------------------------------------------------------------- the overview's panels

# Each level's key figures on the overview, as (measured figure, predicted figure): the
# figures' keys (`tracekit.model.figures`), paired as the text report's levels table pairs
# them (`tracekit.report.render.LEVEL_ROWS`); the level's page shows every figure.
KEY_FIGURES: dict[str, tuple[tuple[str | None, str | None], ...]] = {
    "memory": (
        (F.MAX_PEAK_MEMORY_FRACTION.key, None),
        (F.PEAK_MEMORY_BYTES.key, F.PREDICTED_MEMORY_BYTES.key),
        ("capacity_bytes", None),
    ),
    "compute": (
        (F.MFU.key, None),
        (F.MODEL_FLOPS_PER_STEP.key, F.PREDICTED_FLOPS_PER_STEP.key),
        (F.IDLE_FRACTION.key, None),
    ),
    "communication": (
        (F.EXPOSED_COMM_FRACTION.key, F.PREDICTED_EXPOSED_COMM_FRACTION.key),
        (F.COMM_WAIT_FRACTION.key, None),
        (F.COMM_OVERLAP_FRACTION.key, None),
    ),
    "scaling": (
        (F.BUBBLE_FRACTION.key, F.PREDICTED_BUBBLE_FRACTION.key),
        (None, F.MODELED_BUBBLE_FRACTION.key),
        (F.STRAGGLER_RANKS.key, None),
    ),
}
LEVEL_ORDER = tuple(KEY_FIGURES)


@cache
def _json_keys() -> dict[tuple[str, str, str], str]:
    """(level, side, figure key) → the JSON key the level block writes it under."""
    return {(lv, side, fig.key): key for (lv, side, key), fig in _level_figures().items()}


def key_rows(level: Level) -> list[dict]:
    """A level's key figures, measured beside predicted, labelled and written as the report
    writes them. A figure the block lacks (left unset) shows as null. The blocks' attributes
    are the figures' keys (`tracekit.report.schema`)."""
    name = level.level
    rows = []
    for mkey, pkey in KEY_FIGURES.get(name, ()):
        row: dict[str, Any] = {"level": name, "measured_text": "", "predicted_text": ""}
        for side, key in (("measured", mkey), ("predicted", pkey)):
            if key is None:
                continue
            fig = F.get(key)
            value = getattr(getattr(level, side), key, None)
            value = None if value is UNSET else value
            unit = (fig.of or "") if fig.unit == "map" else fig.unit
            row[side] = value
            row[f"{side}_key"] = _json_keys().get((name, side, key), key)
            row[f"{side}_text"] = fmt(value, unit)
            row.setdefault("label", fig.label)
        rows.append(row)
    return rows


def verdict_word(verdict: str | None) -> str:
    """A level's verdict as the overview shows it: OK, WARNING, CRITICAL."""
    return (verdict or "—").upper()
