"""Diagnosers: the analysis that turns a run's tables into the report's levels and findings.

- `context`   — `Context`: the run, the options, and typed facts as cached properties
- `analyses/` — the facts: topology, pipeline, stragglers, memory, compute, communication,
                scaling (bubble model, projection)
- `levels`    — the four levels (memory → compute → communication → scaling) laid out
                from the facts, each figure measured beside predicted
- `rules/`    — one rule per finding code (TK-M101 …), thresholds as attributes, docs in
                fixed sections; plugins through the `tracekit.rules` entry point
- `findings`  — the `Finding` type and the vocabulary of kinds (the rules')
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
