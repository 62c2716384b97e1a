"""6 · Memory: allocated / reserved over time per rank against capacity and the
predicted line, from `[memory]` events; when the trace has none, why not."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from tracekit.report.schema import MemoryLevel, Report
from tui import fmt
from tui.screens.common import TkScreen
from tui.widgets import MemoryChart
from tui.widgets.memchart import LABEL_W


def memory_level(report: Report | None) -> MemoryLevel:
    """The report's memory level; an empty one without it (no figures, no notes)."""
    lv = report.level("memory") if report is not None else None
    return lv if isinstance(lv, MemoryLevel) else MemoryLevel()


class MemoryScreen(TkScreen):
    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        with VerticalScroll(id="mem-body"):
            yield Static(id="mem-facts", markup=False)
            yield MemoryChart(id="mem-chart")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "memory"
        lv = memory_level(self.session.report)
        # every figure of the level, listed generically: the Structs as their JSON values
        lines = [
            f"{fmt.label(p)}: {fmt.fmt(v, fmt.unit_of(p))}"
            for part, block in (("measured", lv.measured), ("predicted", lv.predicted))
            for p, v in fmt.leaves({part: fmt.as_json(block)})
        ]
        for n in lv.notes:
            lines.append(f"note: {n}")
        self.facts = "\n".join(lines)
        self.query_one("#mem-facts", Static).update(self.facts + "\n\nloading …")
        self._load(max(10, self.size.width - LABEL_W - 2))

    @work(thread=True, exclusive=True, group="mem", exit_on_error=False)
    def _load(self, ncols: int) -> None:
        series = self.session.memory_series(ncols)
        self.app.call_from_thread(self._apply, series, self.session.profile_memory())

    def _apply(self, series: dict, profile_memory: dict) -> None:
        lv = memory_level(self.session.report)
        caps = {r["rank"]: r.get("capacity_bytes") for r in lv.metrics.get("ranks", [])}
        pred = lv.predicted.predicted_memory_bytes
        chart = self.query_one(MemoryChart)
        if not series:
            why = (
                "the traces were recorded without profile_memory=True"
                if not any(profile_memory.values())
                else "profile_memory was on, but no [memory] event fell in the trace"
            )
            self.query_one("#mem-facts", Static).update(
                f"{self.facts}\n\nno memory timeline: no [memory] events — {why}."
            )
            chart.display = False
            return
        legend = (
            "per rank, allocated and reserved over the trace; "
            "yellow above the prediction, red ≥ 90% of capacity"
        )
        self.query_one("#mem-facts", Static).update(f"{self.facts}\n\n{legend}")
        chart.set_data(series, caps, pred)
