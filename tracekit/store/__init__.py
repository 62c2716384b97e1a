"""The store: an opened run and what is true of it as a whole.

- `run`     — `Run`: a DuckDB connection with views over the cached per-rank tables
              and the cross-rank views (`collectives`, `collective_instances`)
- `open`    — `open_run`: find the traces, ingest what the cache lacks, check health
- `health`  — unreadable files, missing ranks, skipped events, mixed runs
- `clocks`  — clock offsets between hosts, estimated from collectives that end together
- `sandbox` — user SQL that reads the run and nothing else (`tracekit query`, the TUI)
"""
