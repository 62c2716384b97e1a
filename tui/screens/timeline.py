"""3 · Timeline: one lane per rank (or per stream, `s`) over a chosen step; the event
under the cursor in the side panel. The step model's critical path is marked (`p` hides
it): a `path` row naming the rank it is on, and a background on that rank's lane; `c`
lists its segments (`tui.screens.path`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Footer, Static

from tui import fmt
from tui.messages import OpenPath, ShowError
from tui.screens.common import PromptScreen, TkScreen
from tui.widgets import Timeline

if TYPE_CHECKING:
    from tui.session import Session

LEGEND = (
    "[green]█[/] compute  [bold red]█[/] exposed comm  [yellow]█[/] comm under "
    "compute  [magenta]█[/] memcpy  [blue]█[/] wait  · idle"
)
LEGEND_MONO = "█ compute · X exposed comm · x comm under compute · m memcpy · w wait · · idle"
PATH_LEGEND = (
    "critical path row = rank: [bold green]compute[/] [bold red]comm[/] [bold blue]wait[/] "
    "[bold cyan]host[/] idle · [on purple4]  [/] on lane · c list"
)
PATH_LEGEND_MONO = "critical path row = rank · overlined on lane · c list"


class TimelineScreen(TkScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right_square_bracket", "step(1)", "next step", key_display="]"),
        Binding("left_square_bracket", "step(-1)", "prev step", key_display="["),
        Binding("slash", "highlight", "highlight", key_display="/"),
        Binding("m", "min_dur", "min dur"),
        Binding("s", "streams", "streams"),
        Binding("p", "toggle_path", "path"),
        Binding("c", "path_list", "path list", show=False),
    ]

    def __init__(self, session: Session, **kw) -> None:
        super().__init__(session, **kw)
        self.step: int | None = None
        self.per_stream = False
        self.detail: dict | None = None
        self.shown = False

    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        yield Static(id="tl-status", markup=False)
        with Horizontal(id="tl-body"):
            yield Timeline(self.session, id="timeline")
            yield Static(id="tl-side", markup=False)
        yield Static(id="tl-legend")
        yield Footer()

    @property
    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    def on_mount(self) -> None:
        self.sub_title = "timeline"
        steps = self.session.steps_list
        self.step = steps[0] if steps else None
        if self.session.steps:  # `--steps A-B`: open on A
            from tracekit.metrics.breakdown import StepSelection

            first = StepSelection.parse(self.session.steps).first
            self.step = first if first in steps else self.step
        self.per_stream = len(self.session.ranks) == 1  # one rank: show its streams
        self.update_legend()

    def update_legend(self) -> None:
        mono = self.app.no_color
        text = LEGEND_MONO if mono else LEGEND
        tl = self.timeline
        if tl.show_path and tl.path_spans:
            text += "\n" + (PATH_LEGEND_MONO if mono else PATH_LEGEND)
        self.query_one("#tl-legend", Static).update(text)

    def on_screen_resume(self) -> None:
        # also sent when the screen first shows: the one place a jump target is applied
        self.call_after_refresh(self._apply_pending_or_default)

    def _apply_pending_or_default(self) -> None:
        t = self.take_target()
        if t is not None and t.step is not None:
            self.step = t.step
        lane_key = (t.rank, None) if t is not None and t.rank is not None else None
        if t is not None and lane_key is not None and self.per_stream:
            lanes = self.session.lanes().get(t.rank) or [None]
            lane_key = (t.rank, t.lane if t.lane in lanes else lanes[0])
        if t is not None and t.highlight:
            self.timeline.highlight = t.highlight
        if t is not None or not self.shown:
            self.shown = True
            self.show(lane_key=lane_key, at_ns=t.at_ns if t is not None else None)

    def lane_keys(self) -> list[tuple[int, Any]]:
        if not self.per_stream:
            return [(r, None) for r in self.session.ranks]
        lanes = self.session.lanes()
        return [(r, lane) for r in self.session.ranks for lane in lanes.get(r, [])]

    def show(self, lane_key=None, at_ns=None) -> None:
        tl = self.timeline
        lanes = self.lane_keys()
        if lane_key is None:
            lane_key = tl.lane_key
            if lane_key is not None and lane_key not in lanes:
                lane_key = next((k for k in lanes if k[0] == lane_key[0]), None)
        t0, t1 = self.session.step_span(self.step)
        whole = self.session.step_span(None)
        tl.path_spans = self.session.path_spans()  # once the report is in
        self.update_legend()
        tl.show(
            lanes,
            t0,
            t1,
            bounds=(min(t0, whole[0]), max(t1, whole[1])),
            lane_key=lane_key,
            at_ns=at_ns,
        )
        self.update_status()

    def update_status(self) -> None:
        tl = self.timeline
        parts = [f"step {self.step}" if self.step is not None else "whole trace"]
        if tl.lane_key is not None:
            parts.append(f"lane {tl.lane_key[0] if tl.lane_key[1] is None else tl.lane_key}")
        parts.append(f"view {fmt.ms(tl.t1 - tl.t0)}")
        if tl.min_dur_ns:
            parts.append(f"min {fmt.ms(tl.min_dur_ns)}")
        if tl.highlight:
            h = tl.highlight
            parts.append(f"/{h if len(h) <= 24 else h[:23] + '…'}")
        parts.append("per stream" if self.per_stream else "per rank (s: streams)")
        if tl.path_spans:
            parts.append("path (p: hide)" if tl.show_path else "path hidden (p: show)")
        self.query_one("#tl-status", Static).update(" · ".join(parts))

    # the side panel ---------------------------------------------------------------
    def on_timeline_cursor_moved(self, event: Timeline.CursorMoved) -> None:
        self.update_status()
        rank, lane = event.key
        tl = self.timeline
        self._fetch_detail(rank, lane, event.ta, event.tb, tl.min_dur_ns, tl.highlight)

    @work(thread=True, exclusive=True, group="tl-detail", exit_on_error=False)
    def _fetch_detail(self, rank, lane, ta, tb, min_dur, highlight) -> None:
        e = self.session.event_at(rank, lane, ta, tb, min_dur, highlight)
        self.app.call_from_thread(self._show_detail, rank, ta, e)

    def _show_detail(self, rank: int, ta: int, e: dict | None) -> None:
        self.detail = e
        tl = self.timeline
        head = f"rank {rank} at +{(ta - tl.t0) / 1e6:,.3f} ms\n\n"
        if e is None:
            self.query_one("#tl-side", Static).update(head + "idle")
            return
        lines = [
            e["name"],
            "",
            f"{e['category']} ({e['kind']})",
            f"duration  {fmt.ms(e['dur_ns'])}",
            f"start     +{(e['ts_ns'] - tl.t0) / 1e6:,.3f} ms",
            f"stream    {e['lane']}",
        ]
        if e.get("launched_by"):
            lines.append(f"launched by {e['launched_by']}")
        if e.get("flops"):
            lines.append(f"FLOPs     {fmt.fmt(e['flops'], 'flops')}")
        c = e.get("collective")
        if c:
            lines += [
                "",
                f"collective {c['name']}",
                f"issued by {c.get('issue_name') or '—'}",
                f"size      {fmt.fmt(c['bytes'], 'bytes')}",
                f"group     {c['group_size']} ranks {c.get('pg_desc') or c.get('pg_name') or ''}",
                f"waited    {fmt.ms(c['wait_ns'])}",
            ]
        self.query_one("#tl-side", Static).update(head + "\n".join(lines))

    def on_timeline_failed(self, event: Timeline.Failed) -> None:
        self.post_message(ShowError(f"timeline: {type(event.error).__name__}: {event.error}"))

    # actions ----------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        steps = self.session.steps_list
        if not steps:
            self.notify("this run has no ProfilerSteps; the view is the whole trace")
            return
        i = steps.index(self.step) if self.step in steps else 0
        self.step = steps[max(0, min(len(steps) - 1, i + delta))]
        self.show()

    def action_streams(self) -> None:
        self.per_stream = not self.per_stream
        key = self.timeline.lane_key
        self.show(lane_key=(key[0], None) if key and not self.per_stream else None)

    def action_toggle_path(self) -> None:
        tl = self.timeline
        if not tl.path_spans:
            self.notify("the report has no critical path (no step model, or still running)")
            return
        tl.show_path = not tl.show_path
        tl.refresh()
        self.update_legend()
        self.update_status()

    def action_path_list(self) -> None:
        self.post_message(OpenPath())

    def action_highlight(self) -> None:
        def done(text: str | None) -> None:
            if text is not None:
                self.timeline.highlight = text.strip() or None
                self.timeline.refresh_frame()
                self.update_status()

        self.app.push_screen(
            PromptScreen("highlight events whose name contains", self.timeline.highlight or ""),
            done,
        )

    def action_min_dur(self) -> None:
        def done(text: str | None) -> None:
            if text is None:
                return
            try:
                us = float(text.strip() or 0)
            except ValueError:
                self.post_message(ShowError(f"not a number of µs: {text!r}"))
                return
            self.timeline.min_dur_ns = int(us * 1000)
            self.timeline.refresh_frame()
            self.update_status()

        cur = str(self.timeline.min_dur_ns / 1000) if self.timeline.min_dur_ns else ""
        self.app.push_screen(PromptScreen("minimum event duration, µs", cur, "0"), done)
