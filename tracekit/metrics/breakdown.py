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

Windows (`--window`):

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracekit.errors import TracekitError
from tracekit.store.run import Run

WINDOWS = ("steps", "trace", "hta")


@dataclass(frozen=True)
class StepSelection:
    """Which ProfilerSteps to analyse: all, one, or an inclusive range of step numbers."""

    first: int | None = None
    last: int | None = None

    @classmethod
    def parse(cls, spec: str | None) -> StepSelection:
        if spec is None or spec.strip().lower() in ("", "all"):
            return cls()
        m = re.fullmatch(r"\s*(\d+)\s*(?:[-:]\s*(\d+)\s*)?", spec)
        if not m:
            raise TracekitError(
                f"--steps {spec!r} is not a step selection; use all, N or A-B (step numbers)"
            )
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b < a:
            raise TracekitError(f"--steps {spec!r}: the range ends before it starts")
        return cls(a, b)

    def sql(self) -> str:
        if self.first is None:
            return "TRUE"
        return f"step BETWEEN {self.first} AND {self.last}"


def _windows_sql(window: str, steps: StepSelection) -> str:
    """SQL for the analysed window of each rank: (rank, start_ns, end_ns, n_steps, step_ns)."""
    trace_w = """
        SELECT rank, min(ts_ns) AS start_ns, max(end_ns) AS end_ns,
               0 AS n_steps, NULL::DOUBLE AS step_ns
        FROM activity_islands GROUP BY rank"""
    if window == "trace":
        return trace_w
    if window == "hta":
        return """
        SELECT rank, min(ts_ns) AS start_ns, max(end_ns) AS end_ns,
               0 AS n_steps, NULL::DOUBLE AS step_ns
        FROM _hta_activity GROUP BY rank"""
    return f"""
        WITH s AS (SELECT * FROM steps WHERE {steps.sql()}),
        sw AS (SELECT rank, min(ts_ns) AS start_ns, max(end_ns) AS end_ns,
                      count(*) AS n_steps, avg(dur_ns) AS step_ns
               FROM s GROUP BY rank)
        SELECT * FROM sw
        UNION ALL
        SELECT t.* FROM ({trace_w}) t
        WHERE t.rank NOT IN (SELECT rank FROM steps)"""


# HTA keeps device work whose launch (runtime correlation) began before the last
# ProfilerStep started; ranks with fewer than two steps keep everything. Like HTA
# (trace_parser.py), each interval is rounded inward to whole microseconds.
_HTA_ACTIVITY = """
CREATE OR REPLACE TEMP VIEW _hta_activity AS
WITH last AS (SELECT rank, max(ts_ns) AS last_start, count(*) AS n FROM steps GROUP BY rank),
launched AS (
    SELECT e.rank, e.correlation FROM events e JOIN last l USING (rank)
    WHERE e.kind = 'runtime' AND e.correlation IS NOT NULL AND e.ts_ns < l.last_start
)
SELECT a.* REPLACE (
           (a.ts_ns + 999) // 1000 * 1000 AS ts_ns,
           a.end_ns // 1000 * 1000 AS end_ns)
FROM device_activity a
LEFT JOIN last l USING (rank)
WHERE l.n IS NULL OR l.n < 2
   OR (a.rank, a.correlation) IN (SELECT (rank, correlation) FROM launched)
"""


