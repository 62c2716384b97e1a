-- @query region_time
-- Per rank, window of {windows} (rank, wid, start_ns, end_ns, n) and region (kind, path):
-- its instances whose work starts in the window (`regions.work_ns`, as ops count their
-- FLOPs: `windows.ops_in`), summed. Placeholder {in_windows}: `regions` rows starting in a
-- window, with the window's columns.
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column n INTEGER: ProfilerSteps in the window (at least 1)
-- @column kind VARCHAR: module or annotation
-- @column path VARCHAR[]: names from the outermost region to the leaf
-- @column count BIGINT: instances
-- @column cpu_ns HUGEINT: summed CPU spans
-- @column device_ns DOUBLE: summed device time launched inside (children included)
-- @column device_self_ns DOUBLE: summed device time launched outside every child
-- @column flops DOUBLE: summed FLOPs of the counted ops inside (null: none counted)
SELECT rank, wid, max(n) AS n, kind, path, count(*) AS count, sum(dur_ns) AS cpu_ns,
       sum(device_ns) AS device_ns, sum(device_self_ns) AS device_self_ns,
       sum(flops) AS flops
FROM ({in_windows})
GROUP BY rank, wid, kind, path
