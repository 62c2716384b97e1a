"""Regions of the model — annotated ranges and nn.Modules — over each rank's analysed
window (`tracekit.metrics.regions`), matched across ranks by path: the report's
`regions[]`.

Per region and rank, each figure is its instances' sum in the rank's window ÷ the steps
in it; the region's figure is the mean over the ranks holding it (a region that runs on
some ranks only, a pipeline stage's, is not diluted by the others). Achieved TFLOP/s is
the FLOPs of the counted ops inside ÷ the device time the region launched (its CPU time
on CPU runs): a region's time holds work no FLOPs formula counts, so it is a lower bound
of the speed of its counted ops. Spread: the ranks with the least, the median (lower
median) and the most device time."""

from __future__ import annotations

from dataclasses import dataclass
from math import fsum
from statistics import median, median_low
from typing import TYPE_CHECKING

from tracekit.report import schema as S

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts
    from tracekit.store.run import Run


def regions(ctx: Facts) -> list[S.Region]:
    """Every region that launched device work in the analysed windows (every region with
    CPU time on CPU runs), the most device (CPU) time first, then by path."""
    cpu_run = ctx.cpu
    rows: list[S.Region] = []
    for (kind, path), per in ctx.region_per_rank.items():
        key = "cpu" if cpu_run else "dev"
        if not any(v[key] > 0 for v in per.values()):
            continue
        ranks = sorted(per)
        n = len(ranks)

        flops = [per[r]["flops"] for r in ranks if per[r]["flops"] is not None]
        flops_per_step = fsum(flops) / n if flops else None
        dev = None if cpu_run else _mean(per, "dev")
        time_ms = _mean(per, "cpu") if cpu_run else dev
        by_time = sorted(ranks, key=lambda r: (per[r][key], r))
        med = median_low([per[r][key] for r in ranks])
        rows.append(
            S.Region(
                path=list(path),
                kind=kind,
                ranks=ranks,
                count_per_step=_mean(per, "count"),
                cpu_ms_per_step=_mean(per, "cpu"),
                device_ms_per_step=dev,
                device_self_ms_per_step=None if cpu_run else _mean(per, "self"),
                flops_per_step=flops_per_step,
                achieved_tflops=(
                    flops_per_step / (time_ms * 1e-3) / 1e12
                    if flops_per_step is not None and time_ms
                    else None
                ),
                device_ms_by_rank={} if cpu_run else {r: per[r]["dev"] for r in ranks},
                min_rank=by_time[0],
                median_rank=next(r for r in by_time if per[r][key] == med),
                max_rank=by_time[-1],
            )
        )
    key_ms = (lambda g: g.cpu_ms_per_step) if cpu_run else (lambda g: g.device_ms_per_step)
    rows.sort(key=lambda g: (-(key_ms(g) or 0.0), g.path, g.kind))
    return rows


def per_rank_of(run: Run, windows: str) -> dict[tuple[str, tuple[str, ...]], dict]:
    """(kind, path) → `per_rank` of the region's cells over `windows`, for every region
    (`tracekit.metrics.regions`). Where each rank has one window (the report's), its
    figures are its cell's ÷ the window's steps, computed as columns at once: numpy
    divides as Python does (float64, correctly rounded), so the figures are the same bit
    for bit — not tens of thousands of cells built one by one at 1,024 ranks."""
    import numpy as np

    from tracekit.metrics.regions import cells_of, region_columns, region_time

    got = region_columns(run, windows)
    if got is None:  # two regions share a hash
        return {key: per_rank(cells) for key, cells in region_time(run, windows).items()}
    name, c = got
    region, rank = c["region"], c["rank"]
    if np.any((region[1:] == region[:-1]) & (rank[1:] == rank[:-1])):  # windows summed
        return {key: per_rank(cells) for key, cells in cells_of(name, c).items()}
    n = c["n"]
    figures = (
        c["count"] / n,
        c["cpu_ns"] / n / 1e6,
        c["device_ns"] / n / 1e6,
        c["device_self_ns"] / n / 1e6,
        c["flops"] / n,  # masked (null) where no op is counted: None
    )
    out: dict[tuple[str, tuple[str, ...]], dict] = {}
    for h, r, count, cpu, dev, self_, flops in zip(
        region.tolist(), rank.tolist(), *(f.tolist() for f in figures), strict=True
    ):
        out.setdefault(name[h], {})[r] = {"count": count, "cpu": cpu, "dev": dev,
                                          "self": self_, "flops": flops}  # fmt: skip
    return out


