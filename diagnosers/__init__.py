"""Diagnosers: memory → compute → communication → scaling, each a module with
`diagnose(ctx) -> LevelResult`, run in that order by `run_all`.

Built-in levels register like third-party ones would: a package can add diagnosers under
the `tracekit.diagnosers` entry-point group (a callable taking the Context and returning
a LevelResult); they run after the built-in four. A diagnoser that raises becomes a
`diagnoser.error` finding charged to it, not a crash of the run.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points

from diagnosers.base import LevelResult
from diagnosers.context import Context, Overrides, build
from diagnosers.findings import KINDS, Finding

BUILTIN = ("memory", "compute", "communication", "scaling")

__all__ = ["BUILTIN", "KINDS", "Context", "Finding", "LevelResult", "Overrides", "build", "run_all"]


def _registry() -> list[tuple[str, Callable[[Context], LevelResult]]]:
    out = [(name, import_module(f"diagnosers.{name}").diagnose) for name in BUILTIN]
    for ep in entry_points(group="tracekit.diagnosers"):
        try:
            out.append((ep.name, ep.load()))
        except Exception as exc:  # a broken plugin must not break the report
            out.append((ep.name, _failed_plugin(exc)))
    return out


def _failed_plugin(exc: Exception) -> Callable[[Context], LevelResult]:
    def diagnose(ctx: Context) -> LevelResult:
        raise exc

    return diagnose


def run_all(ctx: Context, debug: bool = False) -> list[LevelResult]:
    results = []
    ctx.metrics["_findings"] = []
    for name, fn in _registry():
        try:
            res = fn(ctx)
        except Exception as exc:
            if debug:
                traceback.print_exc()
            res = LevelResult(name if name in BUILTIN else "scaling")
            res.findings.append(
                Finding(
                    "diagnoser.error",
                    "warning",
                    f"the {name} diagnoser failed: {type(exc).__name__}: {exc}",
                    ranks=[],
                    remedy="rerun with tracekit --debug analyze and report the traceback",
                )
            )
            res.notes.append(f"{name} figures are missing: the diagnoser raised {exc!r}")
        ctx.metrics["_findings"].extend(res.findings)
        results.append(res)
    return results
