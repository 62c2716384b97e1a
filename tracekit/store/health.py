"""Is this one whole run? Partial runs, mixed runs and skipped events, after ingest.

`check(run, notes)` fills the run's health attributes, which the report carries under
`run` and the CLI prints as warnings on stderr:

- `run.unreadable`: trace files left out, each with why (`{"path", "reason"}`);
- `run.missing_ranks`: ranks below the traces' `world_size` that no trace holds (a rank
  whose trace was left out by `--ranks` / `--sample-ranks` is not missing);
- `run.skipped_events`: events left out of the tables, by reason (`{reason: count}`);
- `run.mixed`: why the traces look like more than one run, when `allow_mixed` let them in.

Traces that look like different runs stop with a `TracekitError` unless `allow_mixed`:
ranks that disagree on `world_size`, traces that start more than `MIXED_START_S` apart
(one run's ranks profile the same steps, seconds apart), or two files with one Kineto
`trace_id` (Kineto draws a new id per rank and profiling session, so equal ids mean
one trace copied twice). `strict` turns any warning into a `TracekitError`.

The queries are module `store.health`; `SELECT count(*) FROM rank_info` (a count of a
named table) stays here.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.errors import TracekitError
from tracekit.model.ranks import ranges

if TYPE_CHECKING:
    from tracekit.ingest.runner import IngestNotes
    from tracekit.store.run import Run

MIXED_START_S = 3600.0


def _ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] → '0–2, 5'."""
    return ranges(ranks)


def _span(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds:.0f} s"


def mixed_reasons(run: Run, notes: IngestNotes) -> list[str]:
    """Why the traces of `run` look like more than one run (empty: one run)."""
    reasons = []
    rows = run.sql(sql.query("store.health", "rank_starts")).fetchall()
    worlds: dict[int, list[int]] = defaultdict(list)
    for rank, world, _ in rows:
        if world is not None:
            worlds[world].append(rank)
    if len(worlds) > 1:
        said = "; ".join(f"ranks {_ranges(r)} say {w}" for w, r in sorted(worlds.items()))
        reasons.append(f"the traces disagree on world_size ({said})")
    starts = [(s, rank) for rank, _, s in rows if s is not None]
    if len(starts) > 1:
        (first, r0), (last, r1) = min(starts), max(starts)
        gap = (last - first) / 1e9
        if gap > MIXED_START_S:
            reasons.append(f"rank {r1}'s trace starts {_span(gap)} after rank {r0}'s")
    by_id: dict[str, list[str]] = defaultdict(list)
    for source, tid in notes.trace_ids.items():
        by_id[tid].append(source)
    for tid, sources in sorted(by_id.items()):
        if len(sources) > 1:
            reasons.append(f"{' and '.join(sorted(sources))} are one trace (trace_id {tid})")
    return reasons


def missing_ranks(run: Run) -> list[int]:
    """Ranks below the largest `world_size` the traces state that no trace holds. Ranks
    left out on purpose (`--ranks`, `--sample-ranks`: `run.rank_selection`) have a trace
    and are not missing."""
    (world,) = run.sql(sql.query("store.health", "world_size")).fetchall()[0]
    if not world or world > 1_000_000:
        return []
    present = {r for (r,) in run.sql(sql.query("store.health", "ranks")).fetchall()}
    if run.rank_selection is not None:
        present |= set(run.rank_selection.found)
    return [r for r in range(world) if r not in present]


def _clock_warnings(run: Run) -> list[str]:
    """Set `run.clock_offsets_ns` ({rank: ns} beyond the threshold), align those ranks'
    times in the run's views (`clocks.align`); one warning each."""
    import duckdb

    from tracekit.store import clocks

    try:
        est = {o.rank: o for o in clocks.estimate(run)}
    except duckdb.Error as exc:  # the collectives view is not what clocks.py expects
        run.clock_offsets_ns = {}
        return [f"clock offsets not estimated ({str(exc).splitlines()[0][:120]})"]
    ref = min(est) if est else None
    run.clock_offsets_ns = {
        r: o.offset_ns
        for r, o in est.items()
        if abs(o.offset_ns) > clocks.THRESHOLD_NS and abs(o.offset_ns) > 3 * o.spread_ns
    }
    clocks.align(run, run.clock_offsets_ns)
    return [
        f"rank {r}'s clock is {abs(ns) / 1e6:.3f} ms {'ahead of' if ns > 0 else 'behind'} "
        f"rank {ref}'s (from {est[r].instances} collectives that end together); its times "
        "are shifted to match"
        for r, ns in run.clock_offsets_ns.items()
    ]


