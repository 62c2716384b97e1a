"""One level of the overview as a panel: its name and verdict in the border, its two or
three key figures measured beside predicted (`tui.fmt.KEY_FIGURES`). Narrow (`compact`:
the overview's two columns would cut the labels), the panel is three rows of one table
the four panels share — name and verdict on the left, fixed columns — so every label is
whole at 80 columns. Enter or a click posts `LevelPanel.Selected`; the screen decides
what opens."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Static

from tracekit.report.schema import Level
from tui import fmt

VERDICT_STYLE = {"ok": "green", "warning": "bold yellow", "critical": "bold red",
                 "unknown": "bold magenta"}  # fmt: skip


class LevelPanel(Static, can_focus=True):
    DEFAULT_CSS = """
    LevelPanel {
        height: auto;
        border: round $primary 60%;
        border-title-style: bold;
        padding: 0 1;
    }
    LevelPanel:focus { border: round $accent; }
    LevelPanel.-warning { border: round $warning; }
    LevelPanel.-critical { border: heavy $error; }
    LevelPanel.-unknown { border: dashed $secondary; }
    LevelPanel.-warning:focus, LevelPanel.-critical:focus, LevelPanel.-unknown:focus {
        border: double $accent;
    }
    LevelPanel.-compact, LevelPanel.-compact.-warning, LevelPanel.-compact.-critical,
    LevelPanel.-compact.-unknown {
        border: none; padding: 0;
    }
    LevelPanel.-compact:focus { background: $boost; }
    """
    # compact: the widths of the shared columns (level, figure, measured, predicted)
    COMPACT_WIDTHS = (14, 26, 11, 11)
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "open level")]

    class Selected(Message):
        def __init__(self, level: str) -> None:
            super().__init__()
            self.level = level

    def __init__(self, level: str, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.level = level
        self.rows: list[dict] = []
        self.verdict: str | None = None
        self.block: Level | None = None
        self.compact = False
        self.border_title = level

    def set_compact(self, compact: bool) -> None:
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
            self.set_level(self.block)

    @classmethod
    def compact_header(cls) -> Table:
        """The column heads the compact panels share (one line above them)."""
        table = cls._compact_table()
        table.add_row("", "", Text("measured", style="dim"), Text("predicted", style="dim"))
        return table

    @classmethod
    def _compact_table(cls) -> Table:
        table = Table(box=None, padding=(0, 0, 0, 1), pad_edge=False, show_header=False)
        lw, fw, vw, pw = cls.COMPACT_WIDTHS
        table.add_column(width=lw, no_wrap=True)
        table.add_column(width=fw, no_wrap=True, overflow="ellipsis")
        table.add_column(width=vw, justify="right", no_wrap=True)
        table.add_column(width=pw, justify="right", no_wrap=True)
        return table

    def set_level(self, block: Level | None) -> None:
        """Show the level's block of the report (None: not diagnosed yet)."""
        self.remove_class("-ok", "-warning", "-critical", "-unknown")
        self.block = block
        if block is None:
            self.verdict, self.rows = None, []
            self.border_title = self.level
            self.update(Text(f"{self.level} …" if self.compact else "…", style="dim"))
            return
        self.verdict = block.verdict
        self.add_class(f"-{self.verdict}")
        style = VERDICT_STYLE.get(self.verdict or "", "")
        self.border_title = Text.assemble(
            (self.level, "bold"), " ", (fmt.verdict_word(self.verdict), style)
        )
        self.rows = fmt.key_rows(block)
        if self.compact:
            table = self._compact_table()
            heads = [Text(self.level, style="bold"), Text(fmt.verdict_word(self.verdict), style)]
            for i, row in enumerate(self.rows):
                table.add_row(
                    heads[i] if i < len(heads) else "",
                    row["label"],
                    row["measured_text"],
                    row["predicted_text"],
                )
            self.update(table)
            return
        table = Table(box=None, padding=(0, 0, 0, 1), pad_edge=False, expand=True)
        table.add_column("", ratio=1, no_wrap=True, overflow="ellipsis")
        table.add_column("measured", justify="right", no_wrap=True, header_style="dim")
        table.add_column("predicted", justify="right", no_wrap=True, header_style="dim")
        for row in self.rows:
            table.add_row(row["label"], row["measured_text"], row["predicted_text"])
        self.update(table)

    def action_select(self) -> None:
        self.post_message(self.Selected(self.level))

    def on_click(self) -> None:
        self.post_message(self.Selected(self.level))
