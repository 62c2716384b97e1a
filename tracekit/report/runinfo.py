"""The report's `run` block: which run, which ranks, and what the figures do not cover."""

from __future__ import annotations

from tracekit import sql
from tracekit.report.schema import DeviceLag, RankSelection, RunInfo
from tracekit.store.run import Run


def run_info(run: Run) -> RunInfo:
    rows = run.sql(sql.query("report.run_info", "ranks")).fetchall()
    worlds = {r[1] for r in rows if r[1]}
    backends = {r[2] for r in rows if r[2]}
    devices = {r[3] for r in rows if r[3]}
    steps = [s for (s,) in run.sql(sql.query("report.run_info", "steps")).fetchall()]
    sel = run.rank_selection
    # a run whose only device events are of a kind tracekit does not model is not a CPU
    # run: name the accelerator (tables.UNMODELED_DEVICE), its events are in skipped_events
    unmodeled = sorted({
        why.rsplit("(", 1)[-1].split("_")[0].rstrip(")")
        for why in run.skipped_events if why.startswith("device events of a kind")
    })  # fmt: skip
    cpu = "cpu" if not unmodeled else f"{'/'.join(unmodeled)} (not modeled: read as a CPU run)"
    return RunInfo(
        path=str(run.root),
        # the traces' world size, else the number of ranks they hold (all, when chosen)
        world_size=max(worlds) if worlds else len(sel.found if sel else rows),
        ranks=[r[0] for r in rows],
        backend=backends.pop() if len(backends) == 1 else (sorted(backends) or None),
        device=(
            devices.pop()
            if len(devices) == 1
            else (sorted(devices) if devices else (cpu if not any(r[4] for r in rows) else None))
        ),
        steps=steps,
        # health (tracekit.store.health): what the figures do not cover
        unreadable=run.unreadable,
        missing_ranks=run.missing_ranks,
        skipped_events=run.skipped_events,
        mixed=run.mixed,
        clock_offsets_ns={str(r): ns for r, ns in run.clock_offsets_ns.items()},
        # --ranks / --sample-ranks: the report covers these ranks on purpose (else null)
        rank_selection=RankSelection(**sel.to_dict()) if sel else None,
        device_lag=device_lag(run),
        unanalysed_steps=unanalysed_steps(run),
    )


def device_lag(run: Run) -> list[DeviceLag]:
    """The ranks whose device runs behind their CPU (by 1 µs or more a step on average):
    the steps' windows then reach past their CPU spans (`device_steps`)."""
    rows = run.sql(sql.query("report.run_info", "device_lag")).fetchall()
    return [
        DeviceLag(
            rank=r,
            steps=n,
            lag_ms=round(lag / 1e6, 6),
            max_lag_ms=round(mx / 1e6, 6),
            lag_fraction=round(lag / step, 6) if step else None,
        )
        for r, n, lag, mx, step in rows
        if lag >= 1000
    ]


def unanalysed_steps(run: Run) -> dict[str, list[int]]:
    """Rank → the ProfilerSteps left out: they launched no device work on a GPU rank."""
    out: dict[str, list[int]] = {}
    for rank, step, _ns in run.sql(sql.query("report.run_info", "unanalysed_steps")).fetchall():
        out.setdefault(str(rank), []).append(step)
    return out
