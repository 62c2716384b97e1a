"""5 · Ops & kernels: the report's top ops by device time, with FLOPs, achieved TFLOP/s
and the fraction of their dtype's peak — the report's figures; Enter lists the op's kernels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from tracekit.report import units
from tracekit.report.schema import UNSET
from tui import fmt
from tui.messages import OpenKernels
from tui.screens.table import TableScreen

if TYPE_CHECKING:
    from tui.session import Session


def cell(key: str, v: Any, row: dict) -> Any:
    if key == "name":
        return Text(str(v))
    if v is None:
        return Text("—", justify="right")
    unit = "fraction" if key == "peak_fraction" else fmt.unit_of((key,))
    if unit == "ms":  # the column header carries the unit
        return Text(units.fmt(v, unit, bare=True), justify="right")
    if unit == "tflops":
        return Text(f"{v:,.2f}", justify="right")  # the header says TFLOP/s
    return Text(fmt.fmt(v, unit), justify="right")


LABELS = {"device_ms": "device ms", "achieved_tflops": "TFLOP/s", "peak_fraction": "% peak"}


class OpsScreen(TableScreen):
    NOTE_ID = "ops-note"
    TABLE_ID = "ops-table"

    def on_mount(self) -> None:
        self.sub_title = "ops & kernels"
        rep = self.session.report
        summary = rep.summary if rep is not None and rep.summary is not UNSET else None
        peaks = (summary.peak_flops_by_dtype if summary is not None else None) or {}
        rows = fmt.table_rows(rep.top_ops if rep is not None and rep.top_ops else [])
        cols = [(k, LABELS.get(k, k.replace("_", " "))) for k in fmt.scalar_keys(rows)]
        self.table.set_data(cols, rows, cell, sort_key="device_ms")
        peak_txt = ", ".join(f"{c} {fmt.fmt(p, 'flops_per_s')}" for c, p in peaks.items())
        note = (
            f"peak per dtype: {peak_txt} · Enter: the op's kernels · s sorts"
            if peaks
            else "peak unknown (see the overview's notes) · Enter: the op's kernels"
        )
        if not rows:
            note = "no counted ops (GEMM, convolution, attention): record_shapes off, or none ran"
        unc = summary.uncounted_compute_fraction if summary is not None else None
        if unc:  # what MFU leaves out: GEMM/attention work without FLOPs
            uncounted = rep.top_uncounted_ops if rep is not None and rep.top_uncounted_ops else []
            names = ", ".join(str(o.name) for o in uncounted[:3])
            note += (
                f"\ncompute not counted: {fmt.fmt(unc, 'fraction')} of compute time"
                + (f" — most in {names}" if names else "")
                + " (uncounted column: why)"
            )
        self.set_note(note)
        self.table.focus()

    def on_screen_resume(self) -> None:
        self.cursor_to_target_names()

    def open_row(self, row: dict) -> None:
        self.post_message(OpenKernels(row[fmt.ITEM].name or ""))


class KernelsScreen(TableScreen):
    NOTE_ID = "kern-note"
    TABLE_ID = "kern-table"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back")]

    def __init__(self, session: Session, op: str) -> None:
        super().__init__(session)
        self.op = op
        self.kernels: list[dict] | None = None

    def first_note(self) -> str:
        return f"{self.op} · loading …"

    def on_mount(self) -> None:
        self.sub_title = f"kernels of {self.op}"
        self.table.focus()
        self.load_rows()

    def fetch(self) -> list[dict]:
        return self.session.op_kernels(self.op)

    def show_rows(self, rows: list[dict]) -> None:
        self.kernels = rows
        cols = [  # the name last: kernel names run long
            ("total_ns", "total ms"),
            ("launches", "launches"),
            ("mean_ns", "mean µs"),
            ("stream", "stream"),
            ("name", "kernel"),
        ]

        def cell(k, v, r):
            if k == "total_ns":
                return Text(f"{v / 1e6:,.3f}", justify="right")
            if k == "mean_ns":
                return Text(f"{v / 1e3:,.1f}", justify="right")
            return Text(str(v), justify="right" if k != "name" else "left")

        self.table.set_data(cols, rows, cell, sort_key="total_ns")
        note = (
            f"{self.op} · {len(rows)} kernels, launched on the op's thread within its span"
            if rows
            else f"{self.op}: no kernels — a CPU run (the op ran on the host), or no "
            "launches recorded inside it"
        )
        self.set_note(note)
