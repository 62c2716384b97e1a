"""What the report's tables show, in every format (text, Markdown, the HTML page, the
TUI): the per-rank table, the levels table, the collectives table; labels and units are
the figures' (`tracekit.model.figures`), values written by `tracekit.report.units`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.schema import Report

# the per-rank table: (key, header, bare unit); the header carries the unit
RANK_COLUMNS = (
    ("rank", "rank", "text"),
    (F.STEPS.key, "steps", "count"),
    (F.STEP_TIME_MS.key, "step ms", "ms"),
    (F.IDLE_FRACTION.key, "idle %", "fraction"),
    (F.COMPUTE_FRACTION.key, "compute %", "fraction"),
    (F.NON_COMPUTE_FRACTION.key, "non-compute %", "fraction"),
    (F.COMM_OVERLAP_FRACTION.key, "comm overlap %", "fraction"),
    (F.EXPOSED_COMM_FRACTION.key, "exposed comm %", "fraction"),
)


# the levels table: (level, measured attribute, predicted attribute, indent); labels and
# units are the figures'
LEVEL_ROWS: tuple[tuple[str, str | None, str | None, int], ...] = (
    ("memory", F.MAX_PEAK_MEMORY_FRACTION.key, None, 0),
    ("memory", F.PEAK_MEMORY_BYTES.key, F.PREDICTED_MEMORY_BYTES.key, 0),
    ("compute", F.MFU.key, None, 0),
    ("compute", F.HFU.key, None, 0),
    ("compute", F.GEMM_EFFICIENCY.key, None, 0),
    ("compute", F.MODEL_FLOPS_PER_STEP.key, F.PREDICTED_FLOPS_PER_STEP.key, 0),
    ("compute", F.FLOPS_PER_STEP.key, None, 0),
    ("compute", F.UNCOUNTED_OPS_PER_STEP.key, None, 0),
    ("compute", F.UNCOUNTED_COMPUTE_FRACTION.key, None, 0),
    ("compute", F.HOST_BOUND_FRACTION.key, None, 0),
    ("compute", F.IDLE_FRACTION.key, None, 0),
    ("communication", F.EXPOSED_COMM_FRACTION.key, F.PREDICTED_EXPOSED_COMM_FRACTION.key, 0),
    # its two breakdowns, each adding to it: a group's name, then its parts
    *(
        row
        for group, parts in F.EXPOSED_PARTS.items()
        for row in (
            ("communication", group, None, 1),
            *(("communication", key, None, 2) for key in parts),
        )
    ),
    ("communication", F.COMM_OVERLAP_FRACTION.key, None, 0),
    ("scaling", F.BUBBLE_FRACTION.key, F.PREDICTED_BUBBLE_FRACTION.key, 0),
    ("scaling", None, F.MODELED_BUBBLE_FRACTION.key, 0),
    ("scaling", F.STRAGGLER_RANKS.key, None, 0),
)


# the collectives table: (key, header, formatter)
COLLECTIVE_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("name", "collective", lambda v: "(unknown)" if v is None else str(v)),
    ("group_size", "ranks", lambda v: "?" if v is None else str(v)),
    ("bytes", "size", lambda v: units.fmt(v, "bytes")),
    ("count_per_step", "/step", lambda v: units.fmt(v, "count")),
    ("transfer_ms", "transfer ms", lambda v: units.fmt(v, "ms", bare=True)),
    ("predicted_ms", "pred ms", lambda v: units.fmt(v, "ms", bare=True)),
    ("busbw_GBps", "busbw GB/s", lambda v: units.fmt(v, "GBps", bare=True)),
    ("predicted_busbw_GBps", "pred GB/s", lambda v: units.fmt(v, "GBps", bare=True)),
    ("exposed_ms", "exposed ms/step", lambda v: units.fmt(v, "ms", bare=True)),
)

SUB = "  "  # the indent of a figure's parts


def _label(key: str | None, indent: int) -> str:
    return SUB * indent + (F.label(key) if key else "")


def _figure(block: Any, attr: str | None) -> tuple[Any, str | None]:
    if attr is None or block is None or not hasattr(block, attr):
        return None, None
    return getattr(block, attr), F.unit(attr)


def level_rows(report: Report) -> list[tuple[str, str, str, str, str]]:
    """(level, figure, measured, predicted, verdict) for the levels table."""
    rows: list[tuple[str, str, str, str, str]] = []
    for lv in report.levels or []:
        mine = [r for r in LEVEL_ROWS if r[0] == lv.level]
        for i, (_lvl, mkey, pkey, indent) in enumerate(mine):
            if mkey in F.EXPOSED_PARTS:  # a group's name: its parts follow
                rows.append(("", f"{SUB * indent}{mkey}:", "", "", ""))
                continue
            m, munit = _figure(lv.measured, mkey)
            p, punit = _figure(lv.predicted, pkey)
            rows.append(
                (
                    lv.level if i == 0 else "",
                    _label(mkey or pkey, indent),
                    units.fmt(m, munit) if mkey else "",
                    units.fmt(p, punit) if pkey else "",
                    lv.verdict if i == 0 else "",
                )
            )
    return rows


def rank_cells(report: Report) -> list[list[str]]:
    return [
        [units.fmt(getattr(r, k), unit, bare=True) for k, _, unit in RANK_COLUMNS]
        for r in report.ranks
    ]


def collective_cells(report: Report, limit: int = 10) -> list[list[str]]:
    return [
        [fmt(getattr(c, k)) for k, _, fmt in COLLECTIVE_COLUMNS]
        for c in (report.collectives or [])[:limit]
    ]
