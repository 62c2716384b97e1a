"""1 · Overview, a dashboard: the run's facts, the four levels as panels (each with its
verdict and its key figures measured beside predicted, `tui.fmt.KEY_FIGURES`) and the
findings ordered by impact — all on one 80×24 screen. Enter on a level opens every figure
of the levels (`LevelsScreen`); Enter on a finding opens its page; `w` the what-if page."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.widgets import DataTable, Footer, Label, Static

from tracekit.model import figures as F
from tui import fmt
from tui.messages import OpenFinding, OpenLevels, OpenWhatIf, Painted
from tui.screens.common import TkScreen
from tui.widgets import LevelPanel

SEVERITY_STYLE = {"info": "cyan", "warning": "bold yellow", "critical": "bold red"}


def run_facts(report: dict, display_path: str) -> str:
    r = report.get("run", {})
    dev = r.get("device")
    dev = ", ".join(dev) if isinstance(dev, list) else (dev or "—")
    be = r.get("backend")
    be = ", ".join(be) if isinstance(be, list) else (be or "—")
    steps = r.get("steps") or []
    step_txt = "none (whole trace)"
    if steps:
        step_txt = f"{steps[0]}–{steps[-1]}" if len(steps) > 1 else str(steps[0])
    win = report.get("window", {})
    summ = report.get("summary", {})
    step_ms = summ.get(F.STEP_TIME_MS.key)
    if step_ms is None and report.get("ranks"):
        vals = [
            x[F.STEP_TIME_MS.key] for x in report["ranks"] if x.get(F.STEP_TIME_MS.key) is not None
        ]
        step_ms = sum(vals) / len(vals) if vals else None
    facts = (
        f"run {display_path} · {len(r.get('ranks', []))} of {r.get('world_size')} ranks · "
        f"step {fmt.fmt(step_ms, 'ms')}\n"
        f"backend {be} · device {dev} · ProfilerSteps {step_txt} · window {win.get('kind', '—')}"
    )
    if r.get("rank_selection"):
        from tracekit.report.render import selection_line

        facts += "\n" + selection_line(r["rank_selection"])
    return facts


class OverviewScreen(TkScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "focus_findings", "findings"),
        Binding("l", "open_levels", "all figures"),
        Binding("w", "open_whatif", "what-if"),
    ]

    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        yield Static(id="facts", markup=False)
        yield Static(LevelPanel.compact_header(), id="level-head")
        with Grid(id="level-grid"):
            for level in fmt.LEVEL_ORDER:
                yield LevelPanel(level, id=f"level-{level}")
        yield Label("", id="findings-title")
        yield DataTable(id="findings", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "overview"
        self.lay_out()
        self.fill()
        self.call_after_refresh(self.post_message, Painted())

    # below this width the two columns of panels would cut the figures' labels
    COMPACT_BELOW = 100

    def on_resize(self) -> None:
        self.lay_out()

    def lay_out(self) -> None:
        compact = self.app.size.width < self.COMPACT_BELOW
        self.set_class(compact, "-compact")
        for panel in self.panels().values():
            panel.set_compact(compact)

    def panels(self) -> dict[str, LevelPanel]:
        return {p.level: p for p in self.query(LevelPanel)}

    def fill(self) -> None:
        """Draw the report as it stands (the run's facts first, the rest once the
        diagnosers are done)."""
        rep = self.session.report
        self.findings: list[dict] = []
        facts = run_facts(rep, self.session.display_path)
        if self.session.report_error:
            facts += f"\nreport failed ({self.session.report_error}); drill-down still works"
        self.query_one("#facts", Static).update(facts)
        title = self.query_one("#findings-title", Label)
        ft = self.query_one("#findings", DataTable)
        ft.clear(columns=True)
        blocks = {lv.get("level"): lv for lv in rep.get("levels", [])}
        for level, panel in self.panels().items():
            panel.set_level(blocks.get(level))
            panel.display = bool(blocks) or not self.session.diagnosed
        if not self.session.diagnosed:
            title.update("running the diagnosers …")
            ft.display = False
            return
        if not blocks:
            title.update("breakdown only: no diagnosers")
        self.findings = list(rep.get("findings", []))
        ft.add_columns("severity", "code", "ms/step", "ranks", "finding")
        for f in self.findings:
            ft.add_row(
                Text(f["severity"].upper(), style=SEVERITY_STYLE.get(f["severity"], "")),
                f["code"],
                Text(fmt.fmt(f.get("impact_ms"), "ms").removesuffix(" ms"), justify="right"),
                fmt.fmt(f.get("ranks"), "ranks"),
                f["title"],
            )
        if not self.findings:
            if blocks:
                from tracekit.report.render import healthy_text

                verdicts = {k: b.get("verdict", "") for k, b in blocks.items()}
                title.update(f"findings: none — {healthy_text(verdicts)}")
            ft.display = False
        else:
            title.update(f"findings ({len(self.findings)}) — Enter opens one · l all figures")
            ft.display = True
            ft.focus()

    def on_level_panel_selected(self, event: LevelPanel.Selected) -> None:
        self.open_levels(event.level)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "findings":
            self.post_message(OpenFinding(event.cursor_row))

    def open_levels(self, level: str | None = None) -> None:
        self.post_message(OpenLevels(level))

    def action_open_whatif(self) -> None:
        self.post_message(OpenWhatIf())

    def action_focus_findings(self) -> None:
        self.query_one("#findings", DataTable).focus()

    def action_open_levels(self) -> None:
        self.open_levels()

    def shown_panels(self) -> dict[str, dict]:
        """What the panels show: verdict and key rows per level (the tests compare it with
        `tracekit analyze --format json`)."""
        return {lv: {"verdict": p.verdict, "rows": p.rows} for lv, p in self.panels().items()}
