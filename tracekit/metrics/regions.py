"""Regions over windows: each region's instances (`rank.regions`: annotated ranges and
nn.Module events, nested on their thread) summed per rank and window, matched across
ranks by their path. A region instance counts in the window its work starts in
(`regions.work_ns`: its first launched device event, else its CPU start), as an op's
FLOPs do (`windows.ops_in`), so a region and the ops inside it land in one window."""

from __future__ import annotations

from typing import NamedTuple

from tracekit import sql
from tracekit.metrics import windows as W
from tracekit.store.run import Run


class RegionCell(NamedTuple):
    """One region on one rank in one window, summed over its instances (a tuple: tens of
    thousands of them at 1,024 ranks)."""

    n: int  # ProfilerSteps in the window (at least 1)
    count: int
    cpu_ns: int
    device_ns: int
    device_self_ns: int
    flops: float | None


def region_time(
    run: Run, windows: str, only: set[tuple[str, tuple[str, ...]]] | None = None
) -> dict[tuple[str, tuple[str, ...]], dict]:
    """(kind, path) → (rank, wid) → `RegionCell`, over the windows `windows`; `only`: just
    those regions (the others are not built)."""
    import numpy as np

    source, params = "SELECT * FROM regions", None
    if only is not None:  # those regions' rows only, before they are summed
        if not only:
            return {}
        source += " WHERE list_contains($only, list_prepend(kind, path))"
        params = {"only": [[kind, *path] for kind, path in sorted(only)]}
    in_windows = W.starting_in(source, windows, start="work_ns")
    cells = sql.query("metrics.regions", "region_time", in_windows=in_windows)
    # numbers only, column by column: no path list per row (37,000 at 1,024 ranks); each
    # region's kind and path come on its first row
    query = sql.query("metrics.regions", "region_cells", cells=cells)
    cols = run.sql(query, params).fetchnumpy()
    name: dict[int, tuple[str, tuple[str, ...]]] = {}
    for i in np.flatnonzero(~np.ma.getmaskarray(cols["kind"])):
        h, key = int(cols["region"][i]), (str(cols["kind"][i]), tuple(cols["path"][i]))
        if name.setdefault(h, key) != key:  # a hash shared by two regions: rows with paths
            return _by_path(run, cells, params)
    names = ("region", "rank", "wid", "n", "count", "cpu_ns", "device_ns", "device_self_ns")
    names += ("flops",)
    out: dict[tuple[str, tuple[str, ...]], dict] = {}
    region, rank, wid, *figures = (cols[c].tolist() for c in names)
    for h, r, w, *fig in zip(region, rank, wid, *figures, strict=True):
        out.setdefault(name[h], {})[(r, w)] = RegionCell(*fig)
    return out


def _by_path(run: Run, cells: str, params) -> dict[tuple[str, tuple[str, ...]], dict]:
    """`region_time` from the rows with their paths."""
    out: dict[tuple[str, tuple[str, ...]], dict] = {}
    rows = run.sql(cells, params).fetchall()
    for rank, wid, n, kind, path, count, cpu, dev, self_, flops in rows:
        cell = RegionCell(int(n), int(count), int(cpu), int(dev), int(self_), flops)
        out.setdefault((kind, tuple(path)), {})[(rank, wid)] = cell
    return out
