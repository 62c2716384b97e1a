"""The critical path's page (`c` on the timeline, or the palette): the step model's path
per step by kind and by rank, and its longest segments (the report's
`step_model.critical_path`), sortable; Enter on a segment puts the timeline's cursor on
it — its rank's lane, in the step that holds it."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from tracekit.report import units
from tracekit.report.render import segment_name
from tracekit.report.schema import CriticalPath, StepModelBlock
from tui.messages import JumpTo, Target
from tui.screens.table import TableScreen
from tui.widgets.timeline import PATH_STYLES

RANKS_SHOWN = 6  # by rank: the ranks carrying most of the path, then how many more


def share_line(title: str, parts: dict[str, float], limit: int | None = None) -> str:
    """`title  a 1.23 ms (45%) · b …`, largest first, zero parts left out."""
    total = sum(v for v in parts.values() if v) or 1.0
    items = sorted(((k, v) for k, v in parts.items() if v), key=lambda kv: -kv[1])
    shown = items[:limit] if limit else items
    text = " · ".join(
        f"{k} {units.fmt(v, 'ms')} ({units.fmt(v / total, 'fraction')})" for k, v in shown
    )
    if len(items) > len(shown):
        text += f" · {len(items) - len(shown)} more"
    return f"{title}  {text or '—'}"


def path_summary(model: StepModelBlock | None) -> str:
    """The head of the page: measured, replayed, the error, and the path's sums."""
    model = model or StepModelBlock()
    cp = model.critical_path or CriticalPath(by_kind={}, by_rank={})
    lines = [
        f"step measured {units.fmt(model.measured_step_ms, 'ms')} · replayed "
        f"{units.fmt(model.replayed_step_ms, 'ms')} · replay error "
        f"{units.fmt(model.replay_error, 'fraction')} · the path per step:",
        share_line("by kind", cp.by_kind),
        share_line("by rank", {f"r{k}": v for k, v in cp.by_rank.items()}, RANKS_SHOWN),
    ]
    return "\n".join(lines)


COLUMNS = [("ms", "ms"), ("rank", "rank"), ("kind", "kind"), ("at", "at ms"), ("name", "name")]


def segment_cell(key: str, v: Any, row: dict) -> Any:
    if key == "kind":
        return Text(str(v), style=PATH_STYLES.get(str(v), ""))
    if key in ("ms", "at"):
        return Text(units.fmt(v, "ms", bare=True), justify="right")
    if key == "rank":
        return Text(str(v), justify="right")
    return Text(str(v))


class PathScreen(TableScreen):
    NOTE_ID = "path-note"
    TABLE_ID = "path-segments"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back")]

    def compose_notes(self) -> ComposeResult:
        yield Static(id="path-head", markup=False)
        yield Static(
            "the longest segments (at: from the start of the step that holds it) · "
            "Enter: the timeline there",
            id=self.NOTE_ID,
            markup=False,
        )

    def on_mount(self) -> None:
        self.sub_title = "critical path"
        self.query_one("#path-head", Static).update(path_summary(self.session.step_model()))
        rows = []
        for seg, start, end in self.session.path_spans():
            step, t0 = self.session.step_of(seg.rank, start) or (None, None)
            rows.append(
                {
                    "ms": seg.ms,
                    "rank": seg.rank,
                    "kind": seg.kind,
                    "at": (start - t0) / 1e6 if t0 is not None else None,
                    "name": segment_name(seg),
                    "step": step,
                    "start_ns": start,
                    "end_ns": end,
                }
            )
        t = self.table
        t.set_data(COLUMNS, rows, segment_cell, sort_key="ms")
        t.focus()

    def open_row(self, row: dict) -> None:
        target = Target("timeline", rank=row["rank"], step=row["step"], at_ns=row["start_ns"])
        self.post_message(JumpTo(target))

    def segments(self) -> list[dict]:
        """The rows as shown (the tests read them)."""
        return list(self.table.shown_rows)
