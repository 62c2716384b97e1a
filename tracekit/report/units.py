"""One way to write each unit, for every surface: text, Markdown, the TUI, the gate, HTML.

`fmt(value, unit)` writes a value with its unit ("12.3%", "31.84 ms", "14.6 MB");
`bare=True` leaves the unit out, for a table column whose header carries it. A null is
"—" everywhere. Units are the report's (`tracekit.model.figures`): fraction, ms, ns, bytes,
flops, flops_per_s, tflops, GBps, count, ratio, ranks, text, bool, map.
"""

from __future__ import annotations

import math
from typing import Any

from tracekit.model.ranks import ranges

NULL = "—"


def sig(x: float, digits: int = 3) -> str:
    """`x` with `digits` significant digits and no exponent (thousands separated)."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:,.{decimals}f}"


def _g(x: float) -> str:
    """Three significant digits, trailing zeros dropped (2.5, 14.6, 3, 0.0123)."""
    text = sig(x)
    return text.rstrip("0").rstrip(".") if "." in text else text


def _si(x: float, unit: str) -> str:
    """A size with an SI prefix: 14.6 MB, 2.21 GFLOP, 3 TFLOP/s."""
    a = abs(x)
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
                          (1e3, "k")):  # fmt: skip
        if a >= scale:
            return f"{_g(x / scale)} {prefix}{unit}"
    return f"{_g(x)} {unit}"


def ranks(values: list[int] | tuple[int, ...] | set[int] | None) -> str:
    """Ranks as ranges: 0–3, 7, 9–12 ("none" for an empty list; `tracekit.model.ranks`)."""
    return ranges(values) or "none"


def fmt(value: Any, unit: str | None = None, *, bare: bool = False, of: str | None = None) -> str:
    """One value in its unit; `of`: the unit of a map's values."""
    if value is None:
        return NULL
    if unit == "map" or isinstance(value, dict):
        return (
            ", ".join(
                f"{k} {fmt(v, of or unit if unit != 'map' else of)}"
                for k, v in value.items()
                if not isinstance(v, dict | list)
            )
            or "none"
        )
    if unit == "ranks":
        return ranks(value)
    if isinstance(value, bool) or unit == "bool":
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v, unit, bare=bare) for v in value) if value else "none"
    if not isinstance(value, int | float) or unit == "text":
        return str(value)
    if not math.isfinite(value):
        return NULL
    if unit == "fraction":
        return f"{100 * value:.1f}" if bare else percent(value)
    if unit == "ms":
        return f"{value:,.2f}" if bare else f"{value:,.2f} ms"
    if unit == "ns":
        return f"{value / 1e6:,.3f}" if bare else f"{value / 1e6:,.3f} ms"
    if unit == "us":
        return f"{value:,.1f}" if bare else f"{value:,.1f} µs"
    if unit == "s":
        return sig(value) if bare else f"{sig(value)} s"
    if unit == "bytes":
        return _si(value, "B")
    if unit == "flops":
        return _si(value, "FLOP")
    if unit == "flops_per_s":
        return _si(value, "FLOP/s")
    if unit == "tflops":
        return _si(value * 1e12, "FLOP/s")
    if unit == "GBps":
        return sig(value) if bare else f"{sig(value)} GB/s"
    if unit == "ratio":
        return f"×{value:.2f}"
    if unit == "relative":  # a signed relative difference (replay error): +1.25%
        return f"{100 * value:+.2f}" if bare else f"{100 * value:+.2f}%"
    if unit == "count":
        return f"{int(value):,}" if value == int(value) else sig(value)
    return f"{value:,}" if isinstance(value, int) else sig(value)


def percent(x: float | None, decimals: int = 1) -> str:
    """A fraction as a percent with `decimals` (titles use whole percents)."""
    return NULL if x is None else f"{100 * x:.{decimals}f}%"


def decimal(x: float | None, unit: str, decimals: int) -> str:
    """Bytes in a fixed decimal unit (GB, MB) with `decimals` — for titles and columns
    whose header names the unit."""
    scale = {"GB": 1e9, "MB": 1e6, "kB": 1e3}[unit]
    return NULL if x is None else f"{x / scale:,.{decimals}f} {unit}"


def gap(measured: Any, predicted: Any, unit: str | None) -> str:
    """Measured beside predicted: points for fractions, a ratio otherwise."""
    num = (int, float)
    if not (isinstance(measured, num) and isinstance(predicted, num)):
        return ""
    if isinstance(measured, bool) or isinstance(predicted, bool):
        return ""
    if unit == "fraction":
        return f"{100 * (measured - predicted):+.1f} pt"
    if predicted == 0:
        return ""
    return f"×{measured / predicted:.2f}"


def change(base: float | None, new: float | None, unit: str | None, kind: str) -> str:
    """A change between two values: `pct` relative, `pt` points of a fraction, `abs`."""
    if base is None or new is None:
        return NULL
    if kind == "pt":
        return f"{(new - base) * 100:+.1f}pt"
    if kind == "pct":
        if base == 0:
            return "new" if new else "+0.0%"
        return f"{(new - base) / abs(base) * 100:+.1f}%"
    d = new - base
    return f"{d:+,.2f} ms" if unit == "ms" else f"{'+' if d >= 0 else '−'}{fmt(abs(d), unit)}"
