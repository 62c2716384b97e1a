"""4 · Collectives: the report's collectives (every key it has) plus the skew of their
matched instances; Enter shows one collective's instances across ranks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType

from tui import fmt
from tui.messages import JumpTo, OpenInstances, Target
from tui.screens.table import TableScreen

if TYPE_CHECKING:
    from tui.session import Session

LABELS = {
    "name": "collective",
    "group_size": "ranks",
    "bytes": "size",
    "count_per_step": "/step",
    "transfer_ms": "transfer ms",
    "predicted_ms": "pred ms",
    "busbw_GBps": "busbw GB/s",
    "predicted_busbw_GBps": "pred GB/s",
    "time_ms_per_step": "ms/step",
    "exposed_ms": "exposed ms",
    "mean_skew_ms": "skew ms",
}


# the order first (what a reader compares), then every other key of the report
FIRST = (
    "name",
    "group_size",
    "bytes",
    "count_per_step",
    "transfer_ms",
    "predicted_ms",
    "busbw_GBps",
    "predicted_busbw_GBps",
    "exposed_ms",
    "mean_skew_ms",
)


def cell(key: str, v: Any, row: dict) -> Any:
    if key == "name":
        return Text(str(v), style="bold")
    if v is None:
        return Text("—", justify="right")
    if key == "bytes":
        return Text(fmt.fmt(v, "bytes"), justify="right")
    if isinstance(v, float):
        return Text(f"{v:,.2f}" if key != "count_per_step" else f"{v:,.1f}", justify="right")
    return Text(fmt.fmt(v), justify="right")


class CollectivesScreen(TableScreen):
    NOTE_ID = "coll-note"
    TABLE_ID = "coll-table"

    def on_mount(self) -> None:
        self.sub_title = "collectives"
        rep = self.session.report
        self.rows = fmt.table_rows(rep.collectives if rep is not None and rep.collectives else [])
        self.fill()
        self.table.focus()
        self._load_skew()

    def fill(self) -> None:
        keys = fmt.scalar_keys(self.rows)
        first = [k for k in FIRST if k in keys]
        keys = first + [k for k in keys if k not in first]
        cols = [(k, LABELS.get(k, k.replace("_", " "))) for k in keys]
        t = self.table
        t.set_data(
            cols,
            self.rows,
            cell,
            sort_key=t.sort_key or "exposed_ms",
            reverse=t.sort_reverse if t.sort_key else True,
        )
        note = "per step, as in the report · skew: mean spread of arrivals across ranks"
        if not self.rows:
            note = "no collectives in this run"
        self.set_note(note + " · Enter: instances · s sorts")

    @work(thread=True, exclusive=True, group="coll-skew", exit_on_error=False)
    def _load_skew(self) -> None:
        skew = self.session.collective_skew()
        self.app.call_from_thread(self._apply_skew, skew)

    def _apply_skew(self, skew: dict) -> None:
        for r in self.rows:
            c = r[fmt.ITEM]
            s = skew.get((c.name, c.bytes))
            r["mean_skew_ms"] = None if s is None else s["mean_skew_ns"] / 1e6
        self.fill()

    def on_screen_resume(self) -> None:
        self.cursor_to_target_names()

    def open_row(self, row: dict) -> None:
        c = row[fmt.ITEM]
        self.post_message(OpenInstances(c.name or "", c.bytes))


class InstancesScreen(TableScreen):
    """One collective's instances across ranks: arrival, wait, the last rank marked."""

    NOTE_ID = "inst-note"
    TABLE_ID = "inst-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("t", "timeline", "timeline"),
    ]

    def __init__(self, session: Session, name: str, nbytes: Any) -> None:
        super().__init__(session)
        self.coll_name = name
        self.nbytes = nbytes
        self.instances: list[dict] = []

    def first_note(self) -> str:
        return f"{self.coll_name} · {fmt.fmt(self.nbytes, 'bytes')} · loading …"

    def on_mount(self) -> None:
        self.sub_title = f"{self.coll_name} instances"
        self.table.focus()
        self.load_rows()

    def fetch(self) -> list[dict]:
        return self.session.collective_instances(self.coll_name, self.nbytes)

    def show_rows(self, rows: list[dict]) -> None:
        self.instances = rows
        cols = [
            ("occurrence", "#"),
            ("rank", "rank"),
            ("arrival_ns", "arrival ms"),
            ("wait_ns", "wait ms"),
            ("dur_ns", "duration ms"),
            ("transfer_ns", "transfer ms"),
            ("last", ""),
        ]

        def cell(k, v, r):
            if k == "last":
                return Text("◀ last" if v else "", style="bold red")
            if k.endswith("_ns"):
                return Text("—" if v is None else f"{v / 1e6:,.3f}", justify="right")
            return Text(str(v), justify="right")

        self.table.set_data(cols, rows, cell)
        n = len({r["occurrence"] for r in rows})
        self.set_note(
            f"{self.coll_name} · {fmt.fmt(self.nbytes, 'bytes')} · {n} instances matched "
            "across ranks · arrival after the first rank · t: timeline"
            if rows
            else f"{self.coll_name}: no instance matched across ranks (point-to-point, or "
            "a single-rank run)"
        )

    def action_timeline(self) -> None:
        row = self.table.selected
        if row is not None:
            self.post_message(JumpTo(Target("timeline", rank=row["rank"], at_ns=row["ts_ns"])))
