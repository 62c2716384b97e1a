"""Where a cold analyze's wall time goes: the start before the first batch, each ingest
batch (which worker, when, its CPU seconds and peak RSS), the wait between the last batch
and the analysis, the analysis, and the exit. One `tracekit analyze RUN --format json`
run in this process, its cache removed first; nothing in it is changed, only wrapped.

    python benchmarks/cold_phases.py RUN [--workers 2]

`benchmarks/ingest.py --keep DIR` builds runs to point it at (DIR/run8, DIR/small1024).
The ingest's workers are forked from this process, so their batches are timed too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import sys
import time
from pathlib import Path

from benchlib import cpu_seconds

T0 = time.perf_counter()


def line(text: str) -> None:
    print(f"{time.perf_counter() - T0:7.2f} s  {text}", file=sys.stderr, flush=True)


# module-level: the process pool pickles the batch function by reference
_REAL: dict = {}


def timed_batch(items, *args, **kw):
    t, c = time.perf_counter() - T0, cpu_seconds()
    out = _REAL["batch"](items, *args, **kw)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    line(
        f"batch of {len(items):4d} traces done in worker {os.getpid()} (started at {t:.2f} s): "
        f"{cpu_seconds() - c:.2f} s CPU, peak RSS {rss:.0f} MiB"
    )
    return out


def timed_analyze(*args, **kw):
    line("analysis starts")
    c = cpu_seconds()
    out = _REAL["analyze"](*args, **kw)
    line(f"analysis ends: {cpu_seconds() - c:.2f} s CPU")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    shutil.rmtree(a.run / ".tracekit", ignore_errors=True)

    from diagnosers import assemble
    from tracekit import cli
    from tracekit.ingest import runner

    _REAL.update(batch=runner.ingest_batch, analyze=assemble.analyze)
    runner.ingest_batch, assemble.analyze = timed_batch, timed_analyze
    os.environ["TRACEKIT_NO_PROGRESS"] = "1"
    line("imports done")
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            cli.main(
                ["analyze", str(a.run), "--format", "json", "--workers", str(a.workers)],
                standalone_mode=False,
            )
        finally:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            line(f"report written; main process {cpu_seconds():.2f} s CPU, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
