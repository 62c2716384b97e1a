"""What a screen asks the app for, as Textual messages: the screen posts one
(`self.post_message(JumpTo(Target("timeline", rank=1)))`), it bubbles up to the app, and
`TracekitApp.on_…` is the one place that switches screens, opens pages and shows errors.
No screen reads or calls the app's own state (a test holds it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from tracekit.errors import TracekitError


@dataclass(frozen=True)
class Target:
    """Where a jump goes: a screen (`timeline`, `collectives`, `ops`, `ranks`) and what
    to put the cursor on there."""

    screen: str
    rank: int | None = None  # timeline: the rank's lane
    step: int | None = None  # timeline: the ProfilerStep shown
    at_ns: int | None = None  # timeline: the cursor's time
    lane: Any = None  # timeline: the stream, when lanes are per stream
    highlight: str | None = None  # timeline: names to highlight
    collective: str | None = None  # timeline: put the cursor on this collective's longest
    # instance on the rank (the app looks it up, then jumps with at_ns/lane/highlight)
    names: tuple[str, ...] = ()  # collectives, ops: the first row of these names
    ranks: tuple[int, ...] = ()  # ranks: the row of the first of these ranks


class SwitchTo(Message):
    """Show screen `mode` (a digit's: `overview`, `ranks` …), back on its own page."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode


class JumpTo(Message):
    """Show the target's screen with its cursor on the target."""

    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target = target


class OpenFinding(Message):
    """Open the page of the report's finding number `index`."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index


class OpenLevels(Message):
    """Open every figure of the levels, the cursor on `level` when given."""

    def __init__(self, level: str | None = None) -> None:
        super().__init__()
        self.level = level


class OpenWhatIf(Message):
    """Open the what-if page."""


class OpenPath(Message):
    """Open the critical path's segments."""


class OpenInstances(Message):
    """Open one collective's instances across ranks."""

    def __init__(self, name: str, nbytes: Any) -> None:
        super().__init__()
        self.name = name
        self.nbytes = nbytes


class OpenKernels(Message):
    """Open the kernels an op launched."""

    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op


class ShowError(Message):
    """Show an error in a modal; the app stays up."""

    def __init__(self, message: str, title: str = "error") -> None:
        super().__init__()
        self.message = message
        self.title = title


class Painted(Message):
    """The overview's first frame is on the screen (the diagnosers may take the CPU)."""


def error_text(exc: BaseException | None) -> str:
    """An error as its one line: a TracekitError's message, else the type and message."""
    return str(exc) if isinstance(exc, TracekitError) else f"{type(exc).__name__}: {exc}"
