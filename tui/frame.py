"""One timeline viewport aggregated to columns (`Frame`), folded from the rows of the
`tui.timeline:frame` query; `tui.widgets.timeline` draws it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Frame:
    """One timeline viewport aggregated to columns.

    `cover[lane][category]` is a list of ns of that category in each column (summed over
    the lane's streams, so it may exceed the column on a busy multi-stream rank);
    `hits[lane]` is a set of columns holding an event whose name matches the highlight."""

    t0: int
    t1: int
    ncols: int
    lanes: list[tuple[int, Any]]
    cover: dict[tuple[int, Any], dict[str, list[int]]] = field(default_factory=dict)
    hits: dict[tuple[int, Any], set[int]] = field(default_factory=dict)

    @property
    def col_ns(self) -> float:
        return (self.t1 - self.t0) / self.ncols


def fold(fr: Frame, rows: list[tuple]) -> Frame:
    """Add the query's (rank, lane, category, col, ns, hit) rows of the frame's lanes."""
    wanted = set(fr.lanes)
    for rank, lane, cat, col, ns, hit in rows:
        key = (rank, lane)
        if key not in wanted or not 0 <= col < fr.ncols:
            continue
        cov = fr.cover.setdefault(key, {})
        arr = cov.get(cat)
        if arr is None:
            arr = cov[cat] = [0] * fr.ncols
        arr[col] += max(0, ns)
        if hit:
            fr.hits.setdefault(key, set()).add(col)
    return fr
