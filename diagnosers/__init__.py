"""Diagnosers: the judges that turn a run's facts (`tracekit.analysis`) into the report's
levels and findings.

- `context`   — `Context`: the run's facts (`tracekit.analysis.facts.Facts`) and the
                findings the rules raised so far
- `levels`    — the four levels (memory → compute → communication → scaling) laid out
                from the facts, each figure measured beside predicted
- `rules/`    — one rule per finding code (TK-M101 …), thresholds as attributes, docs in
                fixed sections, each naming its candidate what-if changes; plugins through
                the `tracekit.rules` entry point
- `findings`  — the `Finding` type and the vocabulary of kinds (the rules')
- `impact`    — each finding's candidate changes replayed: its impact, remedies, severity
- `assemble`  — `analyze(run, options)`: the one path that builds a report

Imports `tracekit`; the engine never imports this package (its doors — the CLI and
`tracekit.analyze` — do, lazily).
"""

from __future__ import annotations

from diagnosers.assemble import analyze, cached
from diagnosers.context import Context
from diagnosers.findings import Finding
from tracekit.options import AnalysisOptions, Overrides

__all__ = ["AnalysisOptions", "Context", "Finding", "Overrides", "analyze", "cached"]
