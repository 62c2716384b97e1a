"""What the facts (and the judges after them) share: a mean of the values that are known."""

from __future__ import annotations


def mean(values) -> float | None:
    """Mean of the values that are known (None when none is)."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
