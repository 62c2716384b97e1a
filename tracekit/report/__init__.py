"""The report: what every way of use (analyze, the TUI, the gate) reads.

- `render` — text and Markdown from the report
- `cache`  — reports kept beside the Parquet cache (a warm analyze reads its answer)
"""
