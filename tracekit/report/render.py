"""The analysis report: a dict following the DESIGN JSON contract, rendered as text,
JSON or Markdown. Keys only grow; a figure that cannot be known is `null`, and
`summary.null_reasons` says why.

`build(run)` is the per-rank breakdown alone; `diagnosers.report.full_report(run)` adds
the four levels, the collectives and the findings (the engine imports no diagnoser).
The renderers here take either dict.
"""

from __future__ import annotations

import json
from typing import Any

from tracekit import __version__
from tracekit.metrics.breakdown import per_rank
from tracekit.store.run import Run

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
    sel = run.rank_selection
    return {
        "path": str(run.root),
        # the traces' world size, else the number of ranks they hold (all, when chosen)
        "world_size": max(worlds) if worlds else len(sel.found if sel else rows),
        "ranks": [r[0] for r in rows],
        "backend": backends.pop() if len(backends) == 1 else (sorted(backends) or None),
        "device": (
            devices.pop()
            if len(devices) == 1
            else (sorted(devices) if devices else ("cpu" if not any(r[4] for r in rows) else None))
        ),
        "steps": steps,
        # health (tracekit.store.health): what the figures do not cover
        "unreadable": run.unreadable,
        "missing_ranks": run.missing_ranks,
        "skipped_events": run.skipped_events,
        "mixed": run.mixed,
        "clock_offsets_ns": {str(r): ns for r, ns in run.clock_offsets_ns.items()},
        # --ranks / --sample-ranks: the report covers these ranks on purpose (else null)
        "rank_selection": sel.to_dict() if sel else None,
    }


def build(
    run: Run, window: str = "steps", steps: str | None = None, ranks: list[dict] | None = None
) -> dict[str, Any]:
    """The report's run and per-rank part; `ranks` when the caller computed them already."""
    if ranks is None:
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
        *([selection_line(r["rank_selection"])] if r.get("rank_selection") else []),
    ]


def selection_line(sel: dict) -> str:
    """The partial-run line of a report opened with --ranks / --sample-ranks."""
    return (
        f"partial: analysed {len(sel['ranks'])} of {sel['of']} ranks "
        f"({sel['option']} {sel['spec']}); figures and findings cover these ranks only"
    )


def _health_lines(report: dict) -> list[str]:
    """Warnings the figures need beside them: files left out, ranks missing, events skipped."""
    r = report["run"]
    out = [f"warning: left out {u['path']}: {u['reason']}" for u in r.get("unreadable") or []]
    if r.get("missing_ranks"):
        out.append(f"warning: no trace for ranks {', '.join(map(str, r['missing_ranks']))}")
    skipped = r.get("skipped_events") or {}
    if skipped:
        what = ", ".join(f"{n:,} {why}" for why, n in skipped.items())
        out.append(f"warning: skipped {sum(skipped.values()):,} events ({what})")
    out += [f"warning: mixed runs analyzed together: {m}" for m in r.get("mixed") or []]
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, dict):
        return ", ".join(f"{k} {_fmt(x)}" for k, x in v.items() if not isinstance(x, dict))
    return str(v)


LEVEL_LINES = {
    # level → [(label, measured key, predicted key, formatter)]
    "memory": [
        ("peak memory", "peak_fraction", None, "pct"),
        ("peak bytes", "peak_bytes", "total_bytes", "gb"),
    ],
    "compute": [
        ("MFU (model FLOPs)", "mfu", None, "pct"),
        ("HFU (hardware FLOPs)", "hfu", None, "pct"),
        ("GEMM efficiency", "gemm_efficiency", None, "pct"),
        ("model FLOPs / step", "model_flops_per_step", "model_flops_per_step", "flops"),
        ("executed FLOPs / step", "flops_per_step", None, "flops"),
        ("ops not counted / step", "uncounted_ops_per_step", None, "num"),
        ("host-bound", "host_bound_fraction", None, "pct"),
        ("idle", "idle_fraction", None, "pct"),
    ],
    "communication": [
        ("exposed", "exposed_comm_fraction", "exposed_comm_fraction", "pct"),
        ("  kind: transfer", "exposed_transfer_fraction", None, "pct"),
        ("  kind: waiting for peers", "comm_wait_fraction", None, "pct"),
        ("  cause: slow excess", "exposed_slow_fraction", None, "pct"),
        ("  cause: straggler's wait", "straggler_wait_fraction", None, "pct"),
        ("  cause: pipeline send/recv", "exposed_pipeline_fraction", None, "pct"),
        ("  cause: unexplained", "unexplained_exposed_fraction", None, "pct"),
        ("comm / compute overlap", "comm_overlap_fraction", None, "pct"),
    ],
    "scaling": [
        ("pipeline bubble", "bubble_fraction", "bubble_fraction", "pct"),
        ("stragglers", "straggler_ranks", None, "list"),
    ],
}


def _val(v: Any, kind: str) -> str:
    if v is None:
        return "—"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    if kind == "gb":
        return f"{v / 1e9:.2f} GB"
    if kind == "flops":
        return f"{v / 1e12:.3f} TFLOP"
    if kind == "num":
        return f"{v:,.1f}"
    if kind == "list":
        return ", ".join(map(str, v)) or "none"
    return _fmt(v)


