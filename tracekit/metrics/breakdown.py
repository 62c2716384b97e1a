"""Per-rank time breakdown: idle, compute, non-compute, comm/compute overlap, exposed comm.

Definitions (shared with Holistic Trace Analysis on GPU runs, so users can cross-check):

- compute    = length of the union of compute activity, less host waits (CPU runs)
- comm       = length of the union of communication activity; on a CPU run the host's
               waits for communication (`host_wait`: the c10d issue ops) count as
               communication too — a thread blocked on a collective is spending that
               time on communication, whichever thread moves the bytes
- busy       = |compute ∪ comm ∪ memcpy ∪ memset|;  idle = window − busy
- non-compute = busy − compute (communication, memcpy, memset not hidden under compute)
- overlap    = time where compute and communication run together
             = |compute| + |comm| − |compute ∪ comm|
- comm_overlap_fraction = overlap ÷ |comm|            (HTA's comm/comp overlap)
- exposed_comm_fraction = (|comm| − overlap) ÷ window: the union of communication
  time nothing hides, whatever the cause; its two parts:
  - comm_wait_fraction: exposed time inside a matched collective before its last peer
    arrived (this rank waiting for late peers; `collectives.wait_ns`)
  - exposed_transfer_fraction: the rest (exposed_comm − comm_wait)

Every fraction is of the window and lies in [0, 1]; the parts add up to the whole.

Windows (`--window`, `tracekit.metrics.windows`):

- `steps` (default): from the start of the first to the end of the last selected
  `ProfilerStep#N` on that rank — what a step time is made of. Ranks without step
  annotations fall back to `trace`.
- `trace`: first to last device activity of the rank.
- `hta`: Holistic Trace Analysis's window: device work launched before the last
  ProfilerStep begins (the last step is dropped), first to last such kernel, each
  interval rounded inward to whole µs (ceil start, floor end) as HTA does. Use it to
  compare with HTA. The other windows keep nanosecond precision: on traces with
  3-decimal stamps HTA's rounding shrinks every short kernel by up to 1 µs, which
  moved idle time by 0.5 points on `a100_allreduce_meta_rank0`.

The SQL (`tracekit/sql/metrics/sweep.sql`, `host_bound.sql`, `hidden_by_compute.sql`)
takes any windows: the report passes each rank's window, the samples each step.
"""

from __future__ import annotations

import msgspec

from tracekit import sql
from tracekit.metrics import windows as W
from tracekit.model import figures as F
from tracekit.store.run import Run

# re-exported: the step selection belongs to the windows
StepSelection = W.StepSelection
_GAPS = "metrics.host_bound"


def sweep_sql(windows: str, activity: str = "activity_islands") -> str:
    """Per (rank, wid) of `windows` the busy, compute, communication, overlap and peer-wait
    ns (`metrics.sweep`); another `activity` than the islands (HTA's rounded events) is
    swept in full (`metrics.sweep_full`)."""
    if activity != "activity_islands":
        return full_sweep_sql(windows, activity)
    return sql.fill("metrics.sweep", windows=windows)


def full_sweep_sql(windows: str, activity: str = "activity_islands") -> str:
    """`sweep_sql` as one sweep over `activity`'s interval boundaries (`metrics.sweep_full`):
    HTA's rounded window, and the tests' oracle for the segments."""
    return sql.fill("metrics.sweep_full", windows=windows, activity=activity)


def host_bound_sql(windows: str, run: Run | None = None) -> str:
    """Per (rank, wid) of `windows` the host-bound gaps (`metrics.host_bound`); the gaps
    `device_gaps_with_steps` kept for these windows where it did (`run` given)."""
    gaps = W.kept(run, (_GAPS, windows)) if run is not None else None
    if gaps is None:
        gaps = device_gaps_sql(windows)
    return sql.query(_GAPS, "host_bound", gaps=gaps)


def device_gaps_sql(windows: str) -> str:
    """Per (rank, wid) of `windows` the device work items with the end of the work before
    each (`metrics.host_bound:device_gaps` over its `work`)."""
    return sql.query(_GAPS, "device_gaps", work=work_sql(windows))


def work_sql(windows: str) -> str:
    """`metrics.host_bound:work` over `windows`: each device item with `prev_end`."""
    return sql.query(_GAPS, "work", items=sql.query(_GAPS, "work_items", windows=windows))


def piece_work_table(run: Run, pieces: str) -> str:
    """SQL reading the rows of `metrics.host_bound:piece_work` over `pieces` (disjoint
    windows per rank, `windows.pieces`) from a table made once: the items sorted by
    (rank, ts_ns, end_ns) in DuckDB (a piece's items then lie together, the pieces in
    order), `prev_end` (the latest end before an item in its piece) and `before_end`
    (the latest end in the rank's earlier pieces) running maxima in numpy, joined back by
    position. The same rows as the SQL (`work`'s window `max` over every earlier row is
    twice DuckDB's sort, and `piece_work` copies the rows again: 0.11 s at 8 big ranks,
    178,000 items; 0.05 s so). The SQL where an end is null or the lift could overflow."""
    items = sql.query(_GAPS, "work_items", windows=pieces)
    return W.made_once(
        run, repr(("piece_work", items)), lambda name: _piece_work(run, name, items, pieces)
    )


