"""The levels page (Enter on a level of the overview, or `l`): every figure of the four
levels, measured beside predicted with the gap, and each level's notes. Each level block
is listed generically (its Structs' fields, `tui.fmt.level_rows`): a figure the report
gains shows up here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Static

from tracekit.model import figures as F
from tracekit.report.schema import UNSET
from tui import fmt
from tui.screens.common import TkScreen
from tui.widgets.levelpanel import VERDICT_STYLE

if TYPE_CHECKING:
    from tui.session import Session


def grouped(rows: list[dict]) -> list[dict]:
    """A level's rows with the exposed communication's two breakdowns
    (`figures.EXPOSED_PARTS`) right below it, each under its name, as the text report
    lays them out; other rows keep the report's order."""
    parts = {key for keys in F.EXPOSED_PARTS.values() for key in keys}
    by_key = {r["path"][0]: r for r in rows if len(r["path"]) == 1 and r["path"][0] in parts}
    out = []
    for row in rows:
        if row in by_key.values():
            continue
        out.append(row)
        if row["path"] == (F.EXPOSED_COMM_FRACTION.key,) and by_key:
            for group, keys in F.EXPOSED_PARTS.items():
                out.append({"group": group})
                out += [{**by_key[k], "depth": 3} for k in keys if k in by_key]
    return out


def _justify(v) -> str:
    """Numbers right, words left (a long word is then cut at its end, not its start)."""
    return "left" if isinstance(v, str) else "right"


class LevelsScreen(TkScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back")]

    def __init__(self, session: Session, level: str | None = None) -> None:
        super().__init__(session)
        self.level = level
        self.level_rows: list[dict] = []
        self.level_notes: list[list[str]] = []
        self.level_starts: dict[str, int] = {}

    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        yield DataTable(id="levels", cursor_type="row", zebra_stripes=True)
        yield Static(id="level-note", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "levels"
        rep = self.session.report
        table = self.query_one("#levels", DataTable)
        fig_w = max(27, min(44, self.app.size.width - 52))
        val_w = 16 if self.app.size.width >= 100 else 13
        table.add_column("figure", width=fig_w, key="figure")
        table.add_column("measured", width=val_w, key="measured")
        table.add_column("predicted", width=val_w, key="predicted")
        table.add_column("gap / verdict", width=13, key="gap")
        levels = rep.levels if rep is not None and rep.levels is not UNSET else []
        for lv in levels:
            v = lv.verdict
            why = lv.verdict_reason
            notes = ([f"verdict unknown: {why}"] if why else []) + list(lv.notes)
            self.level_starts[lv.level] = table.row_count
            table.add_row(
                Text(lv.level, style="bold"),
                "",
                "",
                Text(fmt.verdict_word(v), style=VERDICT_STYLE.get(v, ""), justify="right"),
            )
            self.level_notes.append(notes)
            for row in grouped(fmt.level_rows(lv)):
                if "group" in row:  # a breakdown's name: its parts follow, indented
                    table.add_row(Text("    " + row["group"] + ":", style="italic"), "", "", "")
                    self.level_notes.append(notes)
                    continue
                self.level_rows.append(row)
                # a value in words longer than its column (the peak's source) wraps
                # onto more lines instead of being cut
                long = max(len(row["measured_text"]), len(row["predicted_text"])) > val_w
                table.add_row(
                    "  " * row.get("depth", 1) + row["label"],
                    Text(row["measured_text"], justify=_justify(row["measured"])),
                    Text(row["predicted_text"], justify=_justify(row["predicted"])),
                    Text(row["gap"], justify="right"),
                    height=None if long else 1,
                )
                self.level_notes.append(notes)
        if not self.level_rows:
            table.add_row("breakdown only: no diagnosers", "", "", "")
            self.level_notes.append([])
        if self.level in self.level_starts:
            table.move_cursor(row=self.level_starts[self.level])
        table.focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.level_notes):
            notes = self.level_notes[event.cursor_row]
            self.query_one("#level-note", Static).update(
                "note: " + " · ".join(notes) if notes else ""
            )

    def shown_figures(self) -> list[dict[str, Any]]:
        """What the table shows, raw and as text (the tests compare it with
        `tracekit analyze --format json`)."""
        return self.level_rows
