"""2 · Ranks: the per-rank breakdown (every figure the report has per rank), sortable,
stragglers marked; Enter opens that rank's timeline."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.schema import UNSET
from tui import fmt
from tui.messages import JumpTo, Target
from tui.screens.table import TableScreen

SKIP = ("window_start_ns", "straggler")
# the analyze table's columns first, then every other per-rank key in report order
FIRST = (
    "rank",
    "steps",
    F.STEP_TIME_MS.key,
    F.IDLE_FRACTION.key,
    F.COMPUTE_FRACTION.key,
    F.NON_COMPUTE_FRACTION.key,
    F.COMM_OVERLAP_FRACTION.key,
    F.EXPOSED_COMM_FRACTION.key,
)
LABELS = {F.STEP_TIME_MS.key: "step ms", "window_ms": "window ms"}


def rank_columns(ranks: list[dict]) -> list[tuple[str, str]]:
    """Every scalar per-rank figure, in report order (new fields show up)."""
    keys = fmt.scalar_keys(ranks, SKIP)
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


class RanksScreen(TableScreen):
    NOTE_ID = "ranks-note"
    TABLE_ID = "ranks-table"

    def on_mount(self) -> None:
        self.sub_title = "ranks"
        rep = self.session.report
        summary = rep.summary if rep is not None and rep.summary is not UNSET else None
        stragglers = set(summary.straggler_ranks or []) if summary is not None else set()
        rows = fmt.table_rows(rep.ranks if rep is not None else [])
        for row in rows:
            row["straggler"] = row[fmt.ITEM].rank in stragglers
        table = self.table
        table.set_data(rank_columns(rows), rows, rank_cell, sort_key="rank", reverse=False)
        note = "fractions in % of the window · Enter opens the rank's timeline · s sorts"
        if stragglers:
            note = f"stragglers: {fmt.fmt(sorted(stragglers))} · " + note
        self.set_note(note)
        table.focus()

    def on_screen_resume(self) -> None:
        t = self.take_target()
        if t is not None and t.ranks:
            self.cursor_to(lambda r: r[fmt.ITEM].rank == t.ranks[0])

    def open_row(self, row: dict) -> None:
        self.post_message(JumpTo(Target("timeline", rank=row[fmt.ITEM].rank)))
