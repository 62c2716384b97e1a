"""A finding: one problem a rule saw in the run, with its evidence, its impact and the fix.

A finding carries the rule that raised it (`diagnosers.rules`): its kind, code and level
are the rule's, so a plugin's finding is as well-formed as a built-in one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagnosers.rules import Rule

SEVERITIES = ("info", "warning", "critical")
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
LEVELS = ("memory", "compute", "communication", "scaling")


def severity(value: float, warn: float, crit: float) -> str | None:
    """'critical' / 'warning' / None for a figure where larger is worse."""
    if value >= crit:
        return "critical"
    if value >= warn:
        return "warning"
    return None


@dataclass
class Finding:
    rule: type[Rule]
    severity: str
    title: str
    ranks: list[int]
    measured: Any = None
    predicted: Any = None
    impact_ms: float | None = None
    remedy: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    # each candidate change replayed, best first: {change, predicted_step_ms, saved_ms}
    # (`diagnosers.impact.impacts`)
    remedies: list[dict[str, Any]] = field(default_factory=list)
    # the level whose verdict it sets, when not its rule's (an error charged to a level)
    charged_to: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    @property
    def kind(self) -> str:
        return self.rule.kind

    @property
    def code(self) -> str:
        return self.rule.code

    @property
    def level(self) -> str:
        return self.rule.level

    @property
    def verdict_level(self) -> str:
        return self.charged_to or self.level
