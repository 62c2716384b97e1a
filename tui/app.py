"""`tracekit tui RUN`: the Textual app. Loading runs in a worker; each digit key switches
to a screen (a Textual mode, with its own stack: Enter pushes a page, Esc pops it). The
screens ask for everything else by message (`tui.messages`: `JumpTo`, `OpenFinding`,
`ShowError` …); the handlers here are the one place navigation happens. Any worker that
fails shows its error in a modal; the app stays up."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, cast

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tracekit.errors import TracekitError
from tracekit.options import AnalysisOptions, OpenOptions
from tracekit.report.schema import Report
from tui.commands import JumpCommands
from tui.messages import (
    JumpTo,
    OpenFinding,
    OpenInstances,
    OpenKernels,
    OpenLevels,
    OpenPath,
    OpenWhatIf,
    Painted,
    ShowError,
    SwitchTo,
    Target,
    error_text,
)
from tui.screens import (
    CollectivesScreen,
    ErrorScreen,
    FindingScreen,
    HelpScreen,
    InstancesScreen,
    KernelsScreen,
    LevelsScreen,
    LoadingScreen,
    MemoryScreen,
    OpsScreen,
    OverviewScreen,
    PathScreen,
    RanksScreen,
    RegionsScreen,
    SqlScreen,
    TimelineScreen,
    WhatIfScreen,
)
from tui.screens.common import TkScreen
from tui.session import Session


class TracekitApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "tracekit"
    # each digit's screen: a Textual mode, made with the session (`add_mode` below)
    SCREENS_BY_MODE: ClassVar[dict[str, type[TkScreen]]] = {
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
        self.painted = threading.Event()  # the overview's first frame is on screen
        self.load_error: str | None = None
        for mode, screen in self.SCREENS_BY_MODE.items():
            self.add_mode(mode, partial(screen, session))

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
            self.call_from_thread(self._load_failed, error_text(exc))
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
        overview = self.base_screen("overview")
        if isinstance(overview, OverviewScreen) and overview.is_mounted:
            overview.fill()
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

    def on_painted(self, _message: Painted) -> None:
        self.painted.set()

    # errors -------------------------------------------------------------------------
    def show_error(self, message: str, title: str = "error") -> None:
        self.errors.append(message)
        self.push_screen(ErrorScreen(message, title=title))

    def on_show_error(self, message: ShowError) -> None:
        self.show_error(message.message, title=message.title)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The app's own workers (a screen's post ShowError): a failure in a modal."""
        if event.state == WorkerState.ERROR:
            self.show_error(error_text(event.worker.error))

    # navigation: the one place screens change ---------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "switch_to":
            return self.may_show(str(parameters[0]))
        return self.opened or action != "help"

    def may_show(self, mode: str) -> bool:
        """Timeline and SQL need the store only; the rest wait for the report."""
        return self.loaded or (self.opened and mode in ("overview", "timeline", "sql"))

    def base_screen(self, mode: str) -> Screen | None:
        """The screen of a digit (None: never shown yet)."""
        try:
            stack = self.get_screen_stack(mode)
        except KeyError:
            return None
        return stack[0] if stack else None

    def _back_to(self, mode: str) -> None:
        """Pop the pages pushed on the current mode's screen."""
        while len(self.screen_stack) > 1 and not isinstance(
            self.screen, self.SCREENS_BY_MODE[mode]
        ):
            self.pop_screen()

    def switch_to(self, mode: str) -> None:
        if not self.may_show(mode):
            self.notify("the diagnosers are still running", timeout=2)
            return
        if self.current_mode == mode:
            self._back_to(mode)  # back to the screen's own page
            return
        self.switch_mode(mode)

    def action_switch_to(self, mode: str) -> None:
        self.switch_to(mode)

    def on_switch_to(self, message: SwitchTo) -> None:
        self.switch_to(message.mode)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def jump(self, target: Target) -> None:
        """Switch to the target's screen and hand it the target (the screen puts its
        cursor there when it shows: `TkScreen.aim`)."""
        mode = target.screen
        if self.current_mode == mode:
            self._back_to(mode)
            screen = cast(TkScreen, self.screen)
            screen.aim(target)
            screen.on_screen_resume()  # the screen shows already: aim now
        else:
            self.switch_mode(mode)
            cast(TkScreen, self.base_screen(mode)).aim(target)  # aims when it resumes

    def on_jump_to(self, message: JumpTo) -> None:
        t = message.target
        if t.screen == "timeline" and t.collective is not None and t.rank is not None:
            self._resolve_collective(t)
            return
        self.jump(t)

    @work(thread=True, exclusive=True, group="resolve", exit_on_error=False)
    def _resolve_collective(self, t: Target) -> None:
        """The longest instance of the collective on the rank (in the step when given)."""
        assert t.rank is not None and t.collective is not None  # on_jump_to checked
        found = self.session.collective_target(t.rank, t.step, t.collective)
        self.call_from_thread(lambda: self.jump(Target("timeline", **found)))

    def open_finding(self, index: int) -> None:
        rep = self.session.report
        findings = rep.findings if rep is not None and rep.findings else []
        if 0 <= index < len(findings):
            self.switch_to("overview")
            self.push_screen(FindingScreen(self.session, findings[index]))

    def on_open_finding(self, message: OpenFinding) -> None:
        self.open_finding(message.index)

    def on_open_levels(self, message: OpenLevels) -> None:
        if self.session.diagnosed:
            self.switch_to("overview")
            self.push_screen(LevelsScreen(self.session, message.level))

    def on_open_what_if(self, _message: OpenWhatIf) -> None:
        if not self.loaded:
            self.notify("the diagnosers are still running", timeout=2)
            return
        self.switch_to("overview")
        self.push_screen(WhatIfScreen(self.session))

    def on_open_path(self, _message: OpenPath) -> None:
        if not self.session.path_spans():
            self.notify("the report has no critical path (no step model, or still running)")
            return
        self.switch_to("timeline")
        self.push_screen(PathScreen(self.session))

    def on_open_instances(self, message: OpenInstances) -> None:
        self.switch_to("collectives")
        self.push_screen(InstancesScreen(self.session, message.name, message.nbytes))

    def on_open_kernels(self, message: OpenKernels) -> None:
        self.switch_to("ops")
        self.push_screen(KernelsScreen(self.session, message.op))

    def on_unmount(self) -> None:
        if self.close_session:
            self.session.close()


def run_app(
    inputs: list[str],
    options: AnalysisOptions | None = None,
    open_options: OpenOptions | None = None,
    report: Report | None = None,
) -> int:
    """Run the app on a terminal; returns the exit code (2 when the run could not be
    opened, with the reason raised as a TracekitError for the CLI to print). The options
    are `tracekit analyze`'s, so the overview shows what analyze would print; a stored
    `report` of the run (`tui.session.read_report`) is shown instead of computing one."""
    display = " ".join(inputs)
    session = Session(
        [Path(p) for p in inputs],
        options=options,
        open_options=open_options,
        display_path=display,
        report=report,
    )
    app = TracekitApp(session)
    app.run()
    if app.load_error:
        raise TracekitError(app.load_error)
    return app.return_code or 0
