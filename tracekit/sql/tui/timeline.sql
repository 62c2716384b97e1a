-- @include base.tables
-- @include rank.device_activity
-- @include rank.op_flops
-- @include rank.steps
-- @include run.collectives
-- The TUI's timeline (screen 3): lanes, step spans, the viewport aggregated to columns,
-- the event under the cursor and what launched it, the next event on a lane.
-- Python fills {ranks} with a rank predicate (`rank IN (0, 1)`, or TRUE) and {lane}
-- with the lane column or NULL (lanes per rank); values are bound.

-- @query lanes
-- The streams / threads with device activity, per rank.
-- @column rank: global rank
-- @column lane: a stream (kernels) or thread (CPU runs) with device activity
SELECT DISTINCT rank, lane FROM device_activity ORDER BY rank, lane

-- @query step_windows
-- Every ProfilerStep of every rank.
-- @column rank: global rank
-- @column step: the step number
-- @column ts_ns: the step's start
-- @column end_ns: the step's end
SELECT rank, step, ts_ns, end_ns FROM steps ORDER BY rank, step

-- @query device_span
-- The span of the device activity of the ranks {ranks}.
-- @column t0: the first activity's start (null: none)
-- @column t1: the last activity's end
SELECT min(ts_ns) AS t0, max(end_ns) AS t1 FROM device_activity WHERE {ranks}

-- @query trace_span
-- The span of the traces (a run without device activity).
-- @column t0: the first trace's start
-- @column t1: the last trace's end
SELECT min(trace_start_ns) AS t0, max(trace_end_ns) AS t1 FROM rank_info

-- @query frame
-- Device activity of the ranks {ranks} in [$t0, $t1) cut into $n columns: each event no
-- shorter than $mind split over the columns it covers, summed per lane, category and
-- column; `hit` when an event there has a name like $pat.
-- @column rank: global rank
-- @column lane: the lane (null when lanes are per rank)
-- @column category: compute, communication, memcpy, memset or host_wait
-- @column col: the column, 0 … $n - 1
-- @column ns: the category's time in the column, ns (summed over the lane's streams)
-- @column hit: an event in the column has a name like $pat
WITH a AS (
    SELECT rank, {lane} AS lane, category, name,
           greatest(ts_ns, $t0) AS s, least(end_ns, $t1) AS e
    FROM device_activity
    WHERE {ranks}
      AND end_ns > $t0 AND ts_ns < $t1 AND dur_ns >= $mind
), c AS (
    SELECT *, unnest(range(
        ((s - $t0) * $n // ($t1 - $t0))::BIGINT,
        ((greatest(e, s + 1) - 1 - $t0) * $n // ($t1 - $t0))::BIGINT + 1)) AS col
    FROM a
)
SELECT rank, lane, category, col,
       sum(least(e, $t0 + (col + 1) * ($t1 - $t0) // $n)
           - greatest(s, $t0 + col * ($t1 - $t0) // $n))::BIGINT AS ns,
       coalesce(bool_or(name ILIKE $pat), false) AS hit
FROM c GROUP BY ALL

-- @query event_at
-- The longest device event of rank $rank (on lane $lane; any lane when null) overlapping
-- [$ta, $tb), no shorter than $mind, one whose name is like $pat first.
-- @column category: compute, communication, memcpy, memset or host_wait
-- @column kind: the event's kind (kernel, memcpy, cpu_op …)
-- @column name: the event's name
-- @column lane: its stream / thread
-- @column correlation: the launch's correlation id (null: none)
-- @column ts_ns: start
-- @column dur_ns: duration, ns
-- @column end_ns: end
SELECT category, kind, name, lane, correlation, ts_ns, dur_ns, end_ns
FROM device_activity WHERE rank = $rank AND ($lane IS NULL OR lane = $lane)
  AND end_ns > $ta AND ts_ns < $tb AND dur_ns >= $mind
ORDER BY coalesce(name ILIKE $pat, false) DESC, dur_ns DESC, ts_ns LIMIT 1

-- @query launch
-- The runtime call (cudaLaunchKernel …) of correlation $c on rank $rank.
-- @column tid: the launching thread
-- @column ts_ns: the call's start
-- @column runtime: the call's name
SELECT r.tid, r.ts_ns, r.name AS runtime FROM events r
WHERE r.rank = $rank AND r.kind = 'runtime' AND r.correlation = $c LIMIT 1

-- @query launching_op
-- The innermost CPU op of thread $tid on rank $rank running at $t.
-- @column name: the op's name
-- @column ts_ns: its start
-- @column dur_ns: its duration, ns
SELECT name, ts_ns, dur_ns FROM events
WHERE rank = $rank AND kind = 'cpu_op' AND tid = $tid
  AND ts_ns <= $t AND ts_ns + dur_ns >= $t
ORDER BY ts_ns DESC, dur_ns LIMIT 1

-- @query launch_flops
-- The counted op of thread $tid on rank $rank running at $t.
-- @column name: the op's name
-- @column flops: its FLOPs
SELECT name, flops FROM op_flops WHERE rank = $rank AND tid = $tid
  AND ts_ns <= $t AND ts_ns + dur_ns >= $t LIMIT 1

-- @query op_flops
-- The FLOPs of the counted op $n starting at $t on rank $rank (CPU runs).
-- @column flops: its FLOPs
SELECT flops FROM op_flops WHERE rank = $rank AND ts_ns = $t AND name = $n
LIMIT 1

-- @query event_collective
-- The collective that is the event starting at $t on lane $lane of rank $rank.
-- @column name: the collective (all_reduce …)
-- @column issue_name: the op that issued it
-- @column bytes: its size
-- @column group_size: ranks in its group
-- @column pg_name: its process group
-- @column pg_desc: the process group's description
-- @column wait_ns: time waited for the last rank, ns
-- @column ranks_matched: ranks whose instance was matched
SELECT name, issue_name, bytes, group_size, pg_name, pg_desc, wait_ns, ranks_matched
FROM collectives WHERE rank = $rank AND ts_ns = $t AND lane = $lane LIMIT 1

-- @query next_event
-- The first device event of rank $rank (on lane $lane; any lane when null) starting
-- after $t, no shorter than $mind (named like $pat when given).
-- @column ts_ns: its start
-- @column end_ns: its end
SELECT ts_ns, end_ns FROM device_activity WHERE rank = $rank
  AND ($lane IS NULL OR lane = $lane)
  AND ts_ns > $t AND dur_ns >= $mind AND ($pat IS NULL OR name ILIKE $pat)
ORDER BY ts_ns LIMIT 1

-- @query previous_event
-- The last device event of rank $rank (on lane $lane; any lane when null) starting
-- before $t, no shorter than $mind (named like $pat when given).
-- @column ts_ns: its start
-- @column end_ns: its end
SELECT ts_ns, end_ns FROM device_activity WHERE rank = $rank
  AND ($lane IS NULL OR lane = $lane)
  AND ts_ns < $t AND dur_ns >= $mind AND ($pat IS NULL OR name ILIKE $pat)
ORDER BY ts_ns DESC LIMIT 1