def _level_rows(report: dict) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for lv in report.get("levels", []):
        for i, (label, mkey, pkey, kind) in enumerate(LEVEL_LINES.get(lv["level"], [])):
            rows.append(
                (
                    lv["level"] if i == 0 else "",
                    label,
                    _val(lv["measured"].get(mkey), kind),
                    _val(lv["predicted"].get(pkey), kind) if pkey else "",
                    lv["verdict"] if i == 0 else "",
                )
            )
    return rows


COLLECTIVE_COLUMNS = (
    ("name", "collective", lambda v: "(unknown)" if v is None else str(v)),
    ("group_size", "ranks", lambda v: "?" if v is None else str(v)),
    ("bytes", "size MB", lambda v: "—" if v is None else f"{v / 1e6:,.2f}"),
    ("count_per_step", "/step", lambda v: "—" if v is None else f"{v:,.1f}"),
    ("transfer_ms", "transfer ms", _ms),
    ("predicted_ms", "pred ms", _ms),
    ("busbw_GBps", "busbw GB/s", lambda v: "—" if v is None else f"{v:,.2f}"),
    ("predicted_busbw_GBps", "pred GB/s", lambda v: "—" if v is None else f"{v:,.2f}"),
    ("exposed_ms", "exposed ms/step", _ms),
)


def _finding_lines(report: dict) -> list[str]:
    out = []
    for f in report.get("findings", []):
        impact = f" · {f['impact_ms']:.1f} ms/step" if f.get("impact_ms") else ""
        ranks = f" · ranks {', '.join(map(str, f['ranks']))}" if f["ranks"] else ""
        out.append(f"{f['severity'].upper():8} {f['code']} {f['kind']}{impact}{ranks}")
        out.append(f"         {f['title']}")
        if f["remedy"]:
            out.append(f"         → {f['remedy']}")
    return out


def to_text(report: dict) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    # user text (names, paths, notes) is text: no Rich markup, no :emoji:
    console = Console(
        file=buf,
        width=120,
        force_terminal=False,
        color_system=None,
        markup=False,
        emoji=False,
        highlight=False,
    )

    def table(columns, rows, left=()):
        t = Table(box=None, header_style="bold", pad_edge=False)
        for title in columns:
            t.add_column(title, justify="left" if title in left else "right")
        for row in rows:
            t.add_row(*row)
        console.print()
        console.print(t)

    for line in _header(report) + _health_lines(report):
        console.print(line, highlight=False, soft_wrap=True)
    table(
        [t for _, t, _ in RANK_COLUMNS],
        [[fmt(r[k]) for k, _, fmt in RANK_COLUMNS] for r in report["ranks"]],
    )
    if not report.get("levels"):
        return buf.getvalue()
    table(
        ("level", "figure", "measured", "predicted", "verdict"),
        _level_rows(report),
        left=("level", "figure", "measured", "predicted", "verdict"),
    )
    if report.get("collectives"):
        table(
            [t for _, t, _ in COLLECTIVE_COLUMNS],
            [
                [fmt(c.get(k)) for k, _, fmt in COLLECTIVE_COLUMNS]
                for c in report["collectives"][:10]
            ],
            left=("collective",),
        )
    console.print()
    for lv in report["levels"]:
        for note in lv["notes"]:
            console.print(f"  note ({lv['level']}): {note}", highlight=False, soft_wrap=True)
    console.print()
    lines = _finding_lines(report)
    console.print(
        "findings" if lines else "findings: none — healthy at every level", highlight=False
    )
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    return buf.getvalue()


def to_markdown(report: dict) -> str:
    lines = [f"**{h}**  " if i == 0 else h for i, h in enumerate(_header(report))]
    health = _health_lines(report)
    lines += ["", *(f"- {w}" for w in health)] if health else []
    lines += ["", "| " + " | ".join(t for _, t, _ in RANK_COLUMNS) + " |"]
    lines.append("|" + "---:|" * len(RANK_COLUMNS))
    for row in report["ranks"]:
        lines.append("| " + " | ".join(fmt(row[k]) for k, _, fmt in RANK_COLUMNS) + " |")
    if report.get("levels"):
        lines += [
            "",
            "| level | figure | measured | predicted | verdict |",
            "|---|---|---|---|---|",
        ]
        lines += ["| " + " | ".join(r) + " |" for r in _level_rows(report)]
        if report.get("collectives"):
            cols = COLLECTIVE_COLUMNS
            lines += [
                "",
                "| " + " | ".join(t for _, t, _ in cols) + " |",
                "|---|" + "---:|" * (len(cols) - 1),
            ]
            lines += [
                "| " + " | ".join(fmt(c.get(k)) for k, _, fmt in cols) + " |"
                for c in report["collectives"][:10]
            ]
        lines += ["", "### Findings", ""]
        if not report["findings"]:
            lines.append("None — healthy at every level.")
        for f in report["findings"]:
            impact = f" ({f['impact_ms']:.1f} ms/step)" if f.get("impact_ms") else ""
            lines.append(
                f"- **{f['severity']}** `{f['code']}` {f['kind']}{impact}: {f['title']}."
                f" *Remedy:* {f['remedy']}"
            )
    return "\n".join(lines) + "\n"


RENDERERS = {"text": to_text, "json": to_json, "markdown": to_markdown}
