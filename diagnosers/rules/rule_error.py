"""TK-E001 diagnoser-error: what a rule (or a level's figures) that raised becomes."""

from __future__ import annotations

from diagnosers.findings import Finding
from diagnosers.rules.base import Rule


class RuleError(Rule):
    """What it detects
    A rule, or the computation of a level's figures, raised an exception on this run.

    Why it matters
    That rule's finding, or that level's figures, are missing; the rest of the report
    stands.

    Example
    communication: KeyError 'bytes'.

    Fix
    Report it with `tracekit --debug analyze`; the traceback shows where.
    """

    code = "TK-E001"
    kind = "diagnoser.error"
    name = "diagnoser-error"
    level = "scaling"
    raised_when = "a rule or a level's figures raised; the report stands without them"

    def check(self, ctx):
        return ()


def error_finding(what: str, exc: BaseException, level: str | None = None) -> Finding:
    """TK-E001 for `what` that raised `exc`, setting `level`'s verdict."""
    return Finding(
        RuleError,
        "warning",
        f"{what} failed: {type(exc).__name__}: {exc}",
        ranks=[],
        remedy="rerun with tracekit --debug analyze and report the traceback",
        charged_to=level,
    )
