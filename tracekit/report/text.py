"""The report as text (`tracekit analyze --format text`): Rich tables, 120 columns, no
markup."""

from __future__ import annotations

from io import StringIO

from tracekit.report.columns import (
    COLLECTIVE_COLUMNS,
    RANK_COLUMNS,
    collective_cells,
    level_rows,
    rank_cells,
)
from tracekit.report.lines import (
    collectives_total_line,
    finding_lines,
    header,
    health_lines,
    healthy_text,
    level_verdicts,
    uncounted_lines,
    verdict_lines,
)
from tracekit.report.regiontree import region_lines
from tracekit.report.schema import Report
from tracekit.report.steplines import step_model_lines


def to_text(report: Report) -> str:
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

    for line in header(report) + health_lines(report):
        console.print(line, highlight=False, soft_wrap=True)
    table([t for _, t, _ in RANK_COLUMNS], rank_cells(report))
    if not report.full:
        return buf.getvalue()
    cols = ("level", "figure", "measured", "predicted", "verdict")
    table(cols, level_rows(report), left=cols)
    if report.collectives:
        table([t for _, t, _ in COLLECTIVE_COLUMNS], collective_cells(report), left=("collective",))
        total = collectives_total_line(report)
        if total:
            console.print(total, highlight=False, soft_wrap=True)
    console.print()
    for line in verdict_lines(report):
        console.print(f"  {line}", highlight=False, soft_wrap=True)
    for lv in report.levels:
        said = lv.verdict_reason if lv.verdict == "unknown" else None
        for note in lv.notes:
            if said and note in said:  # the unknown line above already says it
                continue
            console.print(f"  note ({lv.level}): {note}", highlight=False, soft_wrap=True)
    for line in uncounted_lines(report):
        console.print(line, highlight=False, soft_wrap=True)
    console.print()
    for line in step_model_lines(getattr(report, "step_model", None)):
        console.print(line, highlight=False, soft_wrap=True)
    console.print()
    regions = region_lines(report)
    for line in regions:
        console.print(line, highlight=False, soft_wrap=True)
    if regions:
        console.print()
    lines = finding_lines(report)
    console.print(
        "findings" if lines else f"findings: none — {healthy_text(level_verdicts(report))}",
        highlight=False,
    )
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    if lines:
        from tracekit.report.perfetto import how_to_open

        console.print(how_to_open(), highlight=False, soft_wrap=True)
    return buf.getvalue()
