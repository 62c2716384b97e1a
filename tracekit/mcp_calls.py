"""How the agent door's tools run and answer: blocking work off the event loop with
progress notifications (`work`), one-line tool errors, results bounded
(`MAX_RESULT_BYTES`, `MAX_ROWS`) and made JSON (`jsonable`), and the argument types
the tools share (`Run`, `Steps`, `Window`, `Codes`)."""

from __future__ import annotations

import contextlib
import json
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from tracekit.errors import TracekitError
from tracekit.store.run import load_before_threads

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
MAX_RESULT_BYTES = 4_000_000  # a tool's JSON result; over it, the tool says how to narrow
MAX_ROWS = 1000  # rows one `query` call may return
DEFAULT_ROWS = 100


def bounded(value: Any, what: str) -> Any:
    size = len(json.dumps(value, default=str))
    if size > MAX_RESULT_BYTES:
        raise ToolError(
            f"the {what} is {size / 1e6:.1f} MB, over this tool's {MAX_RESULT_BYTES / 1e6:.0f} "
            "MB limit; narrow it (fewer steps, `findings`, or a `query` with LIMIT)"
        )
    return value


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


async def _progress(ctx: Context | None, done: float, total: float, what: str) -> None:
    """A progress notification, where the call came from a client (not in-process)."""
    if ctx is None:
        return
    with contextlib.suppress(ValueError):  # no request: called in-process (tests, notebooks)
        await ctx.report_progress(done, total, what)


async def work(ctx: Context | None, steps: list[str], fn):
    """Run `fn` (blocking: tables, DuckDB, replays) off the event loop, with progress
    notifications around it; a TracekitError becomes a tool error of one line."""
    total = len(steps) + 1
    try:
        for i, what in enumerate(steps):
            await _progress(ctx, i, total, what)
        load_before_threads()  # calls may run on several threads at once
        out = await anyio.to_thread.run_sync(fn)
        await _progress(ctx, total, total, "done")
        return out
    except ToolError:
        raise
    except TracekitError as exc:
        raise ToolError(_one_line(exc)) from exc
    except (ValueError, KeyError, OSError) as exc:
        raise ToolError(f"{type(exc).__name__}: {_one_line(exc)}") from exc


def jsonable(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    return str(v)


Run = Annotated[
    str,
    Field(
        description="A run folder (one trace per rank) or trace file, relative to the "
        "server's first root or absolute under a root."
    ),
]
Steps = Annotated[str | None, Field(description="ProfilerSteps to analyse: all, N or A-B.")]
Window = Annotated[
    str,
    Field(
        description="Analysed window: steps (ProfilerStep spans), trace (first to last device "
        "event) or hta (HTA's window).",
        pattern="^(steps|trace|hta)$",
    ),
]
Codes = Annotated[
    list[str],
    Field(description="Rule codes (TK-N301), prefixes (TK-N), kinds or names."),
]
