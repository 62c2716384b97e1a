"""Ctrl+P: jumps to screens, ranks, steps, findings and collectives — the messages the
screens post, routed by the app as theirs are."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.message import Message

from tui.messages import JumpTo, OpenFinding, OpenInstances, OpenPath, OpenWhatIf, SwitchTo, Target

if TYPE_CHECKING:
    from tui.app import TracekitApp


class JumpCommands(Provider):
    def _commands(self) -> list[tuple[str, object, str]]:
        """(text, what choosing it does, help): each posts the message a screen would."""
        app: TracekitApp = self.app  # type: ignore[assignment]
        if not app.loaded:
            return []

        def post(message: Message) -> Callable[[], object]:
            return partial(app.post_message, message)

        out: list[tuple[str, object, str]] = []
        for mode, title in app.SCREEN_TITLES.items():
            out.append((f"screen: {title}", post(SwitchTo(mode)), "switch screen"))
        out.append(("what-if: replay the step model with changes", post(OpenWhatIf()), ""))
        out.append(("critical path: its segments", post(OpenPath()), "the step model's path"))
        s = app.session
        for r in s.ranks:
            out.append((f"go to rank {r}", post(JumpTo(Target("timeline", rank=r))), "timeline"))
        for st in s.steps_list:
            out.append((f"step {st}", post(JumpTo(Target("timeline", step=st))), "timeline"))
        rep = s.report
        for i, f in enumerate(rep.findings if rep is not None and rep.findings else []):
            out.append((f"finding {f.code} {f.title}", post(OpenFinding(i)), ""))
        for c in rep.collectives if rep is not None and rep.collectives else []:
            out.append(
                (
                    f"collective {c.name} {c.bytes} B",
                    post(OpenInstances(c.name or "", c.bytes)),
                    "instances across ranks",
                )
            )
        return out

    async def discover(self) -> Hits:
        for text, cmd, help_ in self._commands():
            yield DiscoveryHit(text, cmd, help=help_)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, cmd, help_ in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cmd, help=help_)  # type: ignore[arg-type]
