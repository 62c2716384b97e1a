"""Where a finding points, read from the report: the ranks, steps, collectives and ops
its page lists and jumps to."""

from __future__ import annotations

from typing import Any

from tracekit.report.schema import FindingRow


def evidence(finding: FindingRow) -> dict[str, list]:
    """Where a finding points: ranks, steps, collectives and ops named in it (its
    `details` — free-form in the schema — are walked generically, so new detail keys are
    found too)."""
    ev: dict[str, list] = {"ranks": list(finding.ranks), "steps": []}
    ev["collectives"] = []
    ev["ops"] = []

    def walk(x: Any, key: str = "") -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("name", "op") and isinstance(v, str) and "op" in key:
                    ev["ops"].append(v)
                elif (k in ("name",) and isinstance(v, str) and "coll" in key) or (
                    "collective" in k and isinstance(v, str)
                ):
                    ev["collectives"].append(v)
                elif k in ("step", "steps") and isinstance(v, int | list):
                    ev["steps"].extend(v if isinstance(v, list) else [v])
                else:
                    walk(v, k)
        elif isinstance(x, list):
            for v in x:
                walk(v, key)

    walk(finding.details)
    for k in ev:
        seen: list = []
        for v in ev[k]:
            if v not in seen:
                seen.append(v)
        ev[k] = seen
    return ev
