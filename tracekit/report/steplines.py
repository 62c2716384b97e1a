"""The step model's lines: what bounds the step (its replay, critical path, what-ifs),
a critical path, a path segment's name, `tracekit whatif`'s text."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tracekit.model import figures as F
from tracekit.report import units


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
