"""The report: what every way of use (analyze, the TUI, the gate) reads.

- `render` — text and Markdown from the report (`text`, `markdown`), from the pieces
  they share: `columns` (the tables), `lines`, `steplines` (the step model's),
  `regiontree` (the regions)
- `export` — the run as one merged trace for Perfetto, from `rankevents` (each rank's
  events on one clock) and `tracks` (tracekit's); `evidence` (where a finding's evidence
  lies), `perfetto` (the links and the local server)
- `cache`  — reports kept beside the Parquet cache (a warm analyze reads its answer)
"""
