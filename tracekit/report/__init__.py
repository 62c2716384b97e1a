"""The report: what every way of use (analyze, the TUI, the gate) reads.

- `render` — text and Markdown from the report (`text`, `markdown`), from the pieces
  they share: `columns` (the tables), `lines`, `steplines` (the step model's),
  `regiontree` (the regions)
- `cache`  — reports kept beside the Parquet cache (a warm analyze reads its answer)
"""
