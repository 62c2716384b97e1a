"""tracekit: profiler-trace analysis and diagnosis for distributed PyTorch training.

The Python doors, beside the command line:

- `tracekit.open(RUN)` — the store: SQL over the run's tables (`run.sql(...)`)
- `tracekit.analyze(RUN, **options)` — the report, typed (`tracekit.report.schema.Report`),
  with its tables as polars or pandas frames and a rich display in Jupyter
"""

from tracekit.version import __version__


def open(*inputs, **options):
    """Open a run folder or trace files: see `tracekit.store.open.open_run`. Options are
    `tracekit.options.OpenOptions`' fields: `workers`, `comm_kernels`, `strict`,
    `allow_mixed`, `cluster`, `ranks="0-7,64"` or `sample_ranks=N` (only those ranks are
    ingested and opened)."""
    from tracekit.store.open import open_run

    return open_run(*inputs, **options)


def analyze(*inputs, **options):
    """The report of a run, as `tracekit analyze RUN --format json` gives it, typed.

    Options: `window`, `steps`, `select`, `ignore`, `levels` (False: the breakdown alone)
    and the overrides (`peak_tflops`, `busbw_GBps`, `device_memory_GB`, `latency_us`,
    `gpus_per_node`) of the analysis; any `tracekit.open` option for opening the run —
    read as the command line reads its options (`tracekit.options.resolve`: `select` /
    `ignore` a code or a list, comma-separated or not, else `[tool.tracekit]`'s).
    Returns an `Analysis`: the report (`.report`, attributes as in the JSON), its tables
    as frames (`.ranks()`, `.collectives()`, `.top_ops()`, `.findings()`,
    `.samples()`; `backend="polars"` or `"pandas"`), `.to_json()`, and an HTML summary
    when displayed in Jupyter."""
    from tracekit.api import analyze as _analyze

    return _analyze(*inputs, **options)


__all__ = ["__version__", "analyze", "open"]
