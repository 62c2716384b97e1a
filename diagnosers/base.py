"""Small helpers the levels and the rules share: a mean of known values, and the short
forms a finding's title uses (through `tracekit.report.units`, the one unit module)."""

from __future__ import annotations

from tracekit.report import units


def mean(values) -> float | None:
    """Mean of the values that are known (None when none is)."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def gb(x: float | None) -> str:
    """Bytes as GB with one decimal, as a title writes them ("77.9 GB")."""
    return units.decimal(x, "GB", 1)


def pct(x: float | None) -> str:
    """A fraction as a whole percent, as a title writes it ("24%")."""
    return units.percent(x, 0)
