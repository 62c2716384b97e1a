"""Small helpers the levels and the rules share: a mean of known values (the facts',
`tracekit.analysis.base.mean`), and the short forms a finding's title uses (through
`tracekit.report.units`, the one unit module)."""

from __future__ import annotations

from tracekit.analysis.base import mean
from tracekit.report import units

__all__ = ["gb", "mean", "pct"]


def gb(x: float | None) -> str:
    """Bytes as GB with one decimal, as a title writes them ("77.9 GB")."""
    return units.decimal(x, "GB", 1)


def pct(x: float | None) -> str:
    """A fraction as a whole percent, as a title writes it ("24%")."""
    return units.percent(x, 0)