def per_rank(cells: dict) -> dict[int, dict[str, float | None]]:
    """rank → the region's figures per step in its windows (`RegionCell`s summed, each
    window's ÷ its steps): count, cpu, dev and self (ms), flops."""
    per: dict[int, dict[str, float | None]] = {}
    for (rank, _wid), c in cells.items():
        acc = per.get(rank)
        if acc is None:  # a rank's first window (the only one in the analysed windows):
            n = c.n  # its figures as they are (0.0 + x is x: the sums below, bit for bit)
            per[rank] = {"count": c.count / n, "cpu": c.cpu_ns / n / 1e6,
                         "dev": c.device_ns / n / 1e6, "self": c.device_self_ns / n / 1e6,
                         "flops": None if c.flops is None else c.flops / n}  # fmt: skip
            continue
        acc["count"] += c.count / c.n
        acc["cpu"] += c.cpu_ns / c.n / 1e6
        acc["dev"] += c.device_ns / c.n / 1e6
        acc["self"] += c.device_self_ns / c.n / 1e6
        if c.flops is not None:
            acc["flops"] = (acc["flops"] or 0.0) + c.flops / c.n
    return per


HOLDS = 0.5  # of a region's excess: a child holding most of it is where the lag accrues


@dataclass(frozen=True)
class Lag:
    """Where a late rank's extra time accrues: a region, its time per step on that rank
    and the median other rank's, by device time or CPU time (`basis`)."""

    kind: str
    path: tuple[str, ...]
    basis: str  # device or cpu
    rank_ms: float
    median_ms: float

    @property
    def excess_ms(self) -> float:
        return self.rank_ms - self.median_ms

    @property
    def name(self) -> str:
        return " / ".join(self.path)


def lag_region(ctx: Facts, rank: int, basis: str) -> Lag | None:
    """The region where `rank`'s lag accrues: of the regions `rank` and at least one other
    rank hold, the one whose time per step (device time, or CPU time: `basis` "device" /
    "cpu") on `rank` exceeds the median other rank's the most — narrowed, while one child
    holds ≥ `HOLDS` of its parent's excess, to that child (a parent's time holds its
    children's, so the outermost region always exceeds the most; the lag lies in the
    child). None when no region exceeds the median."""
    key = "dev" if basis == "device" else "cpu"
    excess: dict[tuple[str, tuple[str, ...]], tuple[float, float]] = {}
    for (kind, path), per in ctx.region_per_rank.items():
        others = [v[key] or 0.0 for r, v in per.items() if r != rank]
        if rank not in per or not others:
            continue
        excess[(kind, path)] = (per[rank][key] or 0.0, median(others))
    if not excess:
        return None

    def gain(k) -> float:
        return excess[k][0] - excess[k][1]

    best = max(excess, key=lambda k: (gain(k), -len(k[1]), k))
    if gain(best) <= 0:
        return None
    while True:
        kids = [k for k in excess if len(k[1]) == len(best[1]) + 1 and k[1][:-1] == best[1]]
        top = max(kids, key=lambda k: (gain(k), k), default=None)
        if top is None or gain(top) < HOLDS * gain(best):
            break
        best = top
    ms, med = excess[best]
    return Lag(best[0], best[1], basis, ms, med)


def _mean(per: dict[int, dict], field: str) -> float:
    """`field`'s mean over the ranks of `per` (those holding the region)."""
    return fsum(v[field] or 0.0 for v in per.values()) / len(per)
