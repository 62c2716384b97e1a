-- @include rank.device_activity
-- Fusion: how the device's compute time splits between kernels by name.

-- @query compute_kernels
-- Per rank and compute kernel name, the kernels' summed device time in the analysed
-- windows {windows} (rank, wid, start_ns, end_ns, …), clipped to them.
-- @column rank: global rank
-- @column name: the kernel's name
-- @column dur_ns: summed device time, ns
-- @column kernels: how many
WITH w AS ({windows})
SELECT a.rank, a.name::VARCHAR AS name,
       sum(least(a.end_ns, w.end_ns) - greatest(a.ts_ns, w.start_ns)) AS dur_ns,
       count(*) AS kernels
FROM device_activity a JOIN w ON a.rank = w.rank
WHERE a.category = 'compute' AND a.kind = 'kernel'
  AND a.ts_ns < w.end_ns AND a.end_ns > w.start_ns
GROUP BY ALL ORDER BY ALL