def sweep_sql(windows: str, activity: str = "activity_islands") -> str:
    """SQL: per (rank, wid) of `windows` (a query with columns rank, wid, start_ns, end_ns;
    one window per rank for the report, one per step for the gate's samples) the busy,
    compute, communication, overlap and peer-wait ns — the breakdown's definitions.

    Compute is compute running and no host wait (a thread waiting for communication is
    not computing, whatever op encloses it); communication is communication running or a
    host waiting for it; GPU runs have no host waits. Peer wait: exposed communication
    inside a matched collective before its last peer arrived (`collectives.wait_ns`).

    `activity_islands` (the default): the segments materialized at ingest
    (`activity_segments`, the same rules) clipped to the windows and summed; the peer
    wait is one small sweep over the exposed segments and the waits. Another `activity`
    (HTA's rounded events) is swept in full (`_full_sweep_sql`)."""
    if activity != "activity_islands":
        return _full_sweep_sql(windows, activity)
    return f"""
    (WITH sw AS ({windows}),
    seg AS (
        SELECT a.rank, sw.wid, a.compute, a.comm, a.other,
               greatest(a.ts_ns, sw.start_ns) AS s, least(a.end_ns, sw.end_ns) AS e
        FROM activity_segments a JOIN sw ON a.rank = sw.rank
        WHERE a.end_ns > sw.start_ns AND a.ts_ns < sw.end_ns
    ),
    sums AS (
        SELECT rank, wid, sum(e - s) AS busy_ns,
               coalesce(sum(e - s) FILTER (compute), 0) AS compute_ns,
               coalesce(sum(e - s) FILTER (comm), 0) AS comm_ns,
               coalesce(sum(e - s) FILTER (compute AND comm), 0) AS overlap_ns
        FROM seg GROUP BY rank, wid
    ),
    pw AS (
        SELECT c.rank, sw.wid, greatest(c.ts_ns, sw.start_ns) AS s,
               least(c.ts_ns + least(c.wait_ns, c.dur_ns), sw.end_ns) AS e
        FROM collectives c JOIN sw ON c.rank = sw.rank
        WHERE c.wait_ns > 0 AND c.matched
          AND c.ts_ns + least(c.wait_ns, c.dur_ns) > sw.start_ns AND c.ts_ns < sw.end_ns
    ),
    edges AS (
        SELECT rank, wid, t, sum(dx) AS dx, sum(dp) AS dp FROM (
            SELECT rank, wid, s AS t, 1 AS dx, 0 AS dp FROM seg WHERE comm AND NOT compute
            UNION ALL SELECT rank, wid, e, -1, 0 FROM seg WHERE comm AND NOT compute
            UNION ALL SELECT rank, wid, s, 0, 1 FROM pw
            UNION ALL SELECT rank, wid, e, 0, -1 FROM pw)
        GROUP BY rank, wid, t
    ),
    waits AS (
        SELECT rank, wid, sum(len) AS wait_ns FROM (
            SELECT rank, wid, lead(t) OVER run - t AS len,
                   sum(dx) OVER cum > 0 AND sum(dp) OVER cum > 0 AS waiting
            FROM edges
            WINDOW run AS (PARTITION BY rank, wid ORDER BY t),
                   cum AS (PARTITION BY rank, wid ORDER BY t ROWS UNBOUNDED PRECEDING))
        WHERE waiting AND len > 0 GROUP BY rank, wid
    )
    SELECT s.rank, s.wid, s.busy_ns, s.compute_ns, s.comm_ns, s.overlap_ns,
           coalesce(w.wait_ns, 0) AS wait_ns
    FROM sums s LEFT JOIN waits w USING (rank, wid))"""


def _full_sweep_sql(windows: str, activity: str) -> str:
    """`sweep_sql` over any activity (rank, category, ts_ns, end_ns): one sweep over
    interval boundaries — the running depth of compute (C), communication (M), other
    device work (O: memcpy, memset), host waits (W) and waits for late peers (P); each
    segment between two boundaries is then classified as `activity_segments` does."""
    return f"""
    (WITH sw AS ({windows}),
    src AS (
        SELECT rank, category, ts_ns, end_ns FROM {activity} WHERE category <> 'computing'
        UNION ALL
        SELECT rank, 'peer_wait', ts_ns, ts_ns + least(wait_ns, dur_ns) FROM collectives
        WHERE wait_ns > 0 AND matched
    ),
    act AS (
        SELECT a.rank, sw.wid, a.category,
               greatest(a.ts_ns, sw.start_ns) AS s, least(a.end_ns, sw.end_ns) AS e
        FROM src a JOIN sw ON a.rank = sw.rank
        WHERE a.end_ns > sw.start_ns AND a.ts_ns < sw.end_ns
    ),
    edges AS (
        SELECT rank, wid, t, sum(dc) AS dc, sum(dm) AS dm, sum(do_) AS do_, sum(dw) AS dw,
               sum(dp) AS dp
        FROM (
            SELECT rank, wid, s AS t,
                   (category = 'compute')::INT AS dc, (category = 'communication')::INT AS dm,
                   (category IN ('memcpy', 'memset'))::INT AS do_,
                   (category = 'host_wait')::INT AS dw, (category = 'peer_wait')::INT AS dp
            FROM act
            UNION ALL
            SELECT rank, wid, e,
                   -(category = 'compute')::INT, -(category = 'communication')::INT,
                   -(category IN ('memcpy', 'memset'))::INT, -(category = 'host_wait')::INT,
                   -(category = 'peer_wait')::INT
            FROM act
        )
        GROUP BY rank, wid, t
    ),
    segments AS (
        SELECT rank, wid,
               lead(t) OVER (PARTITION BY rank, wid ORDER BY t) - t AS len,
               sum(dc) OVER run > 0 AS c, sum(dm) OVER run > 0 AS m,
               sum(do_) OVER run > 0 AS o, sum(dw) OVER run > 0 AS wt,
               sum(dp) OVER run > 0 AS pw
        FROM edges
        WINDOW run AS (PARTITION BY rank, wid ORDER BY t ROWS UNBOUNDED PRECEDING)
    ),
    k AS (
        SELECT rank, wid, len, c AND NOT wt AS comp, m OR wt AS comm, o, pw
        FROM segments WHERE len > 0
    )
    SELECT rank, wid,
           coalesce(sum(len) FILTER (comp OR comm OR o), 0) AS busy_ns,
           coalesce(sum(len) FILTER (comp), 0) AS compute_ns,
           coalesce(sum(len) FILTER (comm), 0) AS comm_ns,
           coalesce(sum(len) FILTER (comp AND comm), 0) AS overlap_ns,
           coalesce(sum(len) FILTER (comm AND NOT comp AND pw), 0) AS wait_ns
    FROM k GROUP BY rank, wid)"""


