"""The CI gate: `tracekit baseline save` and `tracekit compare`.

- `samples`  — per-step figures the report carries (`report["samples"]`), from the store
- `metrics`  — the registry of gated report keys: direction, unit, default threshold
- `stats`    — Mann–Whitney U, bootstrap intervals, steps that would decide (scipy, lazily)
- `baseline` — baseline files; reading a side (run folder, baseline, JSON report)
- `compare`  — verdicts per metric and the cause of a step-time change, composed of:
  `read` (the report keys each figure is read from), `judge` (one metric against the
  noise), `drilldown` (per rank, collective, kernel, region; α shared), `causes` (the
  step-time change decomposed, each verdict's cause) and `verdict` (`Verdict`,
  `Comparison`)
- `render`   — text, JSON, Markdown, JUnit XML
- `config`   — `[tool.tracekit.gate]` in pyproject.toml

Nothing here imports scipy at import time: `tracekit analyze` never loads it.
"""
