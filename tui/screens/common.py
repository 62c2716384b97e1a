"""What every screen shares: the modals (error, help, prompt), the loading screen and the
key map."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Header, Input, Label, Static
from textual.worker import Worker, WorkerState

from tui.messages import ShowError, SwitchTo, Target, error_text

if TYPE_CHECKING:
    from tui.session import Session

KEYMAP = """\
everywhere   1 overview  2 ranks  3 timeline  4 collectives  5 ops  6 memory  7 sql
             Enter drill in · Esc back · ? help · q quit · Ctrl+P jump (rank, step,
             finding, collective) · mouse works
overview     Enter on a level: every figure of the levels · l the same · f findings
             w what-if: pick changes (Space), r replays the step model with them
tables       ↑/↓ move · s sort by the next column · r reverse · click a header to sort
finding      Enter on a row jumps to it · t timeline at the evidence · c collectives
             o ops · r ranks
timeline     +/- zoom · ←/→ cursor (pans at the edge) · Shift+←/→ pan · ↑/↓ lane
             [ / ] previous / next step · Tab / Shift+Tab next / previous event
             / highlight names · m minimum duration · s lanes per stream · 0 fit
             p critical path on/off · c its segments (Enter: the timeline there)
sql          Enter run · ↑/↓ history · Tab to the results
regions      8 · Enter/Space expand or collapse · s sort (device time, FLOPs, spread)
             t its first run on the timeline · o its ops
"""


class TkScreen(Screen):
    """A screen of the app, made with the session; it asks the app for the rest by
    message (`tui.messages`). Esc goes back to the overview (pages pushed on a screen bind
    Esc to close themselves)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "back", show=False)]

    def __init__(self, session: Session, **kw: Any) -> None:
        super().__init__(**kw)
        self.session = session
        self.target: Target | None = None  # where a jump asked the cursor to go

    def action_back(self) -> None:
        self.post_message(SwitchTo("overview"))

    def aim(self, target: Target) -> None:
        """The app's answer to a `JumpTo`: the screen puts its cursor there when it
        resumes (`take_target`)."""
        self.target = target

    def take_target(self) -> Target | None:
        target, self.target = self.target, None
        return target

    def compose_chrome(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◆")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # worker messages do not bubble: each owner hands failures to the app's modal
        if event.state == WorkerState.ERROR:
            self.post_message(ShowError(error_text(event.worker.error)))


class ErrorScreen(ModalScreen[None]):
    """An error, in a box; Esc, Enter or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,q", "close", "close"),
    ]

    def __init__(self, message: str, title: str = "error") -> None:
        super().__init__()
        self.message = message
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="error-box"):
            yield Label(self.title_text, id="error-title")
            yield Static(self.message, id="error-message", markup=False)
            yield Label("Esc / Enter to close", classes="dim")

    def action_close(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,q,question_mark", "close", "close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Label("tracekit tui — keys", id="help-title")
            yield Static(KEYMAP, markup=False, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)


class PromptScreen(ModalScreen[str | None]):
    """One line of input; Enter returns it, Esc returns None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, question: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.question = question
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Label(self.question)
            yield Input(value=self.value, placeholder=self.placeholder, id="prompt-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class LoadingScreen(Screen):
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◆")
        with Vertical(id="loading-box"):
            # a still line, not an animation: the load runs on the same two cores
            yield Static("starting …", id="loading-status", markup=False)
        yield Footer()

    def set_status(self, text: str) -> None:
        self.query_one("#loading-status", Static).update(text)