def host_bound_sql(windows: str) -> str:
    """SQL: per (rank, wid) of `windows` (rank, wid, start_ns, end_ns) the host-bound
    time — a device gap (no kernel, memcpy or memset on any stream) that ends with a
    kernel launched only after the previous work had ended (`device_activity.launch_ns`,
    joined at ingest): the device waited for the host — with the gap count, all gaps,
    and the median kernel duration. A gap across the start of a ProfilerStep is left
    out: that is the previous step's tail (waiting on other ranks, a pipeline's
    cooldown), not launch overhead. GPU runs (needs launches)."""
    return f"""
    (WITH sw AS ({windows}),
    d AS (
        SELECT a.rank, sw.wid, a.ts_ns, a.end_ns, a.launch_ns
        FROM device_activity a JOIN sw ON a.rank = sw.rank
        WHERE a.kind IN ('kernel', 'memcpy', 'memset')
          AND a.ts_ns >= sw.start_ns AND a.ts_ns < sw.end_ns
    ),
    l0 AS (
        SELECT *, max(end_ns) OVER (PARTITION BY rank, wid ORDER BY ts_ns, end_ns
                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
        FROM d
    ),
    boundary AS (
        SELECT DISTINCT l0.rank, l0.wid, l0.ts_ns FROM l0 JOIN steps s
          ON s.rank = l0.rank AND s.ts_ns > l0.prev_end AND s.ts_ns <= l0.launch_ns
    ),
    l AS (
        SELECT l0.* FROM l0 ANTI JOIN boundary b
        ON b.rank = l0.rank AND b.wid = l0.wid AND b.ts_ns = l0.ts_ns
    )
    SELECT rank, wid,
           coalesce(sum(ts_ns - prev_end) FILTER (ts_ns > prev_end AND launch_ns >= prev_end),
                    0) AS host_bound_ns,
           count(*) FILTER (ts_ns > prev_end AND launch_ns >= prev_end) AS host_gaps,
           coalesce(sum(ts_ns - prev_end) FILTER (ts_ns > prev_end), 0) AS gap_ns,
           median(end_ns - ts_ns) AS median_kernel_ns
    FROM l GROUP BY rank, wid)"""


def _breakdown_sql(window: str, steps: StepSelection) -> str:
    activity = "_hta_activity" if window == "hta" else "activity_islands"
    return f"""
WITH w AS ({_windows_sql(window, steps)}),
p AS {sweep_sql("SELECT rank, 0 AS wid, start_ns, end_ns FROM w", activity)}
SELECT w.rank, w.n_steps, w.step_ns, w.start_ns, w.end_ns,
       w.end_ns - w.start_ns AS window_ns,
       coalesce(p.busy_ns, 0) AS busy_ns,
       coalesce(p.compute_ns, 0) AS compute_ns,
       coalesce(p.comm_ns, 0) AS comm_ns,
       coalesce(p.overlap_ns, 0) AS overlap_ns,
       coalesce(p.wait_ns, 0) AS wait_ns
FROM w LEFT JOIN p USING (rank)
ORDER BY w.rank
"""


