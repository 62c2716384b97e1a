"""The per-rank ingest on a Dask distributed cluster (`--cluster ADDRESS`).

One box parses ranks in parallel processes; past one box, the same per-rank work
(`tracekit.ingest.batch.ingest_batch`: a batch of traces in, its Parquet tables out) runs as
Dask tasks.
The workers must see the run folder and its cache at the same paths (a shared
filesystem); they write the very cache a local ingest writes, and the cross-rank
analysis then reads the per-rank tables as usual — so the answer is a local run's.

`ADDRESS` is a scheduler (`tcp://host:8786`, what `dask-scheduler`, `dask-jobqueue`'s
`SLURMCluster(...).scheduler_address` or `dask-kubernetes` give) or `local[:N]`: a
`LocalCluster` of N single-threaded worker processes on this machine (default: cores).
Needs the `cluster` extra (`pip install 'tracekit-torch[cluster]'`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager

from tracekit.errors import TracekitError


def _local_workers(address: str) -> int | None:
    """N of `local` / `local:N`, None for a scheduler address."""
    if address == "local":
        return os.cpu_count() or 1
    if address.startswith("local:"):
        n = address.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise TracekitError(f"--cluster {address}: use local, local:N (N ≥ 1) or an address")
        return int(n)
    return None


@contextmanager
def executor(address: str) -> Iterator[tuple[Executor, int]]:
    """A `concurrent.futures` executor over the cluster's workers, and their count."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise TracekitError(
            "--cluster needs Dask's distributed scheduler: pip install 'tracekit-torch[cluster]'"
        ) from exc
    n = _local_workers(address)
    cluster = None
    try:
        if n is not None:
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            client = Client(cluster)
        else:
            client = Client(address, timeout="20s")
    except OSError as exc:  # no scheduler there (a refused or timed-out connection)
        if cluster is not None:
            cluster.close()
        raise TracekitError(f"--cluster {address}: cannot reach the scheduler ({exc})") from exc
    try:
        workers = len(client.scheduler_info().get("workers", {})) or 1
        yield client.get_executor(pure=False), workers
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
