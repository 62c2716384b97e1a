"""Compute kernels (CPU ops on CPU runs) by device time over windows: the report's
`top_kernels` (each rank's window) and the samples' kernel series (each step), from one
query (`tracekit/sql/metrics/kernel_time.sql`). Time is a plain sum of the kernels'
clipped durations: two streams running one kernel name at once count twice, as
"device time" does in every profiler's table."""

from __future__ import annotations

from math import fsum

from tracekit import sql
from tracekit.metrics import windows as W
from tracekit.store.run import Run

TOP_KERNELS = 10


def kernel_time(
    run: Run, windows: str, names: list[str] | None = None, top: int | None = None
) -> dict[str, dict[tuple[int, int], tuple[int, int]]]:
    """name → (rank, wid) → (device ns in the window, instances starting in it).

    Only the kernels `names`, when given; else, with `top`, only the `top` names with the
    most device time over all windows (ties by name, as `top_names`). The report reads
    ten names: at 1,024 ranks every name was 73,000 rows brought into Python."""
    clipped = W.overlapping(sql.query("metrics.kernel_time", "compute_activity"), windows)
    query = sql.query("metrics.kernel_time", "kernel_time", clipped=clipped)
    params = None
    if names is not None:
        query = sql.query("metrics.kernel_time", "named", kernel_time=query)
        params = {"names": list(names)}
    elif top is not None:
        query = sql.query("metrics.kernel_time", "top", kernel_time=query)
        params = {"top": int(top)}
    out: dict[str, dict[tuple[int, int], tuple[int, int]]] = {}
    for rank, wid, name, ns, n in run.sql(query, params).fetchall():
        out.setdefault(name, {})[(rank, wid)] = (ns, n)
    return out


def top_names(per: dict[str, dict], limit: int = TOP_KERNELS) -> list[str]:
    """The `limit` names with the most device time (ties by name: deterministic)."""
    totals = {name: fsum(ns for ns, _ in cells.values()) for name, cells in per.items()}
    return sorted(totals, key=lambda n: (-totals[n], n))[:limit]
