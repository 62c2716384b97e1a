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
_KT = "metrics.kernel_time"


def kernel_time(
    run: Run, windows: str, names: list[str] | None = None, top: int | None = None
) -> dict[str, dict[tuple[int, int], tuple[int, int]]]:
    """name → (rank, wid) → (device ns in the window, instances starting in it).

    Only the kernels `names`, when given; else, with `top`, only the `top` names with the
    most device time over all windows (ties by name, as `top_names`). The report reads
    ten names: at 1,024 ranks every name was 73,000 rows brought into Python."""
    kept = W.kept(run, (_KT, windows))
    if kept is not None and names is not None and set(names) <= kept[0]:
        return {name: kept[1][name] for name in names if name in kept[1]}
    out: dict[str, dict[tuple[int, int], tuple[int, int]]] = {}
    for rank, wid, name, ns, n in _rows(run, windows, names, top):
        out.setdefault(name, {})[(rank, wid)] = (ns, n)
    return out


def kernel_time_with_steps(
    run: Run, windows: str, step_windows: str, top: int
) -> dict[str, dict[tuple[int, int], tuple[int, int]]]:
    """`kernel_time(run, windows, top=top)` for the report's windows (one a rank, wid 0),
    with the step windows' rows of those names (`step_windows`, the samples') computed in
    the same query and kept for `kernel_time(run, step_windows, names)`. Where each
    rank's step windows lie, disjoint, inside its report window (`windows.pieces`), the
    query runs once over the pieces: a kernel's clipped time and its start fall in the
    pieces as in the whole window, so a window's sums are its pieces' (integers: exact),
    and so are the top names. Otherwise the query over the report's windows alone."""
    pieces = W.pieces(run, windows, step_windows)
    if pieces is None:
        return kernel_time(run, windows, top=top)
    whole: dict[str, dict[tuple[int, int], list[int]]] = {}
    steps: dict[str, dict[tuple[int, int], tuple[int, int]]] = {}
    for rank, wid, name, ns, n in _rows(run, W.table(run, pieces), top=top):
        acc = whole.setdefault(name, {}).setdefault((rank, 0), [0, 0])
        acc[0] += ns
        acc[1] += n
        if wid >= 0:
            steps.setdefault(name, {})[(rank, wid)] = (ns, n)
    W.keep(run, (_KT, step_windows), (set(whole), steps))
    return {name: {k: (ns, n) for k, (ns, n) in cells.items()} for name, cells in whole.items()}


def _rows(run: Run, windows: str, names: list[str] | None = None, top: int | None = None):
    """`kernel_time`'s rows (rank, wid, name, ns, n) over `windows`: of `names`, else of
    the `top` names, else of every name."""
    clipped = W.overlapping(sql.query(_KT, "compute_activity"), windows)
    query = sql.query(_KT, "kernel_time", clipped=clipped)
    params = None
    if names is not None:
        query = sql.query(_KT, "named", kernel_time=query)
        params = {"names": list(names)}
    elif top is not None:
        query = sql.query(_KT, "top", kernel_time=query)
        params = {"top": int(top)}
    return run.sql(query, params).fetchall()


def top_names(per: dict[str, dict], limit: int = TOP_KERNELS) -> list[str]:
    """The `limit` names with the most device time (ties by name: deterministic)."""
    totals = {name: fsum(ns for ns, _ in cells.values()) for name, cells in per.items()}
    return sorted(totals, key=lambda n: (-totals[n], n))[:limit]
