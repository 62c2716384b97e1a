"""1 · Overview: run facts, the four levels (each figure measured beside predicted, with
the gap and a coloured verdict) and the findings ordered by impact. All of it is the
report's dict, rendered generically: a key the report gains shows up here."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Label, Static

from tui import fmt
from tui.screens.common import TkScreen

VERDICT_STYLE = {"ok": "green", "warning": "bold yellow", "critical": "bold red"}
SEVERITY_STYLE = {"info": "cyan", "warning": "bold yellow", "critical": "bold red"}


def run_facts(report: dict, display_path: str) -> str:
    r = report.get("run", {})
    dev = r.get("device")
    dev = ", ".join(dev) if isinstance(dev, list) else (dev or "—")
    be = r.get("backend")
    be = ", ".join(be) if isinstance(be, list) else (be or "—")
    steps = r.get("steps") or []
    step_txt = f"{steps[0]}–{steps[-1]}" if steps else "none (whole trace)"
    win = report.get("window", {})
    summ = report.get("summary", {})
    step_ms = summ.get("step_time_ms")
    if step_ms is None and report.get("ranks"):
        vals = [x["step_time_ms"] for x in report["ranks"] if x.get("step_time_ms") is not None]
        step_ms = sum(vals) / len(vals) if vals else None
    facts = (
        f"run {display_path}\n"
        f"{len(r.get('ranks', []))} of {r.get('world_size')} ranks · backend {be} · "
        f"device {dev} · ProfilerSteps {step_txt} · window {win.get('kind', '—')} · "
        f"step {fmt.fmt(step_ms, 'ms')}"
    )
    if r.get("rank_selection"):
        from tracekit.report.render import selection_line

        facts += "\n" + selection_line(r["rank_selection"])
    return facts


def _justify(v) -> str:
    """Numbers right, words left (a long word is then cut at its end, not its start)."""
    return "left" if isinstance(v, str) else "right"


class OverviewScreen(TkScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "focus_findings", "findings"),
        Binding("l", "focus_levels", "levels", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        yield Static(id="facts", markup=False)
        yield DataTable(id="levels", cursor_type="row", zebra_stripes=True)
        yield Static(id="level-note", markup=False)
        yield Label("findings", id="findings-title")
        yield DataTable(id="findings", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "overview"
        self.tk.overview = self
        self.fill()
        self.call_after_refresh(self.tk.painted.set)

    def fill(self) -> None:
        """Draw the report as it stands (the run's facts first, the rest once the
        diagnosers are done)."""
        rep = self.session.report
        self.level_rows = []
        self.level_notes: list[list[str]] = []
        self.findings = []
        facts = run_facts(rep, self.session.display_path)
        if self.session.report_error:
            facts += f"\nreport failed ({self.session.report_error}); drill-down still works"
        self.query_one("#facts", Static).update(facts)
        lv_table = self.query_one("#levels", DataTable)
        lv_table.clear(columns=True)
        title = self.query_one("#findings-title", Label)
        ft = self.query_one("#findings", DataTable)
        ft.clear(columns=True)
        if not self.session.diagnosed:
            lv_table.add_column("figure")
            lv_table.add_row("running the diagnosers …")
            title.update("")
            ft.display = False
            return
        self.level_rows = [row for lv in rep.get("levels", []) for row in fmt.level_rows(lv)]
        fig_w = max(27, min(44, self.app.size.width - 52))
        lv_table.add_column("figure", width=fig_w, key="figure")
        val_w = 16 if self.app.size.width >= 100 else 13
        lv_table.add_column("measured", width=val_w, key="measured")
        lv_table.add_column("predicted", width=val_w, key="predicted")
        lv_table.add_column("gap / verdict", width=13, key="gap")
        for lv in rep.get("levels", []):
            v = lv.get("verdict", "")
            notes = list(lv.get("notes") or [])
            lv_table.add_row(
                Text(lv.get("level", ""), style="bold"),
                "",
                "",
                Text(v, style=VERDICT_STYLE.get(v, ""), justify="right"),
            )
            self.level_notes.append(notes)
            for row in fmt.level_rows(lv):
                lv_table.add_row(
                    "  " + row["label"],
                    Text(row["measured_text"], justify=_justify(row["measured"])),
                    Text(row["predicted_text"], justify=_justify(row["predicted"])),
                    Text(row["gap"], justify="right"),
                )
                self.level_notes.append(notes)
        if not self.level_rows:
            lv_table.add_row("breakdown only: no diagnosers", "", "", "")
            self.level_notes.append([])
        self.findings = list(rep.get("findings", []))
        ft.add_columns("severity", "code", "ms/step", "ranks", "finding")
        for f in self.findings:
            ft.add_row(
                Text(f["severity"], style=SEVERITY_STYLE.get(f["severity"], "")),
                f["code"],
                Text(
                    fmt.fmt(f.get("impact_ms"))
                    if f.get("impact_ms") is None
                    else f"{f['impact_ms']:,.1f}",
                    justify="right",
                ),
                fmt.fmt(f.get("ranks"), "ranks"),
                f["title"],
            )
        if not self.findings:
            title.update("findings: none — healthy at every level")
            ft.display = False
        else:
            title.update(f"findings ({len(self.findings)}) — Enter opens one")
            ft.display = True
            ft.focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "levels" and 0 <= event.cursor_row < len(self.level_notes):
            notes = self.level_notes[event.cursor_row]
            self.query_one("#level-note", Static).update(
                "note: " + " · ".join(notes) if notes else ""
            )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "findings":
            self.open_finding(event.cursor_row)

    def open_finding(self, index: int) -> None:
        from tui.screens.finding import FindingScreen

        if 0 <= index < len(self.findings):
            self.app.push_screen(FindingScreen(self.findings[index]))

    def action_focus_findings(self) -> None:
        self.query_one("#findings", DataTable).focus()

    def action_focus_levels(self) -> None:
        self.query_one("#levels", DataTable).focus()

    def shown_figures(self) -> list[dict[str, Any]]:
        """What the levels table shows, raw and as text (the tests compare it with
        `tracekit analyze --format json`)."""
        return self.level_rows
