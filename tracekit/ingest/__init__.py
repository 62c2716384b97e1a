"""Ingest: a run's trace files → typed per-rank tables in a Parquet cache.

- `discover`   — which files of a folder are traces
- `tracefile`  — opening one trace: gunzip, the header, the rank it belongs to
- `ranksel`    — `--ranks` / `--sample-ranks`: the traces to read, chosen before reading
- `tables`     — the SQL that turns one trace's events into the base tables
- `collectives`— the collective rows of one rank (any backend), from:
  `collnames` (kinds, element sizes), `issueops` (what the issuing CPU ops say),
  `collgroups` (the group each ran on, a send's peer), `gloo` (span ↔ issue op)
- `kernelclass`— the kernel classes: communication or compute, by kernel name
- `opscan`     — one rank's counted ops: FLOPs, nesting, phase
- `coltable`   — small Python-built tables handed to DuckDB as JSON (no pyarrow)
- `runner`     — the run's ingest over processes or `cluster`: pool, progress, index
- `batchplan`  — which traces are read together (batches)
- `batch`      — one batch in a worker: read, derived tables, written to the cache
- `rankread`   — a batch's traces read into its base tables; a failed file's result
- `cluster`    — the same per-file work as Dask tasks (`--cluster`)
- `cache`      — the Parquet cache: layout, index, lock, atomic writes
- `resources`  — memory: which traces fit, how many at once

Nothing here reads another rank's tables: everything cross-rank is the store's.
"""
