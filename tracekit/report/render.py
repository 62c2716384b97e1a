"""The report as text or Markdown (JSON is `schema.encode`). Labels and units come from
the figures (`tracekit.model.figures`), values are written by `tracekit.report.units`,
so a figure reads the same in every format and in the TUI and the gate."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

from msgspec import UNSET

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.schema import Report, encode

# ---------------------------------------------------------------- what the tables show

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


def header(report: Report) -> list[str]:
    r = report.run
    dev = r.device if isinstance(r.device, str) or r.device is None else ", ".join(r.device)
    backend = r.backend if isinstance(r.backend, str) or r.backend is None else ", ".join(r.backend)
    step_txt = f"{r.steps[0]}–{r.steps[-1]}" if r.steps else "none (whole trace)"
    return [
        f"run {r.path}",
        f"{len(r.ranks)} of {r.world_size} ranks · backend {backend or '—'} · "
        f"device {dev or '—'} · ProfilerSteps {step_txt} · window {report.window.kind}",
        *([selection_line(r.rank_selection)] if r.rank_selection else []),
        *device_step_lines(r),
    ]


def device_step_lines(r: Any) -> list[str]:
    """Where the steps on the device differ from the CPU's: the device's lag (the worst
    ranks; `lag_fraction` is of the step from its CPU start to its device end), and the
    steps left out for launching no device work."""
    out = []
    # a lag under 1% of the step is left to the JSON (a last kernel a few µs late)
    lags = sorted(
        (x for x in getattr(r, "device_lag", None) or [] if (x.lag_fraction or 0) >= 0.01),
        key=lambda x: -x.lag_ms,
    )
    if lags:
        parts = [
            f"{x.lag_ms:.1f} ms ({units.fmt(x.lag_fraction, 'fraction')}) behind the CPU "
            f"on rank {x.rank}" if i == 0 else f"{x.lag_ms:.1f} ms on rank {x.rank}"
            for i, x in enumerate(lags[:3])
        ]
        more = f" (and {len(lags) - 3} more ranks)" if len(lags) > 3 else ""
        out.append(
            f"device runs {', '.join(parts)}{more}: each step's window runs to the end of "
            "the device work it launched"
        )
    stubs = getattr(r, "unanalysed_steps", None) or {}
    if stubs:
        by_steps: dict[tuple[int, ...], list[int]] = {}
        for rank, steps in stubs.items():
            by_steps.setdefault(tuple(steps), []).append(int(rank))
        for steps, ranks in by_steps.items():
            on = f"rank{'s' if len(ranks) > 1 else ''} {units.ranks(sorted(ranks))}"
            out.append(
                f"left out ProfilerStep {', '.join(map(str, steps))} on {on}: "
                "no device work launched"
            )
    return out


def selection_line(sel: Any) -> str:
    """The partial-run line of a report opened with --ranks / --sample-ranks (a
    `RankSelection` or its dict)."""
    get = sel.get if isinstance(sel, dict) else lambda k: getattr(sel, k)
    return (
        f"partial: analysed {len(get('ranks'))} of {get('of')} ranks "
        f"({get('option')} {get('spec')}); figures and findings cover these ranks only"
    )


def health_lines(report: Report) -> list[str]:
    """Warnings the figures need beside them: files left out, ranks missing, events skipped."""
    r = report.run
    out = [f"warning: left out {u['path']}: {u['reason']}" for u in r.unreadable]
    if r.missing_ranks:
        out.append(f"warning: no trace for ranks {units.ranks(r.missing_ranks)}")
    if r.skipped_events:
        what = ", ".join(f"{n:,} {why}" for why, n in r.skipped_events.items())
        out.append(f"warning: skipped {sum(r.skipped_events.values()):,} events ({what})")
    out += [f"warning: mixed runs analyzed together: {m}" for m in r.mixed]
    return out


def verdict_lines(report: Report) -> list[str]:
    """Each level whose verdict is unknown, and why (its headline figures' reasons)."""
    return [
        f"unknown ({lv.level}): {lv.verdict_reason or 'its headline figures are unknown'}"
        for lv in report.levels or []
        if lv.verdict == "unknown"
    ]


def healthy_text(verdicts: dict[str, str]) -> str:
    """What a report without findings says of its levels (level → verdict): healthy only
    when every level is ok; otherwise which levels are unknown (not measured), the rest ok."""
    unknown = [name for name, v in verdicts.items() if v == "unknown"]
    if not unknown:
        return "healthy at every level"
    ok = [name for name, v in verdicts.items() if v == "ok"]
    return f"{', '.join(unknown)} unknown (not measured)" + (f"; {', '.join(ok)} ok" if ok else "")


def _verdicts(report: Report) -> dict[str, str]:
    return {lv.level: lv.verdict for lv in report.levels or []}


def finding_lines(report: Report) -> list[str]:
    out = []
    for f in report.findings or []:
        impact = f" · {units.fmt(f.impact_ms, 'ms')}/step" if f.impact_ms else ""
        ranks = f" · ranks {units.ranks(f.ranks)}" if f.ranks else ""
        out.append(f"{f.severity.upper():8} {f.code} {f.kind}{impact}{ranks}")
        out.append(f"         {f.title}")
        if f.remedy:
            out.append(f"         → {f.remedy}")
        if len(getattr(f, "remedies", None) or []) > 1:  # one: the remedy's lead says it
            out.append(f"         replayed: {remedies_text(f.remedies)}")
    return out


def remedies_text(remedies: list) -> str:
    """A finding's candidate changes replayed, best first: 'C → X ms per step (saves Y)'."""
    ms = F.MEASURED_STEP_MS.unit
    return " · ".join(
        f"{r.change} → {units.fmt(r.predicted_step_ms, ms)} per step ({saves_text(r.saved_ms, ms)})"
        for r in remedies
    )


UNCOUNTED_WHY = {
    "graph_replay": "graph replay",
    "op_without_formula": "no FLOP formula",
    "op_without_flops": "FLOPs unknown",
    "no_op": "no launching op",
}


def uncounted_lines(report: Report, limit: int = 5) -> list[str]:
    """What `uncounted_compute_fraction` is made of: the ops (graph launches) whose
    GEMM/attention/convolution kernels have no FLOPs, most device time first."""
    s = report.summary
    frac = None if s is UNSET else s.uncounted_compute_fraction
    rows = (report.top_uncounted_ops or [])[:limit]
    if not frac or not rows:
        return []
    out = [
        f"compute not counted: {units.fmt(frac, 'fraction')} of compute time (MFU leaves it out)"
    ]
    for o in rows:
        out.append(
            f"  {units.fmt(o.device_ms, 'ms')}  {o.name} · {UNCOUNTED_WHY.get(o.why, o.why)}"
            + (f" ({o.note})" if o.note else "")
        )
    return out


REGION_WIDTH = 80  # the regions tree fits a terminal of this width
REGION_NAME = 42  # columns of the indented names


def region_lines(report: Report, limit: int = 15) -> list[str]:
    """The top regions (most device time per step; CPU time on CPU runs) as an indented
    tree that fits 80 columns: a region's children under it, the heaviest first. A parent
    launches at least what its children do, so the top ones hold their parents."""
    regions = getattr(report, "regions", UNSET)
    if regions is UNSET or not regions:
        return []
    cpu = regions[0].device_ms_per_step is None

    def ms(g: Any) -> float:
        return (g.cpu_ms_per_step if cpu else g.device_ms_per_step) or 0.0

    top = regions[:limit]
    chosen = {tuple(g.path) for g in top}
    kids: dict[tuple, list] = {}
    for g in top:  # kept in the report's order: the heaviest first
        up = tuple(g.path[:-1])
        while up and up not in chosen:  # a parent not among the top: the nearest one that is
            up = up[:-1]
        kids.setdefault(up, []).append(g)
    what = "CPU time" if cpu else "device time"
    title = f"regions ({what} / step)"
    head = f"{title:<{REGION_NAME}} {'total':>9} {'self':>9} {'TFLOP/s':>8} {'spread':>8}"
    out = [head.rstrip()]

    def walk(up: tuple, depth: int) -> None:
        for g in kids.get(up, []):
            name = "  " * depth + g.path[-1] + (" (module)" if g.kind == "module" else "")
            if len(name) > REGION_NAME:
                name = name[: REGION_NAME - 1] + "…"
            self_ms = None if cpu else g.device_self_ms_per_step
            tf = f"{g.achieved_tflops:.3g}" if g.achieved_tflops is not None else ""
            out.append(
                f"{name:<{REGION_NAME}} {units.fmt(ms(g), 'ms', bare=True):>9} "
                f"{units.fmt(self_ms, 'ms', bare=True) if self_ms is not None else '':>9} "
                f"{tf:>8} {_spread(g, cpu):>8}".rstrip()
            )
            walk(tuple(g.path), depth + 1)

    walk((), 0)
    out.append("  ms per step, mean over the ranks holding each" + ("" if cpu else ";"))
    if not cpu:
        out.append("  spread: the rank with the most device time, its excess over the median's")
    return out


def _spread(g: Any, cpu: bool) -> str:
    """`r5 +12%`: the rank with the most device time and its excess over the median's."""
    by = g.device_ms_by_rank
    if cpu or len(by) < 2 or g.max_rank is None or g.median_rank is None:
        return ""
    med, top = by.get(g.median_rank), by.get(g.max_rank)
    if not med or top is None:
        return ""
    return f"r{g.max_rank} +{100 * (top / med - 1):.0f}%"


def step_model_lines(sm: Any) -> list[str]:
    """The "what bounds the step" block: the step model's replay, its critical path by kind and by
    rank, the longest stretches of it, and each finding's remedy replayed."""
    if sm is None or sm is UNSET:
        return []
    ms = F.MEASURED_STEP_MS.unit
    if sm.replayed_step_ms is None or sm.critical_path is None:
        return ["what bounds the step: " + ("; ".join(sm.notes) or "not known")]
    out = [
        f"what bounds the step — replayed {units.fmt(sm.replayed_step_ms, ms)} of "
        f"{units.fmt(sm.measured_step_ms, ms)} measured "
        f"(replay error {units.fmt(sm.replay_error, F.REPLAY_ERROR.unit)})",
        *path_lines(sm.critical_path),
    ]
    if sm.collective_slack_ms:
        out.append(
            "  collective slack (median): "
            + " · ".join(f"{k} {units.fmt(v, ms)}" for k, v in sm.collective_slack_ms.items())
        )
    for w in sm.what_if:
        out.append(
            f"  what if ({w.finding}) {' + '.join(w.change)}: "
            f"{units.fmt(w.predicted_step_ms, ms)} per step, {saves_text(w.saved_ms, ms)}"
        )
    return out + [f"  note: {n}" for n in sm.notes]


def saves_text(saved_ms: float | None, unit: str = "ms") -> str:
    """'saves X' — or 'costs X' where the change makes the step longer."""
    if saved_ms is not None and saved_ms < 0:
        return f"costs {units.fmt(-saved_ms, unit)}"
    return f"saves {units.fmt(saved_ms, unit)}"


def segment_name(seg: Any) -> str:
    """A path segment's name; a merged one says how many pieces it holds and how much of
    it the named ones take ("412 pieces, most in MmBackward0: 57×, 8.63 ms")."""
    get = seg.get if isinstance(seg, dict) else (lambda k, d=None: getattr(seg, k, d))
    parts, name_ms = get("parts", 1) or 1, get("name_ms")
    if parts <= 1 or name_ms is None:
        return str(get("name"))
    ms = F.MEASURED_STEP_MS.unit
    return (
        f"{parts:,} pieces, most in {get('name')}: {get('name_parts', 1) or 1:,}×, "
        f"{units.fmt(name_ms, ms)}"
    )


def path_lines(cp: Any, longest: int = 3) -> list[str]:
    """A critical path: per step by kind (share of the path) and by rank, its longest
    stretches."""
    ms = F.MEASURED_STEP_MS.unit
    total = sum(cp.by_kind.values()) or 1.0
    kinds = " · ".join(
        f"{k} {units.fmt(v, ms)} ({units.percent(v / total, 0)})"
        for k, v in cp.by_kind.items()
        if v > 0
    )
    out = [
        f"  critical path per step: {kinds or 'empty'}",
        "  by rank: " + " · ".join(f"{r} {units.fmt(v, ms)}" for r, v in cp.by_rank.items()),
    ]
    for seg in sorted(cp.segments, key=lambda x: -x.ms)[:longest]:
        out.append(
            f"  longest: rank {seg.rank} {seg.kind} {units.fmt(seg.ms, ms)} "
            f"at {units.fmt(seg.start_ms, ms)} — {segment_name(seg)}"
        )
    return out


def whatif_lines(w: Any) -> list[str]:
    """`tracekit whatif … --format text` (w: `schema.WhatIfReport`)."""
    ms = F.MEASURED_STEP_MS.unit
    return [
        f"what if {' + '.join(w.change)}: {units.fmt(w.predicted_step_ms, ms)} per step "
        f"(measured {units.fmt(w.measured_step_ms, ms)}, replayed "
        f"{units.fmt(w.replayed_step_ms, ms)}; {saves_text(w.saved_ms, ms)})",
        *(f"  {n}" for n in w.notes),
        *path_lines(w.critical_path),
    ]


def collectives_total_line(report: Report) -> str | None:
    """The exposed communication per step beside what the collectives' rows add to: on
    CPU runs a host thread blocked on a collective outside its span counts too, and
    collectives that overlap one another each count their own exposed time."""
    lv = report.level("communication")
    total = lv.metrics.get("exposed_ms_per_step") if lv else None
    if total is None or not report.collectives:
        return None
    rows = sum(c.exposed_ms for c in report.collectives)
    head = (
        f"exposed communication {units.fmt(total, 'ms')}/step "
        f"({units.fmt(lv.measured.exposed_comm_fraction, 'fraction')} of the step, mean over ranks)"
    )
    rest = total - rows
    if abs(rest) < 0.005:
        return f"{head}: all of it in the collectives above"
    if rest > 0:
        return (
            f"{head}: the collectives above {units.fmt(rows, 'ms')}, outside their spans "
            f"{units.fmt(rest, 'ms')} (host waits for them)"
        )
    return (
        f"{head}: the collectives above add to {units.fmt(rows, 'ms')} "
        "(they overlap one another; each counts its own exposed time)"
    )


def _rank_cells(report: Report) -> list[list[str]]:
    return [
        [units.fmt(getattr(r, k), unit, bare=True) for k, _, unit in RANK_COLUMNS]
        for r in report.ranks
    ]


def _collective_cells(report: Report, limit: int = 10) -> list[list[str]]:
    return [
        [fmt(getattr(c, k)) for k, _, fmt in COLLECTIVE_COLUMNS]
        for c in (report.collectives or [])[:limit]
    ]


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
    table([t for _, t, _ in RANK_COLUMNS], _rank_cells(report))
    if not report.full:
        return buf.getvalue()
    cols = ("level", "figure", "measured", "predicted", "verdict")
    table(cols, level_rows(report), left=cols)
    if report.collectives:
        table(
            [t for _, t, _ in COLLECTIVE_COLUMNS], _collective_cells(report), left=("collective",)
        )
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
        "findings" if lines else f"findings: none — {healthy_text(_verdicts(report))}",
        highlight=False,
    )
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    if lines:
        from tracekit.report.export import how_to_open

        console.print(how_to_open(), highlight=False, soft_wrap=True)
    return buf.getvalue()


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
    lines += ["| " + " | ".join(row) + " |" for row in _rank_cells(report)]
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
            lines += [
                "| " + " | ".join(_md(c) for c in r) + " |" for r in _collective_cells(report)
            ]
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
            lines.append(f"None — {healthy_text(_verdicts(report))}.")
        for f in report.findings:
            impact = f" ({units.fmt(f.impact_ms, 'ms')}/step)" if f.impact_ms else ""
            ranks = f" (ranks {units.ranks(f.ranks)})" if f.ranks else ""
            lines.append(
                f"- **{f.severity}** `{f.code}` {f.kind}{impact}{ranks}: {f.title}. "
                f"*Remedy:* {f.remedy}"
                + (f" *Replayed:* {remedies_text(f.remedies)}." if len(f.remedies) > 1 else "")
            )
    return "\n".join(lines) + "\n"


RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": to_text,
    "json": encode,
    "markdown": to_markdown,
}

__all__ = ["RENDERERS", "UNSET", "level_rows", "selection_line", "to_markdown", "to_text"]
