"""What the gate says: one `Verdict` per metric (its values, change, verdict and the
evidence for it) and the `Comparison` of two sides (the verdicts, the cause, the notes,
whether the gate failed) — the types every renderer reads."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tracekit.gate import metrics as M
from tracekit.gate.baseline import Side
from tracekit.gate.metrics import Threshold
from tracekit.gate.stats import RunTest, TestResult

VERDICTS = ("regressed", "warning", "inconclusive", "improved", "unchanged", "not compared")


@dataclass
class Verdict:
    metric: str  # e.g. "step_time", "busbw[all_reduce 201.3 MB ×4]"
    family: str  # the threshold key
    label: str
    unit: str
    worse: int
    base: float | None
    new: float | None
    threshold: Threshold
    verdict: str = "not compared"
    confidence: str = ""  # exact, high, medium, low
    evidence: str = ""
    change: float | None = None  # in the threshold's kind (relative, points or ms)
    test: TestResult | None = None
    steps_to_decide: int | None = None
    cause: str | None = None
    gated: bool = True
    run_test: RunTest | None = None
    runs_to_decide: int | None = None
    alpha: float | None = None  # the level its p-values were compared with
    steps_agree: bool = False  # one run a side: the per-step test called it, this way
    # a drill-down metric's entity, by key (a rank, a collective's (name, group size,
    # bytes), a kernel's name, a region's (kind, path)): matched to its cause by key, the
    # label in `metric` being for display only
    entity: Any = None

    @property
    def drill_down(self) -> bool:
        """One metric of many (per rank, collective, kernel, region), not a run metric."""
        return self.family in M.DRILL_DOWN

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "family": self.family,
            "label": self.label,
            "unit": self.unit,
            "direction": "lower is better" if self.worse > 0 else "higher is better",
            "base": self.base,
            "new": self.new,
            "change": self.change if self.change is None or math.isfinite(self.change) else None,
            "change_unit": self.threshold.kind if self.threshold.kind != "off" else None,
            "relative_change": rel(self.base, self.new),
            "threshold": str(self.threshold),
            "verdict": self.verdict,
            "confidence": self.confidence,
            "evidence": self.evidence,
            "test": self.test.to_dict() if self.test else None,
            "steps_to_decide": self.steps_to_decide,
            "cause": self.cause,
            "gated": self.gated,
            "run_test": self.run_test.to_dict() if self.run_test else None,
            "runs_to_decide": self.runs_to_decide,
            "alpha": self.alpha,
        }


@dataclass
class Comparison:
    base: Side
    new: Side
    thresholds: dict[str, Threshold]
    alpha: float
    fail_on: str
    verdicts: list[Verdict] = field(default_factory=list)
    cause: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    run_noise: dict[str, Threshold] = field(default_factory=dict)
    strict: bool = False

    @property
    def noise(self) -> dict[str, Any]:
        """Which run-to-run noise the verdicts were judged against."""
        runs = [self.base.runs, self.new.runs]
        if max(runs) > 1:
            return {
                "kind": "measured",
                "runs": runs,
                "text": f"run-to-run noise measured between runs ({runs[0]} base, "
                f"{runs[1]} new): Student's t over run means, the spread never below the "
                "prior ([tool.tracekit.gate.run_noise])",
            }
        shown = ", ".join(
            f"{k} {v}" for k, v in self.run_noise.items() if k in ("step_time", "exposed_comm")
        )
        return {
            "kind": "prior",
            "runs": runs,
            "prior": {k: str(v) for k, v in self.run_noise.items()},
            "text": "one run a side cannot measure run-to-run noise: the noise of the steps "
            "within each run is tested, and the prior sd per run between runs "
            f"({shown}, …; [tool.tracekit.gate.run_noise]) stands in for the rest"
            + (
                ""
                if self.strict
                else "; a drill-down metric (per rank, collective, kernel) that moved "
                "while no headline metric regressed is a warning"
            ),
        }

    @property
    def failed(self) -> list[Verdict]:
        bad = ("regressed", "inconclusive") if self.fail_on == "inconclusive" else ("regressed",)
        return [v for v in self.verdicts if v.gated and v.verdict in bad]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def counts(self) -> dict[str, int]:
        return {k: sum(v.verdict == k for v in self.verdicts) for k in VERDICTS}

    def to_dict(self) -> dict[str, Any]:
        from tracekit.version import __version__

        return {
            "schema": 1,
            "tracekit_version": __version__,
            "result": "fail" if self.failed else "pass",
            "exit_code": self.exit_code,
            "fail_on": self.fail_on,
            "alpha": self.alpha,
            "base": self.base.describe(),
            "new": self.new.describe(),
            "thresholds": {k: str(v) for k, v in self.thresholds.items()},
            "noise": self.noise,
            "strict": self.strict,
            "counts": self.counts(),
            "cause": self.cause,
            "metrics": [v.to_dict() for v in self.verdicts],
            "notes": self.notes,
        }


def rel(base: float | None, new: float | None) -> float | None:
    if base is None or new is None:
        return None
    if base == 0:
        return 0.0 if new == 0 else None
    return (new - base) / abs(base)
