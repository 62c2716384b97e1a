"""Ctrl+P: jumps to screens, ranks, steps, findings and collectives."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from tui.app import TracekitApp


class JumpCommands(Provider):
    def _commands(self) -> list[tuple[str, object, str]]:
        app: TracekitApp = self.app  # type: ignore[assignment]
        if not app.loaded:
            return []
        out: list[tuple[str, object, str]] = []
        for mode, title in app.SCREEN_TITLES.items():
            out.append((f"screen: {title}", partial(app.switch_to, mode), "switch screen"))
        out.append(("what-if: replay the step model with changes", app.open_whatif, ""))
        out.append(("critical path: its segments", app.open_path, "the step model's path"))
        s = app.session
        for r in s.ranks:
            out.append((f"go to rank {r}", partial(app.jump_timeline, rank=r), "timeline"))
        for st in s.steps_list:
            out.append((f"step {st}", partial(app.jump_timeline, step=st), "timeline"))
        for i, f in enumerate(s.report.get("findings", [])):
            out.append((f"finding {f['code']} {f['title']}", partial(app.open_finding, i), ""))
        for c in s.report.get("collectives", []):
            out.append(
                (
                    f"collective {c['name']} {c.get('bytes')} B",
                    partial(app.open_collective, c["name"], c.get("bytes")),
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
