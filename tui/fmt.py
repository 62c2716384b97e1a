"""Formatting of report values for the screens: the unit is read from the key's name
(`_fraction` → %, `_bytes` → GB, `_ms` → ms …), so keys the report gains later show up
formatted without a change here. No Textual import: the tests use it alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

PERCENT_KEYS = ("mfu", "hfu", "gemm_efficiency", "efficiency")


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def unit_of(path: tuple[str, ...]) -> str:
    """The unit of a (possibly nested) key path: the innermost key naming one wins."""
    for key in reversed(path):
        k = key.lower()
        if k.endswith("_fraction") or k == "fraction" or k in PERCENT_KEYS:
            return "pct"
        if k.endswith("efficiency"):
            return "pct"
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
    """One value as the screens show it ("—" for a null)."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list | tuple):
        if not v:
            return "none"
        if all(not isinstance(x, dict | list) for x in v):
            return ", ".join(fmt(x, unit) for x in v)
        return f"{len(v)} entries"
    if isinstance(v, dict):
        return ", ".join(f"{k} {fmt(x, unit)}" for k, x in v.items() if not isinstance(x, dict))
    if not _is_num(v):
        return str(v)
    if unit == "pct":
        return f"{100 * v:.1f}%"
    if unit == "bytes":
        return _si(v, "B")
    if unit == "GBps":
        return f"{v:,.2f} GB/s"
    if unit == "tflops":
        return f"{v:,.2f} TFLOP/s"
    if unit == "flops_per_s":
        return _si(v, "FLOP/s")
    if unit == "flops":
        return _si(v, "FLOP")
    if unit == "ms":
        return f"{v:,.2f} ms"
    if unit == "ns":
        return f"{v / 1e6:,.3f} ms"
    if unit == "us":
        return f"{v:,.1f} µs"
    if unit == "s":
        return f"{v:,.3g} s"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.3g}"


def _si(v: float, unit: str) -> str:
    a = abs(v)
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def fmt_key(key: str, v: Any) -> str:
    return fmt(v, unit_of((key,)))


def label(path: tuple[str, ...]) -> str:
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
    if not (_is_num(measured) and _is_num(predicted)):
        return ""
    if unit == "pct":
        return f"{100 * (measured - predicted):+.1f} pt"
    if predicted == 0:
        return ""
    return f"×{measured / predicted:.2f}"


def level_rows(level: dict) -> list[dict]:
    """One row per figure of a level: the measured keys in report order, then the predicted
    ones that have no measured twin. Each row keeps the raw values beside the text."""
    measured = dict(leaves(level.get("measured") or {}))
    predicted = dict(leaves(level.get("predicted") or {}))
    rows = []
    for path in [*measured, *(p for p in predicted if p not in measured)]:
        m, p = measured.get(path), predicted.get(path)
        unit = unit_of(path)
        rows.append(
            {
                "level": level.get("level", ""),
                "path": path,
                "label": label(path),
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


def ms(ns: int | float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:,.3f} ms"