def _piece_work(run: Run, name: str, items: str, pieces: str) -> None:
    """Table `name` of `piece_work_table`'s rows."""
    import numpy as np

    con = run.con
    con.execute(f"CREATE OR REPLACE TABLE {name}_s AS {items} ORDER BY rank, ts_ns, end_ns")
    c = con.execute(f"SELECT rank, wid, end_ns FROM {name}_s").fetchnumpy()
    end, n = c["end_ns"], len(c["end_ns"])
    span = int(end.max()) - int(end.min()) + 1 if n and not np.ma.is_masked(end) else 0
    if not span or (n + 1) * span >= 2**62:
        con.execute(f"DROP TABLE {name}_s")
        piece_work = sql.query(_GAPS, "piece_work", work=work_sql(pieces))
        con.execute(f"CREATE TABLE {name} AS {piece_work}")
        return
    lo = int(end.min())  # the times rebased on it (the running maxima count from 0)
    end = np.asarray(end, dtype=np.int64) - lo
    rank, wid = np.asarray(c["rank"]), np.asarray(c["wid"])
    new_rank = np.ones(n, dtype=bool)
    new_rank[1:] = rank[1:] != rank[:-1]
    new_piece = new_rank.copy()
    new_piece[1:] |= wid[1:] != wid[:-1]
    upto_piece = _running_max(end, new_piece, span)
    upto_rank = _running_max(end, new_rank, span)
    at = np.arange(n)
    piece_start = np.maximum.accumulate(np.where(new_piece, at, 0))
    prev = np.zeros(n, dtype=np.int64)
    prev[1:] = upto_piece[:-1]
    before = upto_rank[np.maximum(piece_start - 1, 0)]
    cols = {"prev": prev + lo, "before": before + lo, "p0": new_piece, "r0": new_rank[piece_start]}
    con.register(f"{name}_p", cols)
    try:
        con.execute(
            sql.query(
                _GAPS, "piece_work_joined", name=name, sorted=f"{name}_s", numbers=f"{name}_p"
            )
        )
    finally:
        con.unregister(f"{name}_p")
        con.execute(f"DROP TABLE {name}_s")


def _running_max(values, starts, span: int):
    """Each value's running max within its segment (a segment opens where `starts`):
    one `maximum.accumulate` over every segment, segment k's values (in [0, span)) lifted
    by k × span so no earlier segment's max reaches into it."""
    import numpy as np

    lift = (np.cumsum(starts) - 1) * span
    return np.maximum.accumulate(values + lift) - lift


def device_gaps_with_steps(run: Run, windows: str, step_windows: str) -> str:
    """SQL reading the rows of `metrics.host_bound:device_gaps` over the report's
    `windows` (a table made once: several figures read them), the step windows'
    (`step_windows`, the samples') kept for `host_bound_sql`. Where the step windows cut
    the report's into pieces (`windows.pieces`), the work items are ordered once over
    the pieces (`piece_work`): over a report window the work before an item is the later
    of the work before it in its piece and the work of the earlier pieces, so both row
    sets come from that one sort, exactly. Otherwise `device_gaps` over `windows`."""
    pieces = W.pieces(run, windows, step_windows)
    if pieces is None:
        return W.rows_of(run, device_gaps_sql(windows))
    work = piece_work_table(run, W.table(run, pieces))
    cols = "rank, wid, ts_ns, end_ns, launch_ns, gloo, prev_end"
    steps = f"SELECT {cols} FROM ({work}) WHERE wid >= 0"
    W.keep(run, (_GAPS, step_windows), sql.query(_GAPS, "device_gaps", work=steps))
    whole = (
        "SELECT rank, 0::INTEGER AS wid, ts_ns, end_ns, launch_ns, gloo, "
        f"greatest(prev_end, before_end) AS prev_end FROM ({work})"
    )
    return W.rows_of(run, sql.query(_GAPS, "device_gaps", work=whole))


def hidden_by_compute_sql(intervals: str, windows: str) -> str:
    """The rows of `intervals` (rank, s, e, …) with `hidden`: their part under compute
    within `windows` (rank, start_ns, end_ns) (`metrics.hidden_by_compute`)."""
    return sql.fill("metrics.hidden_by_compute", intervals=intervals, windows=windows)


