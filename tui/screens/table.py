"""The table screens' base: a note over a sortable table (ranks, collectives and their
instances, ops and their kernels, the critical path's segments). Enter on a row calls
`open_row`; a jump's target puts the cursor on its row (`cursor_to`); a page whose rows
come from the store fetches them in a worker (`load_rows`: `fetch`, then `show_rows`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.widgets import DataTable, Footer, Static

from tui import fmt
from tui.screens.common import TkScreen
from tui.widgets import SortableTable


class TableScreen(TkScreen):
    NOTE_ID: ClassVar[str]
    TABLE_ID: ClassVar[str]

    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        yield from self.compose_notes()
        yield SortableTable(id=self.TABLE_ID)
        yield Footer()

    def compose_notes(self) -> ComposeResult:
        """What stands above the table: the note (its first text `first_note`)."""
        yield Static(self.first_note(), id=self.NOTE_ID, markup=False)

    def first_note(self) -> str:
        return ""

    @property
    def table(self) -> SortableTable:
        return self.query_one(SortableTable)

    def set_note(self, text: str) -> None:
        self.query_one(f"#{self.NOTE_ID}", Static).update(text)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        row = self.table.selected
        if row is not None:
            self.open_row(row)

    def open_row(self, row: dict) -> None:
        """Enter on a row (nothing by default)."""

    def cursor_to(self, match: Callable[[dict], bool]) -> None:
        """Put the cursor on the first row shown that matches."""
        for i, r in enumerate(self.table.shown_rows):
            if match(r):
                self.table.move_cursor(row=i)
                break

    def cursor_to_target_names(self) -> None:
        """A jump's target (a finding's evidence): the cursor on the first row it names
        (the rows of a report table, `tui.fmt.table_rows`)."""
        t = self.take_target()
        if t is not None and t.names:
            self.cursor_to(lambda r: getattr(r.get(fmt.ITEM), "name", None) in t.names)

    # rows from the store -------------------------------------------------------------
    def load_rows(self) -> None:
        self.run_worker(
            self._fetch_rows, thread=True, exclusive=True, group=self.TABLE_ID, exit_on_error=False
        )

    def _fetch_rows(self) -> None:
        rows = self.fetch()
        self.app.call_from_thread(self.show_rows, rows)

    def fetch(self) -> list[dict]:
        """The rows, read in a worker (the store may take a while)."""
        return []

    def show_rows(self, rows: list[dict]) -> None:
        """Put the fetched rows on the table (on the app's thread)."""
