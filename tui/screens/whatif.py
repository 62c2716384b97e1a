"""The what-if page (`w` on the overview, or the palette): pick changes — the grammar of
`tracekit whatif --change` (docs/step-model.md) — and replay the run's step model with
them: the measured, replayed and predicted step, what the changes save, and the critical
path by kind after them beside before.

The changes offered come from the run: each finding's remedy the report replayed
(`step_model.what_if`), overlap and twice the measured bus bandwidth for each collective
of the report, the pipeline at twice its microbatches, no straggler, no host gaps,
compute twice as fast; any other is typed in. The replay is `tracekit whatif`'s own path
(`Session.what_if`), in a worker; the step model is built once for the session. A change
that is not one, or does not apply, shows the CLI's one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, SelectionList, Static

from tracekit.errors import TracekitError
from tracekit.report import units
from tracekit.report.render import saves_text
from tracekit.report.schema import Report, StepModelBlock
from tui.screens.common import TkScreen

if TYPE_CHECKING:
    from tui.session import Session

KINDS = ("compute", "communication", "waiting", "host", "idle")  # the path's kinds
P2P = ("send", "recv")  # a pipeline's hops: no gradient to overlap, none offered


def suggestions(report: Report | None) -> list[tuple[str, str]]:
    """The changes that fit the run, as (spec, why): the specs of one item joined by a
    space (a finding's remedy may be several changes)."""
    out: dict[str, str] = {}
    model = report.step_model if report is not None and report.step_model else None
    for w in model.what_if if model else []:
        spec = " ".join(w.change)
        if spec and spec not in out:
            out[spec] = f"{w.finding}'s remedy: {saves_text(w.saved_ms)}"
    colls = report.collectives if report is not None and report.collectives else []
    for c in sorted(colls, key=lambda c: -c.time_ms_per_step):
        if not c.name:
            continue
        spec = f"overlap:{c.name}"
        if spec not in out and c.name not in P2P:
            out[spec] = f"exposed {units.fmt(c.exposed_ms, 'ms')} a step"
        bw = c.busbw_GBps
        if bw and not any(k.startswith(f"bandwidth:{c.name}=") for k in out):
            out[f"bandwidth:{c.name}={2 * bw:.4g}"] = f"2× its bus bandwidth ({bw:.3g} GB/s)"
    scaling = report.level("scaling") if report is not None else None
    pipe = scaling.metrics.get("pipeline") if scaling is not None else None
    if pipe and pipe.get("microbatches"):
        m = int(pipe["microbatches"])
        out.setdefault(f"microbatches={2 * m}", f"the pipeline at 2× its M = {m}")
    out.setdefault("no-straggler", "every rank at the median rank's pace")
    out.setdefault("no-host-gaps", "no host launch delays")
    out.setdefault("compute-speed=2", "compute kernels 2× faster")
    return list(out.items())


def split_specs(text: str) -> list[str]:
    """The changes typed in one line: separated by spaces or commas."""
    return [t for t in text.replace(",", " ").split() if t]


def _mostly_on(by_rank: dict[str, float]) -> str:
    if not by_rank:
        return "—"
    rank, ms = max(by_rank.items(), key=lambda kv: kv[1])
    total = sum(by_rank.values()) or 1.0
    return f"r{rank} {units.fmt(ms / total, 'fraction')}"


def result_rows(model: StepModelBlock | None, outcome: Any | None) -> list[tuple[str, str, str]]:
    """(what, replayed, predicted): the step measured, replayed and predicted, the saving,
    and the critical path per step by kind and where it mostly lies — replayed as the
    report's step model has it, predicted by the replay with the changes (blank until one
    ran)."""
    cp = model.critical_path if model is not None else None
    after = outcome.critical_path if outcome is not None else None

    def ms(v: Any) -> str:
        return units.fmt(v, "ms") if v is not None else ""

    rows = [
        ("measured step", ms(model.measured_step_ms if model else None), ""),
        (
            "step",
            ms(model.replayed_step_ms if model else None),
            ms(outcome.predicted_step_ms) if outcome else "",
        ),
        ("saved", "", ms(outcome.saved_ms) if outcome else ""),
        ("critical path", "", ""),
    ]
    for k in KINDS:
        rows.append(
            (
                f"  {k}",
                ms(cp.by_kind.get(k)) if cp else "",
                ms(after.by_kind.get(k)) if after else "",
            )
        )
    rows.append(
        (
            "  mostly on",
            _mostly_on(cp.by_rank) if cp else "",
            _mostly_on(after.by_rank) if after else "",
        )
    )
    return rows


class WhatIfScreen(TkScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("r", "replay", "replay"),
        Binding("i", "focus_input", "type a change"),
    ]

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self.outcome = None  # tracekit.stepmodel.model.Outcome of the last replay
        self.message: str | None = None  # the last replay's one-line error
        self.specs: list[str] = []  # the changes of the last replay
        self.offered: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        yield Static(id="wi-head", markup=False)
        with Horizontal(id="wi-body"):
            with Vertical(id="wi-left"):
                yield SelectionList[str](id="wi-changes")
                yield Static(id="wi-why", markup=False)
                yield Input(
                    placeholder="more: overlap:NAME bandwidth:NAME=GBPS microbatches=M …",
                    id="wi-input",
                )
            yield DataTable(id="wi-result", cursor_type="none", show_cursor=False)
        yield Static(id="wi-status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "what-if"
        rep = self.session.report
        model = self.session.step_model()
        head = "Space picks changes, r (or Enter in the line below) replays the step model"
        if model is None or model.critical_path is None:
            notes = "; ".join(model.notes if model else [])
            head += "\nthe report has no step model" + (f": {notes}" if notes else "")
        self.query_one("#wi-head", Static).update(head)
        self.offered = suggestions(rep)
        sel = self.query_one("#wi-changes", SelectionList)
        for spec, _why in self.offered:
            sel.add_option((spec, spec))
        table = self.query_one("#wi-result", DataTable)
        table.add_column("", key="what", width=15)
        table.add_column("replayed", key="before", width=10)
        table.add_column("predicted", key="after", width=10)
        self.fill_result()
        if self.offered:
            sel.highlighted = 0
        sel.focus()

    def fill_result(self) -> None:
        table = self.query_one("#wi-result", DataTable)
        table.clear()
        model = self.session.step_model()
        for what, before, after in result_rows(model, self.outcome):
            table.add_row(
                Text(what, style="bold" if not what.startswith(" ") else ""),
                Text(before, justify="right"),
                Text(after, justify="right", style="bold"),
            )

    # actions ---------------------------------------------------------------------
    def chosen(self) -> list[str]:
        """The changes picked (in the list's order) and typed."""
        picked = set(self.query_one("#wi-changes", SelectionList).selected)
        specs = [s for spec, _ in self.offered if spec in picked for s in spec.split()]
        specs += split_specs(self.query_one("#wi-input", Input).value)
        return specs

    def action_replay(self) -> None:
        specs = self.chosen()
        if not specs:
            self.set_status("pick a change first (Space), or type one (i)")
            return
        self.specs = specs
        self.set_status(f"replaying with {' '.join(specs)} …")
        self._replay(specs)

    def on_selection_list_selection_highlighted(
        self, event: SelectionList.SelectionHighlighted
    ) -> None:
        i = event.selection_index
        if 0 <= i < len(self.offered):
            self.query_one("#wi-why", Static).update(self.offered[i][1])

    def action_focus_input(self) -> None:
        self.query_one("#wi-input", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_replay()

    @work(thread=True, exclusive=True, group="whatif", exit_on_error=False)
    def _replay(self, specs: list[str]) -> None:
        try:
            o = self.session.what_if(specs)
        except TracekitError as exc:  # not a change, or one that does not apply
            self.app.call_from_thread(self._failed, f"tracekit: {exc}")
        else:
            self.app.call_from_thread(self._done, specs, o)

    def _failed(self, line: str) -> None:
        self.outcome = None
        self.message = line
        self.fill_result()
        self.set_status(line, error=True)

    def _done(self, specs: list[str], o) -> None:
        self.outcome = o
        self.message = None
        self.fill_result()
        if o.notes:  # what a change modeled outside the graph did (the pipeline's split)
            self.query_one("#wi-why", Static).update("\n".join(o.notes))
        self.set_status(
            f"predicted {units.fmt(o.predicted_step_ms, 'ms')}, {saves_text(o.saved_ms)} "
            "a step · = tracekit whatif "
            f"{self.session.display_path} " + " ".join(f"--change {s}" for s in specs)
        )

    def set_status(self, text: str, error: bool = False) -> None:
        st = self.query_one("#wi-status", Static)
        st.set_class(error, "-error")
        st.update(text)
