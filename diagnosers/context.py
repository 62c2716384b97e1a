"""What the levels and the rules read: the run's facts (`tracekit.analysis.facts.Facts`:
the run, the options, and each fact a typed property cached on first use) and what the
rules have judged so far.

`raised` holds the findings of the rules run so far, in rule order: the one rule that
looks at others (scaling.poor_projection stays quiet when a communication finding
explains the cost) reads it. The facts never read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.analysis.facts import Facts
from tracekit.metrics.breakdown import RankBreakdown
from tracekit.options import AnalysisOptions
from tracekit.store.run import Run

if TYPE_CHECKING:
    from diagnosers.findings import Finding


class Context(Facts):
    def __init__(
        self,
        run: Run,
        options: AnalysisOptions | None = None,
        ranks: list[RankBreakdown] | None = None,
    ):
        super().__init__(run, options, ranks)
        self.raised: list[Finding] = []
