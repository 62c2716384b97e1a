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


Key = tuple[str, tuple[str, ...]]  # a region: (kind, path)


def region_time(run: Run, windows: str, only: set[Key] | None = None) -> dict[Key, dict]:
    """(kind, path) → (rank, wid) → `RegionCell`, over the windows `windows`; `only`: just
    those regions (the others are not built)."""
    if only is not None and not only:
        return {}
    got = region_columns(run, windows, only)
    if got is None:  # a hash shared by two regions: the rows with their paths
        return _by_path(run, *_cells(windows, only))
    return cells_of(*got)


def region_columns(run: Run, windows: str, only: set[Key] | None = None):
    """`region_time`'s figures as columns (numpy arrays: region, rank, wid, n, count,
    cpu_ns, device_ns, device_self_ns, flops; ordered by region, rank, wid), each region
    a hash, with the hashes' (kind, path): (names, columns); None where two regions share
    a hash."""
    import numpy as np

    cells, params = _cells(windows, only)
    # numbers only, column by column: no path list per row (37,000 at 1,024 ranks); each
    # region's kind and path come on its first row
    query = sql.query("metrics.regions", "region_cells", cells=cells)
    cols = run.sql(query, params).fetchnumpy()
    name: dict[int, Key] = {}
    for i in np.flatnonzero(~np.ma.getmaskarray(cols["kind"])):
        h, key = int(cols["region"][i]), (str(cols["kind"][i]), tuple(cols["path"][i]))
        if name.setdefault(h, key) != key:
            return None
    return name, cols


def cells_of(name: dict[int, Key], cols: dict) -> dict[Key, dict]:
    """`region_time` from `region_columns`."""
    names = ("region", "rank", "wid", "n", "count", "cpu_ns", "device_ns", "device_self_ns")
    names += ("flops",)
    out: dict[Key, dict] = {}
    region, rank, wid, *figures = (cols[c].tolist() for c in names)
    for h, r, w, *fig in zip(region, rank, wid, *figures, strict=True):
        out.setdefault(name[h], {})[(r, w)] = RegionCell(*fig)
    return out


def _cells(windows: str, only: set[Key] | None) -> tuple[str, dict | None]:
    """The `region_time` query over `windows` (of the regions `only`) and its parameters."""
    source, params = "SELECT * FROM regions", None
    if only is not None:  # those regions' rows only, before they are summed
        source += " WHERE list_contains($only, list_prepend(kind, path))"
        params = {"only": [[kind, *path] for kind, path in sorted(only)]}
    in_windows = W.starting_in(source, windows, start="work_ns")
    return sql.query("metrics.regions", "region_time", in_windows=in_windows), params


def _by_path(run: Run, cells: str, params) -> dict[Key, dict]:
    """`region_time` from the rows with their paths."""
    out: dict[Key, dict] = {}
    rows = run.sql(cells, params).fetchall()
    for rank, wid, n, kind, path, count, cpu, dev, self_, flops in rows:
        cell = RegionCell(int(n), int(count), int(cpu), int(dev), int(self_), flops)
        out.setdefault((kind, tuple(path)), {})[(rank, wid)] = cell
    return out
