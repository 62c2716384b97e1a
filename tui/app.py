"""`tracekit tui RUN`: the Textual app. Loading runs in a worker; each digit key switches
to a screen (a Textual mode, with its own stack: Enter pushes a page, Esc pops it). Any
worker that fails shows its error in a modal; the app stays up."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.worker import Worker, WorkerState

from tracekit.errors import TracekitError
from tracekit.options import AnalysisOptions, OpenOptions
from tui.commands import JumpCommands
from tui.data import Session
from tui.screens import (
    CollectivesScreen,
    ErrorScreen,
    HelpScreen,
    InstancesScreen,
    LoadingScreen,
    MemoryScreen,
    OpsScreen,
    OverviewScreen,
    RanksScreen,
    RegionsScreen,
    SqlScreen,
    TimelineScreen,
)


class TracekitApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "tracekit"
    MODES: ClassVar[dict[str, Any]] = {
        "overview": OverviewScreen,
        "ranks": RanksScreen,
        "timeline": TimelineScreen,
        "collectives": CollectivesScreen,
        "ops": OpsScreen,
        "memory": MemoryScreen,
        "sql": SqlScreen,
        "regions": RegionsScreen,
    }
    SCREEN_TITLES: ClassVar[dict[str, str]] = {
        "overview": "1 overview",
        "ranks": "2 ranks",
        "timeline": "3 timeline",
        "collectives": "4 collectives",
        "ops": "5 ops & kernels",
        "memory": "6 memory",
        "sql": "7 sql",
        "regions": "8 regions",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        *(
            Binding(str(i + 1), f"switch_to('{mode}')", title.split(" ", 1)[1], show=False)
            for i, (mode, title) in enumerate(SCREEN_TITLES.items())
        ),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]
    COMMANDS: ClassVar[set] = App.COMMANDS | {JumpCommands}

    def __init__(self, session: Session, close_session: bool = True, **kw) -> None:
        super().__init__(**kw)
        self.session = session
        self.close_session = close_session
        self.errors: list[str] = []  # every error shown, in order
        self.opened = False  # the store is open: timeline and SQL work
        self.loaded = False  # the report is built: every screen works
        self.overview: OverviewScreen | None = None
        self.painted = threading.Event()  # the overview's first frame is on screen
        self.load_error: str | None = None
        self.pending: dict[str, dict] = {}

    # loading ----------------------------------------------------------------------
    def on_mount(self) -> None:
        self.sub_title = self.session.display_path
        self.push_screen(LoadingScreen())
        self._load()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def _load(self) -> None:
        def progress(msg: str) -> None:
            self.call_from_thread(self._progress, msg)

        try:
            self.session.open(progress)
            # first paint: the run's facts; the timeline and SQL work from here on
            self.call_from_thread(self._opened)
            # let the first frame draw before the diagnosers take the (GIL-sharing) CPU
            self.painted.wait(timeout=2)
            self.session.diagnose()
        except Exception as exc:
            msg = str(exc) if isinstance(exc, TracekitError) else f"{type(exc).__name__}: {exc}"
            self.call_from_thread(self._load_failed, msg)
        else:
            self.call_from_thread(self._loaded)

    def _progress(self, msg: str) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.set_status(msg)

    def _opened(self) -> None:
        self.opened = True
        self.switch_mode("overview")

    def _loaded(self) -> None:
        self.loaded = True
        if self.overview is not None:
            self.overview.fill()
        if self.session.report_error:
            self.show_error(
                f"the diagnosers failed: {self.session.report_error}\n"
                "The overview shows the per-rank breakdown only; the other screens read the "
                "store and work.",
                title="report incomplete",
            )

    def _load_failed(self, msg: str) -> None:
        self.load_error = msg

        def done(_: Any) -> None:
            self.exit(2, return_code=2)

        self.errors.append(msg)
        self.push_screen(ErrorScreen(f"cannot open the run: {msg}", title="error"), done)

    # errors -------------------------------------------------------------------------
    def show_error(self, message: str, title: str = "error") -> None:
        self.errors.append(message)
        self.push_screen(ErrorScreen(message, title=title))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.worker_failed(event)

    def worker_failed(self, event: Worker.StateChanged) -> None:
        """The one place a failed worker is shown: a modal; the app stays up."""
        if event.state == WorkerState.ERROR:
            err = event.worker.error
            msg = str(err) if isinstance(err, TracekitError) else f"{type(err).__name__}: {err}"
            self.show_error(msg)

    # navigation ---------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "switch_to":
            return self.may_show(str(parameters[0]))
        return self.opened or action != "help"

    def may_show(self, mode: str) -> bool:
        """Timeline and SQL need the store only; the rest wait for the report."""
        return self.loaded or (self.opened and mode in ("overview", "timeline", "sql"))

    def switch_to(self, mode: str) -> None:
        if not self.may_show(mode):
            self.notify("the diagnosers are still running", timeout=2)
            return
        if self.current_mode == mode:
            # back to the screen's own page (pop pushed pages)
            while len(self.screen_stack) > 1 and not isinstance(self.screen, self.MODES[mode]):
                self.pop_screen()
            return
        self.switch_mode(mode)

    def action_switch_to(self, mode: str) -> None:
        self.switch_to(mode)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def jump(self, mode: str, **target: Any) -> None:
        """Switch to a screen and tell it what to show (it reads `pending` on resume)."""
        self.pending[mode] = target
        if self.current_mode == mode:
            while len(self.screen_stack) > 1 and not isinstance(self.screen, self.MODES[mode]):
                self.pop_screen()
            self.screen.on_screen_resume()  # type: ignore[attr-defined]
        else:
            self.switch_mode(mode)

    def jump_timeline(
        self,
        rank: int | None = None,
        step: int | None = None,
        at_ns: int | None = None,
        collective: str | None = None,
    ) -> None:
        if collective is not None and rank is not None:
            self._resolve_collective(rank, step, collective)
            return
        self.jump("timeline", rank=rank, step=step, at_ns=at_ns)

    @work(thread=True, exclusive=True, group="resolve", exit_on_error=False)
    def _resolve_collective(self, rank: int, step: int | None, name: str) -> None:
        """The longest instance of the collective on the rank (in the step when given)."""
        s = self.session
        lo, hi = s.step_span(step, [rank]) if step is not None else (None, None)
        if step is None and s.steps_list:
            step = next((st for st, _, _ in s.step_windows().get(rank, [])), s.steps_list[0])
            lo, hi = s.step_span(step, [rank])
        where = "AND ts_ns >= $lo AND ts_ns < $hi" if lo is not None else ""
        params: dict[str, Any] = {"rank": rank, "name": name}
        if lo is not None:
            params.update(lo=lo, hi=hi)
        rows = s.rows(
            f"""SELECT ts_ns, raw_name, lane FROM collectives WHERE rank = $rank AND name = $name
            {where} ORDER BY dur_ns - coalesce(wait_ns, 0) DESC LIMIT 1""",
            params,
        )
        target: dict[str, Any] = {"rank": rank, "step": step}
        if rows:
            target.update(
                at_ns=rows[0]["ts_ns"], highlight=rows[0]["raw_name"], lane=rows[0]["lane"]
            )
        self.call_from_thread(lambda: self.jump("timeline", **target))

    def open_finding(self, index: int) -> None:
        from tui.screens.finding import FindingScreen

        findings = self.session.report.get("findings", [])
        if 0 <= index < len(findings):
            self.switch_to("overview")
            self.push_screen(FindingScreen(findings[index]))

    def open_whatif(self) -> None:
        from tui.screens.whatif import WhatIfScreen

        if not self.loaded:
            self.notify("the diagnosers are still running", timeout=2)
            return
        self.switch_to("overview")
        self.push_screen(WhatIfScreen())

    def open_path(self) -> None:
        from tui.screens.path import PathScreen

        if not self.session.path_spans():
            self.notify("the report has no critical path (no step model, or still running)")
            return
        self.switch_to("timeline")
        self.push_screen(PathScreen())

    def open_collective(self, name: str, nbytes: Any) -> None:
        self.switch_to("collectives")
        self.push_screen(InstancesScreen(name, nbytes))

    def on_unmount(self) -> None:
        if self.close_session:
            self.session.close()


def run_app(
    inputs: list[str],
    options: AnalysisOptions | None = None,
    open_options: OpenOptions | None = None,
) -> int:
    """Run the app on a terminal; returns the exit code (2 when the run could not be
    opened, with the reason raised as a TracekitError for the CLI to print). The options
    are `tracekit analyze`'s, so the overview shows what analyze would print."""
    display = " ".join(inputs)
    session = Session(
        [Path(p) for p in inputs],
        options=options,
        open_options=open_options,
        display_path=display,
    )
    app = TracekitApp(session)
    app.run()
    if app.load_error:
        raise TracekitError(app.load_error)
    return app.return_code or 0
