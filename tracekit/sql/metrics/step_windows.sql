-- @include rank.device_steps
-- @query step_windows
-- Each selected ProfilerStep as its own window, on the device (`device_steps`, as the
-- report's window): the per-step samples' windows.
-- Placeholder {selection}: a predicate on `steps.step` (TRUE for all).
-- @column rank: global rank
-- @column wid: the step number (the window's id)
-- @column start_ns: step start, ns since the epoch
-- @column end_ns: step end, ns since the epoch
-- @column n: 1 (one step)
SELECT rank, step AS wid, ts_ns AS start_ns, end_ns, 1 AS n FROM device_steps
WHERE analysed AND {selection}

-- @query window_breakdown
-- The sweep's figures per window, every window listed (a window without activity is all
-- idle). Placeholders {windows}: (rank, wid, start_ns, end_ns); {sweep}: `metrics.sweep`
-- over them.
-- @column rank: global rank
-- @column wid: the window's id
-- @column window_ns: the window's length
-- @column busy_ns: union of all device activity
-- @column compute_ns: compute, no host wait
-- @column comm_ns: communication, or a host waiting for it
-- @column overlap_ns: compute and communication together
-- @column wait_ns: exposed communication waiting for a late peer
WITH w AS ({windows}), p AS ({sweep})
SELECT w.rank, w.wid, w.end_ns - w.start_ns AS window_ns,
       coalesce(p.busy_ns, 0) AS busy_ns, coalesce(p.compute_ns, 0) AS compute_ns,
       coalesce(p.comm_ns, 0) AS comm_ns, coalesce(p.overlap_ns, 0) AS overlap_ns,
       coalesce(p.wait_ns, 0) AS wait_ns
FROM w LEFT JOIN p ON p.rank = w.rank AND p.wid = w.wid
ORDER BY w.rank, w.wid
