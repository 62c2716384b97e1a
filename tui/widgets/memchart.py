"""Allocated / reserved memory over time per rank, one row each, in eighth blocks against a
common scale: the device capacity when known, else the largest of the peaks and the
prediction. Cells above the predicted line are yellow, above 90% of capacity red."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widget import Widget

from tui.widgets.timeline import EIGHTHS

LABEL_W = 12
ROWS = 3  # rows per series


def render_memory(
    series: dict[int, dict[str, Any]],
    width: int,
    capacity: dict[int, int | None],
    predicted: float | None,
) -> Text:
    out = Text(no_wrap=True, overflow="crop")
    ncols = max(1, width - LABEL_W)
    peaks = [v for d in series.values() for k in ("allocated", "reserved") for v in d[k] if v]
    caps = [c for c in capacity.values() if c]
    scale = max([*caps, predicted or 0, *(peaks or [1])])
    out.append(f"scale: 0 … {scale / 1e9:,.2f} GB (", style="dim")
    out.append("capacity" if caps else "peak or prediction", style="dim")
    out.append(")\n", style="dim")
    for rank in sorted(series):
        d = series[rank]
        cap = capacity.get(rank)
        for what in ("allocated", "reserved"):
            vals = d[what]
            if not any(vals):
                continue
            filled, last = [], 0
            for c in range(min(ncols, len(vals))):
                last = vals[c] if vals[c] is not None else last
                filled.append(last)
            for row in range(ROWS):  # top row first; eighths give sub-cell height
                lab = f"r{rank} {what[:5]}" if row == ROWS - 1 else ""
                out.append(f"{lab:>{LABEL_W - 1}} ", style="bold")
                for v in filled:
                    eighths = round(8 * ROWS * v / scale) if scale else 0
                    level = max(0, min(8, eighths - 8 * (ROWS - 1 - row)))
                    style = "green"
                    if cap and v >= 0.9 * cap:
                        style = "bold red"
                    elif predicted and v > predicted:
                        style = "yellow"
                    out.append(
                        EIGHTHS[level] if level else ("·" if row == ROWS - 1 else " "), style=style
                    )
                out.append("\n")
    return out


class MemoryChart(Widget):
    DEFAULT_CSS = "MemoryChart { height: auto; min-height: 3; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.series: dict[int, dict[str, Any]] = {}
        self.capacity: dict[int, int | None] = {}
        self.predicted: float | None = None

    def set_data(self, series, capacity, predicted) -> None:
        self.series, self.capacity, self.predicted = series, capacity, predicted
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:
        return 1 + ROWS * sum(
            1 for d in self.series.values() for k in ("allocated", "reserved") if any(d[k])
        )

    def render(self) -> Text:
        return render_memory(self.series, self.size.width, self.capacity, self.predicted)
