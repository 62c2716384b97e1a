"""A finding's page: what, where, measured vs predicted, the remedy, the `explain` text,
and keys that jump into the drill-down screens filtered to the evidence."""

from __future__ import annotations

import json
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from tui import fmt
from tui.data import evidence
from tui.screens.common import TkScreen


def finding_text(f: dict) -> str:
    from diagnosers.rules import lookup

    ev = evidence(f)
    lines = [
        f"{f['severity'].upper()}  {f['code']}  {f['kind']}  ({f['level']})",
        "",
        f["title"],
        "",
        "where",
        f"  ranks        {fmt.fmt(ev['ranks'], 'ranks')}",
    ]
    if ev["steps"]:
        lines.append(f"  steps        {fmt.fmt(ev['steps'])}")
    if ev["collectives"]:
        lines.append(f"  collectives  {fmt.fmt(ev['collectives'])}")
    if ev["ops"]:
        lines.append(f"  ops          {fmt.fmt(ev['ops'])}")
    lines += [
        "",
        f"impact        {fmt.fmt(f.get('impact_ms'), 'ms')} per step",
        f"measured      {_value(f.get('measured'))}",
        f"predicted     {_value(f.get('predicted'))}",
    ]
    if f.get("remedy"):
        lines += ["", "remedy", f"  {f['remedy']}"]
    if f.get("details"):
        lines += ["", "details", _indent(json.dumps(f["details"], indent=1, default=str))]
    kind = lookup(f["kind"])
    if kind is not None:
        lines += ["", "explain", _indent(kind.explain())]
    return "\n".join(lines)


def _value(v) -> str:
    if isinstance(v, dict):
        return "; ".join(f"{fmt.label(p)} {fmt.fmt(x, fmt.unit_of(p))}" for p, x in fmt.leaves(v))
    return fmt.fmt(v)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


class FindingScreen(TkScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("t", "timeline", "timeline"),
        Binding("c", "collectives", "collectives"),
        Binding("o", "ops", "ops"),
        Binding("r", "ranks", "ranks"),
    ]

    def __init__(self, finding: dict) -> None:
        super().__init__()
        self.finding = finding
        self.evidence = evidence(finding)

    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        with VerticalScroll(id="finding-body"):
            yield Static(finding_text(self.finding), markup=False, id="finding-text")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"finding {self.finding['code']}"
        self.query_one("#finding-body").focus()

    def action_timeline(self) -> None:
        ev = self.evidence
        rank = ev["ranks"][0] if ev["ranks"] else None
        step = ev["steps"][0] if ev["steps"] else None
        self.tk.jump_timeline(rank=rank, step=step, collective=(ev["collectives"] or [None])[0])

    def action_collectives(self) -> None:
        self.tk.jump("collectives", names=self.evidence["collectives"])

    def action_ops(self) -> None:
        self.tk.jump("ops", names=self.evidence["ops"])

    def action_ranks(self) -> None:
        self.tk.jump("ranks", ranks=self.evidence["ranks"])