class RankBreakdown(msgspec.Struct, kw_only=True):
    """One rank's breakdown over its analysed window (the report's `ranks[]` keys)."""

    rank: int
    window: str  # steps, trace (the rank had no ProfilerStep) or hta
    steps: F.STEPS.type(int)
    step_time_ms: F.STEP_TIME_MS.type(float | None)
    window_start_ns: F.WINDOW_START_NS.type(int | None)
    window_ms: F.WINDOW_MS.type(float)
    busy_ms: F.BUSY_MS.type(float)
    compute_ms: F.COMPUTE_MS.type(float)
    comm_ms: F.COMM_MS.type(float)
    overlap_ms: F.OVERLAP_MS.type(float)
    exposed_comm_ms: F.EXPOSED_COMM_MS.type(float)
    comm_wait_ms: F.COMM_WAIT_MS.type(float)
    idle_fraction: F.IDLE_FRACTION.type(float | None)
    compute_fraction: F.COMPUTE_FRACTION.type(float | None)
    non_compute_fraction: F.NON_COMPUTE_FRACTION.type(float | None)
    comm_fraction: F.COMM_FRACTION.type(float | None)
    comm_overlap_fraction: F.COMM_OVERLAP_FRACTION.type(float | None)
    exposed_comm_fraction: F.EXPOSED_COMM_FRACTION.type(float | None)
    exposed_transfer_fraction: F.EXPOSED_TRANSFER_FRACTION.type(float | None)
    comm_wait_fraction: F.COMM_WAIT_FRACTION.type(float | None)

    @property
    def step_ms(self) -> float:
        """The rank's step: its mean ProfilerStep, else its whole window."""
        return self.step_time_ms or self.window_ms

    def per_step_ms(self, fraction: float | None) -> float | None:
        """A fraction of this rank's window in ms of its step."""
        return None if fraction is None else fraction * self.step_ms


def _rows(run: Run, windows: list[W.Window], activity: str, steps: str | None) -> dict:
    """rank → (busy, compute, comm, overlap, peer-wait ns) over its window. Swept over
    the islands, the windows are cut at the step windows first where they can be
    (`windows.pieces`): each figure is a sum of clipped lengths, so a window's is the sum
    of its pieces', and the steps' rows (`metrics.step_windows:window_breakdown`, the
    samples') are kept from the same query."""
    report = W.values(run, windows)
    step_windows = W.step_windows(steps)
    pieces = W.pieces(run, report, step_windows) if activity == "activity_islands" else None
    if pieces is None:
        return {r[0]: r[2:] for r in run.sql(sweep_sql(report, activity)).fetchall()}
    swept = {(r[0], r[1]): r[2:] for r in run.sql(sweep_sql(W.table(run, pieces))).fetchall()}
    sums: dict[int, list[int]] = {}
    for (rank, _wid), figs in swept.items():
        acc = sums.setdefault(rank, [0, 0, 0, 0, 0])
        for k, x in enumerate(figs):
            acc[k] += x
    none = (0, 0, 0, 0, 0)
    breakdown = [
        (rank, wid, end - start, *swept.get((rank, wid), none))
        for rank, wid, start, end, _n in sorted(pieces)
        if wid >= 0
    ]
    W.keep(run, ("window_breakdown", step_windows), breakdown)
    return {rank: tuple(v) for rank, v in sums.items()}


def per_rank(run: Run, window: str = "steps", steps: str | None = None) -> list[RankBreakdown]:
    """One `RankBreakdown` per rank (fractions of the rank's analysed window)."""
    wins = W.rank_windows(run, window, steps)
    sums = _rows(run, wins, W.activity_table(window), steps)
    out = []
    for w in wins:
        win = (w.end_ns - w.start_ns) or 0
        busy, comp, comm, ovl, wait = sums.get(w.rank, (0, 0, 0, 0, 0))

        def frac(x: float, win: int = win) -> float | None:
            return x / win if win > 0 else None

        out.append(
            RankBreakdown(
                rank=w.rank,
                window=window if w.n_steps or window != "steps" else "trace",
                steps=w.n_steps,
                step_time_ms=(w.step_ns / 1e6) if w.step_ns is not None else None,
                window_start_ns=w.start_ns,
                window_ms=win / 1e6,
                busy_ms=busy / 1e6,
                compute_ms=comp / 1e6,
                comm_ms=comm / 1e6,
                overlap_ms=ovl / 1e6,
                exposed_comm_ms=(comm - ovl) / 1e6,
                comm_wait_ms=wait / 1e6,
                idle_fraction=frac(win - busy),
                compute_fraction=frac(comp),
                non_compute_fraction=frac(busy - comp),
                comm_fraction=frac(comm),
                comm_overlap_fraction=(ovl / comm) if comm > 0 else None,
                exposed_comm_fraction=frac(comm - ovl),
                exposed_transfer_fraction=frac(comm - ovl - wait),
                comm_wait_fraction=frac(wait),
            )
        )
    return out


def windows_of(ranks: list[RankBreakdown]) -> list[W.Window]:
    """The analysed windows of a breakdown, for the figures computed over them."""
    return [
        W.Window(
            r.rank, r.window_start_ns, r.window_start_ns + round(r.window_ms * 1e6), r.steps, None
        )
        for r in ranks
        if r.window_start_ns is not None
    ]
