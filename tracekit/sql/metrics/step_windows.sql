-- @include rank.device_steps
-- @query step_windows
-- Each selected ProfilerStep as its own window, on the device (`device_steps`, as the
-- report's window): the per-step samples' windows.
-- Placeholder {selection}: a predicate on `steps.step` (TRUE for all).
-- @column rank INTEGER: global rank
-- @column wid BIGINT: the step number (the window's id)
-- @column start_ns BIGINT: step start, ns since the epoch
-- @column end_ns BIGINT: step end, ns since the epoch
-- @column n INTEGER: 1 (one step)
SELECT rank, step AS wid, ts_ns AS start_ns, end_ns, 1 AS n FROM device_steps
WHERE analysed AND {selection}

-- @query window_breakdown
-- The sweep's figures per window, every window listed (a window without activity is all
-- idle). Placeholders {windows}: (rank, wid, start_ns, end_ns); {sweep}: `metrics.sweep`
-- over them.
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column window_ns BIGINT: the window's length
-- @column busy_ns HUGEINT: union of all device activity
-- @column compute_ns HUGEINT: compute, no host wait
-- @column comm_ns HUGEINT: communication, or a host waiting for it
-- @column overlap_ns HUGEINT: compute and communication together
-- @column wait_ns HUGEINT: exposed communication waiting for a late peer
WITH w AS ({windows}), p AS ({sweep})
SELECT w.rank, w.wid, w.end_ns - w.start_ns AS window_ns,
       coalesce(p.busy_ns, 0) AS busy_ns, coalesce(p.compute_ns, 0) AS compute_ns,
       coalesce(p.comm_ns, 0) AS comm_ns, coalesce(p.overlap_ns, 0) AS overlap_ns,
       coalesce(p.wait_ns, 0) AS wait_ns
FROM w LEFT JOIN p ON p.rank = w.rank AND p.wid = w.wid
ORDER BY w.rank, w.wid
