"""Regions over windows: each region's instances (`rank.regions`: annotated ranges and
nn.Module events, nested on their thread) summed per rank and window, matched across
ranks by their path. A region instance counts in the window its work starts in
(`regions.work_ns`: its first launched device event, else its CPU start), as an op's
FLOPs do (`windows.ops_in`), so a region and the ops inside it land in one window."""

from __future__ import annotations

from dataclasses import dataclass

from tracekit import sql
from tracekit.metrics import windows as W
from tracekit.store.run import Run


@dataclass(frozen=True)
class RegionCell:
    """One region on one rank in one window, summed over its instances."""

    n: int  # ProfilerSteps in the window (at least 1)
    count: int
    cpu_ns: int
    device_ns: int
    device_self_ns: int
    flops: float | None


def region_time(run: Run, windows: str) -> dict[tuple[str, tuple[str, ...]], dict]:
    """(kind, path) → (rank, wid) → `RegionCell`, over the windows `windows`."""
    in_windows = W.starting_in("SELECT * FROM regions", windows, start="work_ns")
    query = sql.query("metrics.regions", "region_time", in_windows=in_windows)
    out: dict[tuple[str, tuple[str, ...]], dict] = {}
    for rank, wid, n, kind, path, count, cpu, dev, self_, flops in run.sql(query).fetchall():
        cell = RegionCell(int(n), int(count), int(cpu), int(dev), int(self_), flops)
        out.setdefault((kind, tuple(path)), {})[(rank, wid)] = cell
    return out
