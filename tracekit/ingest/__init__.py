"""Ingest: a run's trace files → typed per-rank tables in a Parquet cache.

- `discover`   — which files of a folder are traces
- `tracefile`  — opening one trace: gunzip, the header, the rank it belongs to
- `ranksel`    — `--ranks` / `--sample-ranks`: the traces to read, chosen before reading
- `tables`     — the SQL that turns one trace's events into the base tables
- `collectives`— the collective rows of one rank (any backend) and kernel classes
- `opscan`     — one rank's counted ops: FLOPs, nesting, phase
- `coltable`   — small Python-built tables handed to DuckDB as JSON (no pyarrow)
- `runner`     — the batch worker and the run's ingest over processes or `cluster`
- `cluster`    — the same per-file work as Dask tasks (`--cluster`)
- `cache`      — the Parquet cache: layout, index, lock, atomic writes
- `resources`  — memory: which traces fit, how many at once

Nothing here reads another rank's tables: everything cross-rank is the store's.
"""
