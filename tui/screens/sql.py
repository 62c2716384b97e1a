"""7 · SQL: a read-only console over the views (the rules of `tracekit query`): type a
query, Enter runs it, results in a table; the views and their column docs in a tree;
history with ↑/↓."""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Static, Tree

from tui.screens.common import TkScreen

EXAMPLE = "SELECT rank, count(*) AS n FROM device_activity GROUP BY rank ORDER BY rank"


class HistoryInput(Input):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "older", show=False),
        Binding("down", "history(1)", "newer", show=False),
    ]

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.history: list[str] = []
        self.pos = 0

    def remember(self, text: str) -> None:
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self.pos = len(self.history)

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        self.pos = max(0, min(len(self.history), self.pos + step))
        self.value = self.history[self.pos] if self.pos < len(self.history) else ""
        self.cursor_position = len(self.value)


class SqlScreen(TkScreen):
    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        with Horizontal(id="sql-body"):
            yield Tree("views", id="sql-tree")
            with Vertical(id="sql-main"):
                yield HistoryInput(placeholder=EXAMPLE, id="sql-input")
                yield Static(
                    "Enter runs the query (read-only) · ↑/↓ history", id="sql-status", markup=False
                )
                yield DataTable(id="sql-results", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "sql"
        tree = self.query_one(Tree)
        tree.root.expand()
        for name, doc in sorted(self.session.views().items()):
            node = tree.root.add(name, data=name)
            for col, text in doc.columns.items():
                node.add_leaf(f"{col}: {text}", data=f"{name}.{col}")
        self.query_one(HistoryInput).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        q = event.value.strip() or EXAMPLE
        self.query_one(HistoryInput).remember(q)
        self.query_one("#sql-status", Static).update("running …")
        self.run_query(q)

    @work(thread=True, exclusive=True, group="sql", exit_on_error=False)
    def run_query(self, q: str) -> None:
        cols, rows, more = self.session.user_query(q)
        self.app.call_from_thread(self._show, cols, rows, more)

    def _show(self, cols: list[str], rows: list[tuple], more: bool) -> None:
        self.last_result = (cols, rows)
        t = self.query_one("#sql-results", DataTable)
        t.clear(columns=True)
        t.add_columns(*cols)
        t.add_rows([["NULL" if v is None else str(v) for v in r] for r in rows])
        self.query_one("#sql-status", Static).update(
            f"{len(rows)}{'+' if more else ''} rows" + (" (first 5000 shown)" if more else "")
        )

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        data = event.node.data
        if isinstance(data, str) and "." not in data:
            inp = self.query_one(HistoryInput)
            inp.value = f"SELECT * FROM {data} LIMIT 100"
            inp.focus()
