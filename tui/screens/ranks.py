"""2 · Ranks: the per-rank breakdown (every figure the report has per rank), sortable,
stragglers marked; Enter opens that rank's timeline."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Footer, Static

from tracekit.report import units
from tui import fmt
from tui.screens.common import TkScreen
from tui.widgets import SortableTable

SKIP = ("window_start_ns", "straggler")
# the analyze table's columns first, then every other per-rank key in report order
FIRST = (
    "rank",
    "steps",
    "step_time_ms",
    "idle_fraction",
    "compute_fraction",
    "non_compute_fraction",
    "comm_overlap_fraction",
    "exposed_comm_fraction",
)
LABELS = {"step_time_ms": "step ms", "window_ms": "window ms"}


def rank_columns(ranks: list[dict]) -> list[tuple[str, str]]:
    """Every scalar per-rank key, in report order (new keys show up)."""
    keys: list[str] = []
    for r in ranks:
        for k, v in r.items():
            if k not in keys and not isinstance(v, dict | list) and k not in SKIP:
                keys.append(k)
    first = [k for k in FIRST if k in keys]
    keys = first + [k for k in keys if k not in first]
    cols = [("straggler", "")]
    for k in keys:
        lab = LABELS.get(k) or k.replace("_fraction", " %").replace("_", " ")
        cols.append((k, lab))
    return cols


def rank_cell(key: str, v: Any, row: dict) -> Any:
    if key == "straggler":
        return Text("◀ straggler" if v else "", style="bold red")
    if key == "rank":
        return Text(str(v), style="bold")
    unit = fmt.unit_of((key,))
    if unit in ("fraction", "ms"):  # the column header carries the unit
        return Text(units.fmt(v, unit, bare=True), justify="right")
    return Text(fmt.fmt(v, unit), justify="right")


class RanksScreen(TkScreen):
    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        yield Static(id="ranks-note", markup=False)
        yield SortableTable(id="ranks-table")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "ranks"
        rep = self.session.report
        stragglers = set((rep.get("summary") or {}).get("straggler_ranks") or [])
        rows = [dict(r, straggler=r["rank"] in stragglers) for r in rep.get("ranks", [])]
        table = self.query_one(SortableTable)
        table.set_data(rank_columns(rows), rows, rank_cell, sort_key="rank", reverse=False)
        note = "fractions in % of the window · Enter opens the rank's timeline · s sorts"
        if stragglers:
            note = f"stragglers: {fmt.fmt(sorted(stragglers))} · " + note
        self.query_one("#ranks-note", Static).update(note)
        table.focus()

    def on_screen_resume(self) -> None:
        pending = self.tk.pending.pop("ranks", None)
        if pending and pending.get("ranks"):
            table = self.query_one(SortableTable)
            for i, r in enumerate(table.shown_rows):
                if r["rank"] == pending["ranks"][0]:
                    table.move_cursor(row=i)
                    break

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        row = self.query_one(SortableTable).selected
        if row is not None:
            self.tk.jump_timeline(rank=row["rank"])
