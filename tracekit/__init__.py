"""tracekit: profiler-trace analysis and diagnosis for distributed PyTorch training."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tracekit")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"


def open(
    *inputs,
    workers=None,
    comm_kernels=(),
    strict=False,
    allow_mixed=False,
    ranks=None,
    sample_ranks=None,
):
    """Open a run folder or trace files; see `tracekit.store.open_run` (`ranks="0-7,64"`
    or `sample_ranks=N`: only those ranks are ingested and opened)."""
    from tracekit.store.open import open_run

    return open_run(
        *inputs,
        workers=workers,
        comm_kernels=comm_kernels,
        strict=strict,
        allow_mixed=allow_mixed,
        ranks=ranks,
        sample_ranks=sample_ranks,
    )


__all__ = ["__version__", "open"]
