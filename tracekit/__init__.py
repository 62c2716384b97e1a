"""tracekit: profiler-trace analysis and diagnosis for distributed PyTorch training."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tracekit")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"


def open(*inputs, workers=None, comm_kernels=(), strict=False, allow_mixed=False):
    """Open a run folder or trace files; see `tracekit.store.open_run`."""
    from tracekit.store import open_run

    return open_run(
        *inputs,
        workers=workers,
        comm_kernels=comm_kernels,
        strict=strict,
        allow_mixed=allow_mixed,
    )


__all__ = ["__version__", "open"]