def launches_without_device(run: Run) -> dict[int, tuple[int, int]]:
    """Ranks whose trace launched device work (kernel and graph launch calls) but holds
    no kernel, copy or memset: {rank: (launch calls, of them inside graph captures)}. The
    profiler ran without its device activity (`ProfilerActivity.CUDA`), or the trace holds
    only graph captures; read as a CPU run, such a trace's figures are the host's."""
    # a run whose every rank has device events (every GPU run) needs no scan of its
    # runtime calls: this runs at every open
    (hosts,) = run.sql(sql.query("store.health", "host_ranks")).fetchall()[0]
    if not hosts:
        return {}
    rows = run.sql(sql.query("report.run_info", "launches_without_device")).fetchall()
    return {rank: (n, captured) for rank, n, captured in rows}


def _device_missing(run: Run) -> list[str]:
    """One line where ranks launched device work the trace does not hold; an error where
    every rank did (nothing of the device could be measured)."""
    missing = launches_without_device(run)
    if not missing:
        return []
    (n_ranks,) = run.sql("SELECT count(*) FROM rank_info").fetchall()[0]
    launches = sum(n for n, _ in missing.values())
    captured = sum(c for _, c in missing.values())
    ranks = _ranges(sorted(missing))
    if captured and captured == launches:
        why = "every launch is inside a CUDA/HIP graph capture and no replay was profiled"
        fix = "profile steps that replay the graphs"
    else:
        why = "the profiler did not record the device's activity"
        fix = "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
    line = (
        f"rank{'s' if len(missing) > 1 else ''} {ranks}: {launches:,} kernel launches but no "
        f"kernel, copy or memset in the trace ({why}); {fix}"
    )
    if len(missing) == n_ranks:
        raise TracekitError(f"{run.root}: {line}")
    return [line + "; those ranks are read as CPU ranks"]


def check(
    run: Run, notes: IngestNotes, allow_mixed: bool = False, strict: bool = False
) -> list[str]:
    """Set the run's health attributes; return the warnings, one line each."""
    mixed = mixed_reasons(run, notes)
    if mixed and not allow_mixed:
        raise TracekitError(
            f"{run.root}: these traces look like more than one run — {mixed[0]}; pass the "
            "traces of one run, or --allow-mixed to analyze them together"
        )
    run.mixed = mixed
    run.unreadable = list(notes.unreadable)
    run.missing_ranks = missing_ranks(run)
    total: dict[str, int] = defaultdict(int)
    for per in notes.skipped_events.values():
        for reason, n in per.items():
            total[reason] += n
    run.skipped_events = dict(sorted(total.items()))

    problems = _device_missing(run)
    problems += [f"left out {Path(u['path']).name}: {u['reason']}" for u in run.unreadable]
    if run.missing_ranks:
        (world,) = run.sql(sql.query("store.health", "world_size")).fetchall()[0]
        many = len(run.missing_ranks) > 1
        problems.append(
            f"rank{'s' if many else ''} {_ranges(run.missing_ranks)} of {world} "
            f"ha{'ve' if many else 's'} no trace; the report covers the others"
        )
    for source, per in sorted(notes.skipped_events.items()):
        what = ", ".join(f"{n:,} {reason}" for reason, n in per.items())
        problems.append(f"skipped {sum(per.values()):,} events in {source}: {what}")
    if strict and problems:
        raise TracekitError(f"--strict: {problems[0]} ({len(problems)} problems in all)")
    run.warnings = [f"mixed runs allowed: {m}" for m in mixed]
    run.warnings += _clock_warnings(run) + problems
    return run.warnings
