"""Baselines: the reports' metrics and per-step samples of one or several runs in a
small, versioned JSON file to commit beside the code; and reading either side of a
comparison — run folders, baseline files, saved `analyze --format json` reports.

A baseline (schema 2) is `{"tracekit_baseline": 2, "created", "tracekit_version",
"runs": [...]}`: one trimmed report per run, each with the report's keys (`run`,
`window`, `summary`, `ranks`, `collectives`, `top_ops`, `samples`) plus `created`, the
runs kept apart so the gate can measure the spread between them; figures are rounded to
6 significant digits. It holds no traces. A schema-1 file (one trimmed report) reads as
a baseline of one run.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tracekit.errors import TracekitError
from tracekit.version import __version__

BASELINE_SCHEMA = 2
REPORT_SCHEMA = 1
TOP_COLLECTIVES = 20
TOP_OPS = 10
# the summary keys kept (others: the spec and notes, not compared)
_DROP_SUMMARY = ("device_spec", "null_reasons")
_RANK_DROP = ("window_start_ns",)


@dataclass
class Side:
    """One side of a comparison: the reports of its runs (one per run, kept apart) and
    where they came from."""

    path: str
    kind: str  # "run", "baseline" or "report" (several paths: "runs")
    reports: list[dict[str, Any]]

    @property
    def report(self) -> dict[str, Any]:
        """The first run's report (a side of one run: its report)."""
        return self.reports[0]

    @property
    def runs(self) -> int:
        return len(self.reports)

    @property
    def has_samples(self) -> bool:
        return all((r.get("samples") or {}).get("ranks") for r in self.reports)

    def describe(self) -> dict[str, Any]:
        steps = [len((r.get("samples") or {}).get("steps") or []) for r in self.reports]
        return {
            "path": self.path,
            "kind": self.kind,
            "runs": self.runs,
            "steps": (steps[0] if len(set(steps)) == 1 else steps) or None,
            "ranks": len(self.report.get("ranks") or []),
            "tracekit_version": self.report.get("tracekit_version"),
        }


def join(sides: list[Side]) -> Side:
    """Several sides (run folders, reports, baselines) as one side of their runs."""
    if len(sides) == 1:
        return sides[0]
    return Side(
        ", ".join(s.path for s in sides), "runs", [r for s in sides for r in s.reports]
    )


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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def trim(report: dict[str, Any], what: str = "the run") -> dict[str, Any]:
    """One run of a baseline: a full report, trimmed (a trimmed one stays as it is)."""
    _check_report(report, "report")
    if not (report.get("samples") or {}).get("ranks"):
        raise TracekitError(
            f"{what} has no ProfilerSteps to sample: a baseline needs per-step figures "
            "(profile with prof.step() once per training step)"
        )
    return _round(
        {
            "schema": report.get("schema", REPORT_SCHEMA),
            "tracekit_version": report.get("tracekit_version", __version__),
            "created": report.get("created") or _now(),
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


def make_baseline(reports: list[dict[str, Any]], names: list[str] | None = None) -> dict:
    """A compact baseline of one or several runs' reports, each kept apart."""
    names = names or [f"run {i + 1}" for i in range(len(reports))]
    return {
        "tracekit_baseline": BASELINE_SCHEMA,
        "tracekit_version": __version__,
        "created": _now(),
        "runs": [trim(r, n) for r, n in zip(reports, names, strict=True)],
    }


def add_runs(baseline: dict[str, Any], reports: list[dict[str, Any]], names: list[str]) -> dict:
    """The baseline with more runs appended (a CI job on main grows it)."""
    out = dict(baseline)
    out["tracekit_baseline"] = BASELINE_SCHEMA
    out["runs"] = list(runs_of(baseline)) + [
        trim(r, n) for r, n in zip(reports, names, strict=True)
    ]
    out["updated"] = _now()
    return out


def runs_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The reports of a baseline's runs (schema 1: the one it is), or of a report."""
    if "runs" in doc and "tracekit_baseline" in doc:
        return doc["runs"]
    return [doc]


def _check_report(rep: Any, what: str, path: str = "") -> None:
    where = f"{path}: " if path else ""
    if isinstance(rep, dict) and "runs" in rep and "tracekit_baseline" in rep:
        _check_schema(rep, where)
        runs = rep["runs"]
        if not isinstance(runs, list) or not runs:
            raise TracekitError(f"{where}a baseline without runs; make it with `baseline save`")
        for r in runs:
            _check_report(r, what, path)
        return
    if not isinstance(rep, dict) or "ranks" not in rep or not isinstance(rep["ranks"], list):
        raise TracekitError(
            f"{where}not a tracekit {what}: expected a JSON object with 'ranks' (write one "
            "with `tracekit analyze RUN --format json -o FILE` or `tracekit baseline save`)"
        )
    _check_schema(rep, where)


def _check_schema(rep: dict, where: str) -> None:
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
    gz_baseline = p.is_file() and p.name.endswith(".gz") and _is_gzipped_baseline(p)
    if p.is_dir() or (p.name.endswith(".gz") and not gz_baseline):
        return Side(path, "run", [analyze(path)])  # a run folder or one gzipped trace
    try:
        if gz_baseline:
            with gzip.open(p, "rt", encoding="utf-8") as fh:
                text = fh.read()
        else:
            text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise TracekitError(f"{path}: cannot read it ({exc})") from None
    try:
        rep = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TracekitError(
            f"{path}: not JSON ({exc.msg} at line {exc.lineno}); pass a run folder, a "
            "baseline (`tracekit baseline save`) or an `analyze --format json` report"
        ) from None
    if isinstance(rep, dict) and "traceEvents" in rep:
        return Side(path, "run", [analyze(path)])
    _check_report(rep, "baseline or report", path)
    kind = "baseline" if "tracekit_baseline" in rep else "report"
    return Side(path, kind, runs_of(rep))


def read_baseline(path: str) -> dict[str, Any]:
    """A baseline file's document (gzipped or not); a TracekitError when it is not one."""
    side = load_side(path, lambda _: {})
    if side.kind != "baseline":
        raise TracekitError(f"{path}: not a baseline (make one with `tracekit baseline save`)")
    p = Path(path)
    opener = gzip.open if p.name.endswith(".gz") else open
    with opener(p, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _is_gzipped_baseline(p: Path) -> bool:
    """A gzipped baseline (`baseline save -o base.json.gz`), not a gzipped trace: its
    first bytes name the baseline schema."""
    try:
        with gzip.open(p, "rb") as fh:
            head = fh.read(256)
    except (OSError, EOFError):
        return False
    return b'"tracekit_baseline"' in head


def write_json(obj: dict[str, Any], dest: str) -> None:
    """Write atomically (a temporary file, then rename); gzipped when `dest` ends .gz."""
    import os
    import tempfile

    d = Path(dest)
    if d.parent and not d.parent.exists():
        raise TracekitError(f"{dest}: folder {d.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=d.parent or ".", prefix=f".{d.name}.")
    text = json.dumps(obj, indent=1, default=str) + "\n"
    with os.fdopen(fd, "wb") as fh:
        data = text.encode("utf-8")
        # mtime=0: the same baseline gzips to the same bytes
        fh.write(gzip.compress(data, mtime=0) if d.name.endswith(".gz") else data)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # a file to commit, not a private temporary
    os.replace(tmp, d)
