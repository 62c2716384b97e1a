-- Compute: counted ops (the FLOPs table, `op_flops`) in the analysed windows.

-- @query op_dtypes
-- The (dtype, tf32) pairs of the counted ops that start in an analysed window.
-- Placeholder {ops}: `op_flops` rows that start in a window.
-- @column dtype: the op's element type
-- @column tf32: a TF32 kernel ran it
SELECT DISTINCT dtype, tf32 FROM ({ops})

-- @query op_groups
-- Counted ops in each rank's window, grouped by (rank, name, dtype, tf32, phase, and
-- whether the op ran faster than its dtype's peak — a suspect count). Placeholders {ops}:
-- `op_flops` rows starting in a window; {peaks}: rows (dtype, tf32, peak) of peak FLOP/s.
-- @column rank: global rank
-- @column name: op name
-- @column dtype: element type
-- @column tf32: a TF32 kernel ran it
-- @column phase: forward, backward or optimizer
-- @column suspect: it ran faster than its dtype's peak
-- @column n: ops
-- @column n_null: ops whose FLOPs the trace cannot give
-- @column flops: their FLOPs
-- @column timed_flops: FLOPs of the ops with device time
-- @column device_ns: device time of the ops with FLOPs
-- @column null_device_ns: device time of the ops without FLOPs
-- @column note: why some FLOPs are unknown (the least note, deterministic)
-- @column max_peak_ratio: the fastest op's achieved FLOP/s ÷ peak
WITH f AS ({ops}), p AS ({peaks})
SELECT f.rank, f.name, f.dtype, f.tf32, f.phase,
       coalesce(f.achieved_flops_per_s > p.peak, false) AS suspect, count(*) AS n,
       count(*) FILTER (f.flops IS NULL) AS n_null, sum(f.flops) AS flops,
       sum(f.flops) FILTER (f.device_ns > 0) AS timed_flops,
       sum(f.device_ns) FILTER (f.flops IS NOT NULL) AS device_ns,
       sum(f.device_ns) FILTER (f.flops IS NULL) AS null_device_ns, min(f.flops_note) AS note,
       max(f.achieved_flops_per_s / p.peak) AS max_peak_ratio
FROM f LEFT JOIN p ON p.dtype IS NOT DISTINCT FROM f.dtype AND p.tf32 = coalesce(f.tf32, false)
GROUP BY ALL
ORDER BY ALL  -- the sums then add in one order: the same report every time

-- @query host_bound_by_rank
-- Each rank's host-bound gaps over its analysed window. Placeholders {windows}: the
-- windows (rank, wid, start_ns, end_ns, n); {host_bound}: `metrics.host_bound` over them.
-- @column rank: global rank
-- @column n: steps in the window
-- @column host_bound_ns: host-bound gap time
-- @column host_gaps: host-bound gaps
-- @column gap_ns: all device gaps between kernels
-- @column median_kernel_ns: median kernel duration
WITH w AS ({windows})
SELECT h.rank, w.n, h.host_bound_ns, h.host_gaps, h.gap_ns, h.median_kernel_ns
FROM ({host_bound}) h JOIN w USING (rank)
