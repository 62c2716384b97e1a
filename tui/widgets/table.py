"""A DataTable that keeps each row's raw values, so it sorts by numbers, not by the text
shown: `s` cycles the sort column, `r` reverses, a click on a header sorts by it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable


def _sort_key(v: Any) -> tuple:
    if v is None:
        return (2, 0)
    if isinstance(v, bool):
        return (0, int(v))
    if isinstance(v, int | float):
        return (0, v)
    return (1, str(v))


class SortableTable(DataTable):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort_next", "sort"),
        Binding("r", "sort_reverse", "reverse", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.columns_spec: list[tuple[str, str]] = []
        self.raw_rows: list[dict] = []
        self.render_cell: Callable[[str, Any, dict], Any] = lambda _k, v, _r: str(v)
        self.sort_key: str | None = None
        self.sort_reverse = False

    def set_data(
        self,
        columns: list[tuple[str, str]],
        rows: list[dict],
        render_cell: Callable[[str, Any, dict], Any] | None = None,
        sort_key: str | None = None,
        reverse: bool = True,
    ) -> None:
        """columns: (key, label); rows: dicts of raw values. A row that was under the
        cursor keeps it when the same row (the same dict: a refresh of its figures) is in
        the new data, so a jump made before a slow column arrives is not lost."""
        before = self.selected if getattr(self, "shown_rows", None) else None
        self.columns_spec = columns
        self.raw_rows = list(rows)
        if render_cell is not None:
            self.render_cell = render_cell
        self.sort_key = sort_key
        self.sort_reverse = reverse
        self._fill()
        if before is not None:
            at = next((i for i, r in enumerate(self.shown_rows) if r is before), None)
            if at is not None:
                self.move_cursor(row=at)

    def _fill(self) -> None:
        self.clear(columns=True)
        for key, lab in self.columns_spec:
            mark = (" ▼" if self.sort_reverse else " ▲") if key == self.sort_key else ""
            self.add_column(lab + mark, key=key)
        rows = self.raw_rows
        if self.sort_key is not None:
            rows = sorted(
                rows, key=lambda r: _sort_key(r.get(self.sort_key)), reverse=self.sort_reverse
            )
            # nulls stay last whichever the direction
            rows = [r for r in rows if r.get(self.sort_key) is not None] + [
                r for r in rows if r.get(self.sort_key) is None
            ]
        self.shown_rows = rows
        for i, r in enumerate(rows):
            cells = [self.render_cell(k, r.get(k), r) for k, _ in self.columns_spec]
            self.add_row(*[c if isinstance(c, Text) else Text(str(c)) for c in cells], key=str(i))

    def sort_by(self, key: str, reverse: bool | None = None) -> None:
        if reverse is None:
            reverse = not self.sort_reverse if key == self.sort_key else True
        self.sort_key, self.sort_reverse = key, reverse
        self._fill()

    def action_sort_next(self) -> None:
        keys = [k for k, _ in self.columns_spec]
        if not keys:
            return
        i = keys.index(self.sort_key) + 1 if self.sort_key in keys else 0
        self.sort_by(keys[i % len(keys)], reverse=True)

    def action_sort_reverse(self) -> None:
        if self.sort_key is not None:
            self.sort_by(self.sort_key, reverse=not self.sort_reverse)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    @property
    def selected(self) -> dict | None:
        if not getattr(self, "shown_rows", None) or self.cursor_row < 0:
            return None
        if self.cursor_row >= len(self.shown_rows):
            return None
        return self.shown_rows[self.cursor_row]
