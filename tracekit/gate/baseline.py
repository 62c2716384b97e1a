"""Baselines: the report's metrics and per-step samples in a small, versioned JSON file
to commit beside the code; and reading either side of a comparison — a run folder, a
baseline file, or a saved `analyze --format json` report.

A baseline is a trimmed report with the same keys (`run`, `window`, `summary`, `ranks`,
`collectives`, `top_ops`, `samples`) plus `tracekit_baseline` (its schema) and
`created`; figures are rounded to 6 significant digits. It holds no traces.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tracekit.errors import TracekitError
from tracekit.version import __version__

BASELINE_SCHEMA = 1
REPORT_SCHEMA = 1
TOP_COLLECTIVES = 20
TOP_OPS = 10
# the summary keys kept (others: the spec and notes, not compared)
_DROP_SUMMARY = ("device_spec", "null_reasons")
_RANK_DROP = ("window_start_ns",)


@dataclass
class Side:
    """One side of a comparison: its report (or baseline) and where it came from."""

    path: str
    kind: str  # "run", "baseline" or "report"
    report: dict[str, Any]

    @property
    def has_samples(self) -> bool:
        s = self.report.get("samples") or {}
        return bool(s.get("ranks"))

    def describe(self) -> dict[str, Any]:
        s = self.report.get("samples") or {}
        return {
            "path": self.path,
            "kind": self.kind,
            "steps": len(s.get("steps") or []) or None,
            "ranks": len(self.report.get("ranks") or []),
            "tracekit_version": self.report.get("tracekit_version"),
        }


def _round(x: Any) -> Any:
    if isinstance(x, float):
        if not math.isfinite(x) or x == 0:
            return x
        return float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_round(v) for v in x]
    return x


def make_baseline(report: dict[str, Any]) -> dict[str, Any]:
    """A compact baseline from a full report."""
    _check_report(report, "report")
    if not (report.get("samples") or {}).get("ranks"):
        raise TracekitError(
            "the run has no ProfilerSteps to sample: a baseline needs per-step figures "
            "(profile with prof.step() once per training step)"
        )
    return _round(
        {
            "tracekit_baseline": BASELINE_SCHEMA,
            "schema": report.get("schema", REPORT_SCHEMA),
            "tracekit_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "run": report.get("run"),
            "window": report.get("window"),
            "summary": {
                k: v for k, v in (report.get("summary") or {}).items() if k not in _DROP_SUMMARY
            },
            "ranks": [{k: v for k, v in r.items() if k not in _RANK_DROP} for r in report["ranks"]],
            "collectives": (report.get("collectives") or [])[:TOP_COLLECTIVES],
            "top_ops": (report.get("top_ops") or [])[:TOP_OPS],
            "samples": report["samples"],
        }
    )


def _check_report(rep: Any, what: str, path: str = "") -> None:
    where = f"{path}: " if path else ""
    if not isinstance(rep, dict) or "ranks" not in rep or not isinstance(rep["ranks"], list):
        raise TracekitError(
            f"{where}not a tracekit {what}: expected a JSON object with 'ranks' (write one "
            "with `tracekit analyze RUN --format json -o FILE` or `tracekit baseline save`)"
        )
    base = rep.get("tracekit_baseline")
    if base is not None and (not isinstance(base, int) or base > BASELINE_SCHEMA):
        raise TracekitError(
            f"{where}baseline schema {base!r} is newer than this tracekit reads "
            f"({BASELINE_SCHEMA}); upgrade tracekit"
        )
    schema = rep.get("schema", REPORT_SCHEMA)
    if not isinstance(schema, int) or schema > REPORT_SCHEMA:
        raise TracekitError(
            f"{where}report schema {schema!r} is newer than this tracekit reads "
            f"({REPORT_SCHEMA}); upgrade tracekit"
        )


def load_side(path: str, analyze: Callable[[str], dict[str, Any]]) -> Side:
    """A run folder (analysed with `analyze`), a baseline or a saved JSON report."""
    p = Path(path)
    if not p.exists():
        raise TracekitError(f"{path}: no such file or folder")
    if p.is_dir() or p.name.endswith(".gz"):  # a run folder or one gzipped trace
        return Side(path, "run", analyze(path))
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TracekitError(f"{path}: cannot read it ({exc})") from None
    try:
        rep = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TracekitError(
            f"{path}: not JSON ({exc.msg} at line {exc.lineno}); pass a run folder, a "
            "baseline (`tracekit baseline save`) or an `analyze --format json` report"
        ) from None
    if isinstance(rep, dict) and "traceEvents" in rep:
        return Side(path, "run", analyze(path))
    _check_report(rep, "baseline or report", path)
    return Side(path, "baseline" if "tracekit_baseline" in rep else "report", rep)


def write_json(obj: dict[str, Any], dest: str) -> None:
    """Write atomically (a temporary file, then rename)."""
    import os
    import tempfile

    d = Path(dest)
    if d.parent and not d.parent.exists():
        raise TracekitError(f"{dest}: folder {d.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=d.parent or ".", prefix=f".{d.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(obj, fh, indent=1, default=str)
        fh.write("\n")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # a file to commit, not a private temporary
    os.replace(tmp, d)
