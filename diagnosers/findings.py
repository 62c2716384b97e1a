"""A finding: one problem a rule saw in the run, with its evidence, its impact and the fix.

The vocabulary of kinds is the rules' (`diagnosers.rules`): each rule owns one kind, a
code that never changes, its thresholds and its docs. `kinds()` (also `KINDS`) and
`lookup` read the registry, so a plugin's rule is as known as a built-in one.
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
    kind: str
    severity: str
    title: str
    ranks: list[int]
    measured: Any = None
    predicted: Any = None
    impact_ms: float | None = None
    remedy: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    # the level whose verdict it sets, when not its rule's (an error charged to a level)
    charged_to: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in kinds():
            raise ValueError(f"unknown finding kind {self.kind!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    @property
    def rule(self) -> type[Rule]:
        return kinds()[self.kind]

    @property
    def code(self) -> str:
        return self.rule.code

    @property
    def level(self) -> str:
        return self.rule.level

    @property
    def verdict_level(self) -> str:
        return self.charged_to or self.level


def kinds() -> dict[str, type[Rule]]:
    """kind → its rule class, built-in and plugin rules alike (`diagnosers.rules`)."""
    from diagnosers.rules import registry

    return {rule.kind: rule for rule in registry()}


def __getattr__(name: str):  # `KINDS`, read from the registry when first asked for
    if name == "KINDS":
        return kinds()
    raise AttributeError(name)


def lookup(code_or_kind: str) -> type[Rule] | None:
    """The rule of a code (`TK-N301`), a kind (`communication.exposed`) or a name."""
    key = code_or_kind.strip()
    by_kind = kinds()
    rules = list(by_kind.values())
    return (
        next((r for r in rules if r.code == key.upper()), None)
        or by_kind.get(key)
        or next((r for r in rules if r.name == key), None)
    )
