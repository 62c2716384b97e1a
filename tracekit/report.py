"""The analysis report: a dict following the DESIGN JSON contract, rendered as text,
JSON or Markdown. Keys only grow; a figure that cannot be known is `null`."""

from __future__ import annotations

import json
from typing import Any

from tracekit import __version__
from tracekit.breakdown import per_rank
from tracekit.store import Run

REPORT_SCHEMA = 1


def run_info(run: Run) -> dict[str, Any]:
    rows = run.sql(
        "SELECT rank, world_size, backend, device_name, has_device_events FROM rank_info "
        "ORDER BY rank"
    ).fetchall()
    worlds = {r[1] for r in rows if r[1]}
    backends = {r[2] for r in rows if r[2]}
    devices = {r[3] for r in rows if r[3]}
    steps = [s for (s,) in run.sql("SELECT DISTINCT step FROM steps ORDER BY step").fetchall()]
    return {
        "path": str(run.root),
        "world_size": max(worlds) if worlds else len(rows),
        "ranks": [r[0] for r in rows],
        "backend": backends.pop() if len(backends) == 1 else (sorted(backends) or None),
        "device": (
            devices.pop()
            if len(devices) == 1
            else (sorted(devices) if devices else ("cpu" if not any(r[4] for r in rows) else None))
        ),
        "steps": steps,
    }


def build(run: Run, window: str = "steps", steps: str | None = None) -> dict[str, Any]:
    ranks = per_rank(run, window=window, steps=steps)
    return {
        "schema": REPORT_SCHEMA,
        "tracekit_version": __version__,
        "run": run_info(run),
        "window": {"kind": window, "steps": steps or "all"},
        "ranks": ranks,
    }


def to_json(report: dict) -> str:
    return json.dumps(report, indent=2, default=str)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:,.2f}"


RANK_COLUMNS = (
    ("rank", "rank", str),
    ("steps", "steps", str),
    ("step_time_ms", "step ms", _ms),
    ("idle_fraction", "idle %", _pct),
    ("compute_fraction", "compute %", _pct),
    ("non_compute_fraction", "non-compute %", _pct),
    ("comm_overlap_fraction", "comm overlap %", _pct),
    ("exposed_comm_fraction", "exposed comm %", _pct),
)


def _header(report: dict) -> list[str]:
    r = report["run"]
    dev = (
        r["device"]
        if isinstance(r["device"], str) or r["device"] is None
        else ", ".join(r["device"])
    )
    steps = r["steps"]
    step_txt = f"{steps[0]}–{steps[-1]}" if steps else "none (whole trace)"
    return [
        f"run {r['path']}",
        f"{len(r['ranks'])} of {r['world_size']} ranks · backend {r['backend'] or '—'} · "
        f"device {dev or '—'} · ProfilerSteps {step_txt} · window {report['window']['kind']}",
    ]


def to_text(report: dict) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for _, title, _ in RANK_COLUMNS:
        table.add_column(title, justify="right")
    for row in report["ranks"]:
        table.add_row(*(fmt(row[key]) for key, _, fmt in RANK_COLUMNS))
    buf = StringIO()
    console = Console(file=buf, width=120, force_terminal=False, color_system=None)
    for line in _header(report):
        console.print(line, highlight=False, soft_wrap=True)
    console.print()
    console.print(table)
    return buf.getvalue()


def to_markdown(report: dict) -> str:
    lines = [f"**{h}**  " if i == 0 else h for i, h in enumerate(_header(report))]
    lines += ["", "| " + " | ".join(t for _, t, _ in RANK_COLUMNS) + " |"]
    lines.append("|" + "---:|" * len(RANK_COLUMNS))
    for row in report["ranks"]:
        lines.append("| " + " | ".join(fmt(row[k]) for k, _, fmt in RANK_COLUMNS) + " |")
    return "\n".join(lines) + "\n"


RENDERERS = {"text": to_text, "json": to_json, "markdown": to_markdown}
