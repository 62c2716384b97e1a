"""What a diagnoser returns for its level: figures measured beside predicted, a
verdict, metrics, and findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnosers.findings import Finding


@dataclass
class LevelResult:
    level: str
    measured: dict[str, Any] = field(default_factory=dict)
    predicted: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why a figure is null, or disagrees

    @property
    def verdict(self) -> str:
        sev = {f.severity for f in self.findings}
        return "critical" if "critical" in sev else "warning" if "warning" in sev else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "verdict": self.verdict,
            "measured": self.measured,
            "predicted": self.predicted,
            "metrics": self.metrics,
            "notes": self.notes,
        }


def mean(values) -> float | None:
    """Mean of the values that are known (None when none is)."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def severity(value: float, warn: float, crit: float) -> str | None:
    """'critical' / 'warning' / None for a figure where larger is worse."""
    if value >= crit:
        return "critical"
    if value >= warn:
        return "warning"
    return None


def gb(x: float | None) -> str:
    return "—" if x is None else f"{x / 1e9:.1f} GB"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"