def per_rank(run: Run, window: str = "steps", steps: str | None = None) -> list[dict]:
    """One dict per rank with the DESIGN report's per-rank keys (fractions of the window)."""
    if window not in WINDOWS:
        raise TracekitError(f"--window {window!r}: use one of {', '.join(WINDOWS)}")
    sel = StepSelection.parse(steps)
    if window == "hta":
        run.con.execute(_HTA_ACTIVITY)
    rows = run.sql(_breakdown_sql(window, sel)).fetchall()
    if sel.first is not None and not rows:
        raise TracekitError(f"--steps {steps}: no ProfilerStep in that range on any rank")
    out = []
    for rank, n_steps, step_ns, start, _end, win, busy, comp, comm, ovl, wait in rows:
        win = win or 0

        def frac(x: float, win: int = win) -> float | None:
            return x / win if win > 0 else None

        out.append(
            {
                "rank": rank,
                "window": window if n_steps or window != "steps" else "trace",
                "steps": n_steps,
                "step_time_ms": (step_ns / 1e6) if step_ns is not None else None,
                "window_start_ns": start,
                "window_ms": win / 1e6,
                "busy_ms": busy / 1e6,
                "compute_ms": comp / 1e6,
                "comm_ms": comm / 1e6,
                "overlap_ms": ovl / 1e6,
                "exposed_comm_ms": (comm - ovl) / 1e6,
                "comm_wait_ms": wait / 1e6,
                "idle_fraction": frac(win - busy),
                "compute_fraction": frac(comp),
                "non_compute_fraction": frac(busy - comp),
                "comm_fraction": frac(comm),
                "comm_overlap_fraction": (ovl / comm) if comm > 0 else None,
                "exposed_comm_fraction": frac(comm - ovl),
                "exposed_transfer_fraction": frac(comm - ovl - wait),
                "comm_wait_fraction": frac(wait),
            }
        )
    return out


def hidden_by_compute_sql(intervals: str, windows: str) -> str:
    """SQL: the rows of `intervals` (a query with columns rank, s, e, and any others) with
    `hidden`, the part of [s, e) under the rank's compute islands clipped to `windows`
    (a query with columns rank, start_ns, end_ns).

    No sweep, no interval join: with C(t) the rank's compute time before t — read off the
    islands' running sum materialized at ingest (`activity_islands.before_ns`, one ASOF
    lookup per point) — the part of [s, e) under compute within a window W is
    C(clamp_W(e)) − C(clamp_W(s)), summed over the windows the interval meets."""
    return f"""
    (WITH hw AS {windows},
    iv AS (SELECT row_number() OVER () AS _id, * FROM {intervals}),
    pairs AS (
        SELECT iv._id, iv.rank,
               least(greatest(iv.s, hw.start_ns), hw.end_ns) AS a,
               least(greatest(iv.e, hw.start_ns), hw.end_ns) AS b
        FROM iv JOIN hw ON iv.rank = hw.rank
        WHERE iv.e > iv.s AND iv.e > hw.start_ns AND iv.s < hw.end_ns
    ),
    pts AS (
        SELECT _id, rank, a AS t, -1 AS sign FROM pairs
        UNION ALL SELECT _id, rank, b, 1 FROM pairs
    ),
    comp AS (
        SELECT rank, ts_ns, end_ns, before_ns FROM activity_islands
        WHERE category = 'computing'
    ),
    c AS (
        SELECT pts._id,
               sum(pts.sign * coalesce(comp.before_ns + least(pts.t, comp.end_ns) - comp.ts_ns,
                                       0)) AS hidden
        FROM pts ASOF LEFT JOIN comp ON pts.rank = comp.rank AND pts.t >= comp.ts_ns
        GROUP BY pts._id
    )
    SELECT iv.* EXCLUDE (_id), greatest(coalesce(c.hidden, 0), 0)::BIGINT AS hidden
    FROM iv LEFT JOIN c USING (_id))"""
