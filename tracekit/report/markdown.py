"""The report as Markdown (`tracekit analyze --format markdown`)."""

from __future__ import annotations

from tracekit.report import units
from tracekit.report.columns import (
    COLLECTIVE_COLUMNS,
    RANK_COLUMNS,
    SUB,
    collective_cells,
    level_rows,
    rank_cells,
)
from tracekit.report.lines import (
    collectives_total_line,
    header,
    health_lines,
    healthy_text,
    level_verdicts,
    remedies_text,
    uncounted_lines,
    verdict_lines,
)
from tracekit.report.regiontree import region_lines
from tracekit.report.schema import Report
from tracekit.report.steplines import step_model_lines


def _md(cell: str) -> str:
    """A table cell: pipes escaped, so a name from a trace cannot break the table."""
    return cell.replace("|", "\\|")


def _indent(label: str) -> str:
    """A part's indent as em spaces, which Markdown keeps (it drops leading spaces)."""
    bare = label.lstrip(" ")
    return "\u2003" * ((len(label) - len(bare)) // len(SUB)) + bare


def to_markdown(report: Report) -> str:
    lines = [f"**{h}**  " if i == 0 else h for i, h in enumerate(header(report))]
    health = health_lines(report)
    lines += ["", *(f"- {w}" for w in health)] if health else []
    lines += ["", "| " + " | ".join(t for _, t, _ in RANK_COLUMNS) + " |"]
    lines.append("|" + "---:|" * len(RANK_COLUMNS))
    lines += ["| " + " | ".join(row) + " |" for row in rank_cells(report)]
    if report.full:
        lines += [
            "",
            "| level | figure | measured | predicted | verdict |",
            "|---|---|---|---|---|",
        ]
        lines += [
            "| " + " | ".join(_md(_indent(c) if i == 1 else c) for i, c in enumerate(r)) + " |"
            for r in level_rows(report)
        ]
        unknown = verdict_lines(report)
        lines += ["", *(f"- {_md(u)}" for u in unknown)] if unknown else []
        if report.collectives:
            cols = COLLECTIVE_COLUMNS
            lines += [
                "",
                "| " + " | ".join(t for _, t, _ in cols) + " |",
                "|---|" + "---:|" * (len(cols) - 1),
            ]
            lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in collective_cells(report)]
            total = collectives_total_line(report)
            lines += ["", _md(total)] if total else []
        unc = uncounted_lines(report)
        if unc:
            lines += ["", f"- {unc[0]}", *(f"  - {_md(u.strip())}" for u in unc[1:])]
        bounds = step_model_lines(getattr(report, "step_model", None))
        if bounds:
            lines += ["", "### What bounds the step", ""]
            lines += [f"- {_md(b.strip())}" for b in bounds]
        tree = region_lines(report)
        if tree:
            lines += ["", "### Regions", "", "```text", *tree, "```"]
        lines += ["", "### Findings", ""]
        if not report.findings:
            lines.append(f"None — {healthy_text(level_verdicts(report))}.")
        for f in report.findings:
            impact = f" ({units.fmt(f.impact_ms, 'ms')}/step)" if f.impact_ms else ""
            ranks = f" (ranks {units.ranks(f.ranks)})" if f.ranks else ""
            lines.append(
                f"- **{f.severity}** `{f.code}` {f.kind}{impact}{ranks}: {f.title}. "
                f"*Remedy:* {f.remedy}"
                + (f" *Replayed:* {remedies_text(f.remedies)}." if len(f.remedies) > 1 else "")
            )
    return "\n".join(lines) + "\n"
