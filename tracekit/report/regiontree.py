"""The top regions as an indented tree that fits a terminal (text, Markdown)."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tracekit.report import units
from tracekit.report.schema import Report

REGION_WIDTH = 80  # the regions tree fits a terminal of this width
REGION_NAME = 42  # columns of the indented names


def region_lines(report: Report, limit: int = 15) -> list[str]:
    """The top regions (most device time per step; CPU time on CPU runs) as an indented
    tree that fits 80 columns: a region's children under it, the heaviest first. A parent
    launches at least what its children do, so the top ones hold their parents."""
    regions = getattr(report, "regions", UNSET)
    if regions is UNSET or not regions:
        return []
    cpu = regions[0].device_ms_per_step is None

    def ms(g: Any) -> float:
        return (g.cpu_ms_per_step if cpu else g.device_ms_per_step) or 0.0

    top = regions[:limit]
    chosen = {tuple(g.path) for g in top}
    kids: dict[tuple, list] = {}
    for g in top:  # kept in the report's order: the heaviest first
        up = tuple(g.path[:-1])
        while up and up not in chosen:  # a parent not among the top: the nearest one that is
            up = up[:-1]
        kids.setdefault(up, []).append(g)
    what = "CPU time" if cpu else "device time"
    title = f"regions ({what} / step)"
    head = f"{title:<{REGION_NAME}} {'total':>9} {'self':>9} {'TFLOP/s':>8} {'spread':>8}"
    out = [head.rstrip()]

    def walk(up: tuple, depth: int) -> None:
        for g in kids.get(up, []):
            name = "  " * depth + g.path[-1] + (" (module)" if g.kind == "module" else "")
            if len(name) > REGION_NAME:
                name = name[: REGION_NAME - 1] + "…"
            self_ms = None if cpu else g.device_self_ms_per_step
            tf = f"{g.achieved_tflops:.3g}" if g.achieved_tflops is not None else ""
            out.append(
                f"{name:<{REGION_NAME}} {units.fmt(ms(g), 'ms', bare=True):>9} "
                f"{units.fmt(self_ms, 'ms', bare=True) if self_ms is not None else '':>9} "
                f"{tf:>8} {_spread(g, cpu):>8}".rstrip()
            )
            walk(tuple(g.path), depth + 1)

    walk((), 0)
    out.append("  ms per step, mean over the ranks holding each" + ("" if cpu else ";"))
    if not cpu:
        out.append("  spread: the rank with the most device time, its excess over the median's")
    return out


def _spread(g: Any, cpu: bool) -> str:
    """`r5 +12%`: the rank with the most device time and its excess over the median's."""
    by = g.device_ms_by_rank
    if cpu or len(by) < 2 or g.max_rank is None or g.median_rank is None:
        return ""
    med, top = by.get(g.median_rank), by.get(g.max_rank)
    if not med or top is None:
        return ""
    return f"r{g.max_rank} +{100 * (top / med - 1):.0f}%"
