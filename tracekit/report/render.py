"""The report as text or Markdown (JSON is `schema.encode`). Labels and units come from
the figures (`tracekit.model.figures`), values are written by `tracekit.report.units`,
so a figure reads the same in every format and in the TUI and the gate.

The formats: `text`, `markdown`; the pieces they share: `columns` (what the tables
show), `lines` (header, warnings, verdicts, findings), `steplines` (the step model's),
`regiontree` (the regions). The names callers import from here are re-exported."""

from __future__ import annotations

from collections.abc import Callable

from msgspec import UNSET

from tracekit.report.columns import COLLECTIVE_COLUMNS, LEVEL_ROWS, RANK_COLUMNS, level_rows
from tracekit.report.lines import (
    collectives_total_line,
    device_step_lines,
    finding_lines,
    header,
    health_lines,
    healthy_text,
    remedies_text,
    selection_line,
    uncounted_lines,
    verdict_lines,
)
from tracekit.report.markdown import to_markdown
from tracekit.report.regiontree import region_lines
from tracekit.report.schema import Report, encode
from tracekit.report.steplines import (
    path_lines,
    saves_text,
    segment_name,
    step_model_lines,
    whatif_lines,
)
from tracekit.report.text import to_text

RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": to_text,
    "json": encode,
    "markdown": to_markdown,
}

__all__ = [
    "COLLECTIVE_COLUMNS",
    "LEVEL_ROWS",
    "RANK_COLUMNS",
    "RENDERERS",
    "UNSET",
    "collectives_total_line",
    "device_step_lines",
    "finding_lines",
    "header",
    "health_lines",
    "healthy_text",
    "level_rows",
    "path_lines",
    "region_lines",
    "remedies_text",
    "saves_text",
    "segment_name",
    "selection_line",
    "step_model_lines",
    "to_markdown",
    "to_text",
    "uncounted_lines",
    "verdict_lines",
    "whatif_lines",
]
