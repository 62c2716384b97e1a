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


-- @query region_cells
-- `region_time`'s figures, its region named by a hash of (kind, path), with the kind and
-- the path on the region's first row only: numbers for columns read at once (a path list
-- per row cost more than the query at 1,024 ranks). Placeholder {cells}: the
-- `region_time` query.
-- @column region UBIGINT: hash(kind, path)
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column n INTEGER: ProfilerSteps in the window (at least 1)
-- @column count BIGINT: instances
-- @column cpu_ns BIGINT: summed CPU spans
-- @column device_ns BIGINT: summed device time launched inside (children included), truncated
-- @column device_self_ns BIGINT: summed device time launched outside every child, truncated
-- @column flops DOUBLE: summed FLOPs of the counted ops inside (null: none counted)
-- @column kind VARCHAR: module or annotation, on the region's first row (else null)
-- @column path VARCHAR[]: names from the outermost region to the leaf, on its first row
SELECT hash(kind, path) AS region, rank, wid, n, count, cpu_ns::BIGINT AS cpu_ns,
       trunc(device_ns)::BIGINT AS device_ns, trunc(device_self_ns)::BIGINT AS device_self_ns,
       flops,
       CASE WHEN row_number() OVER (PARTITION BY kind, path ORDER BY rank, wid) = 1
            THEN kind END AS kind,
       CASE WHEN row_number() OVER (PARTITION BY kind, path ORDER BY rank, wid) = 1
            THEN path END AS path
FROM ({cells})
ORDER BY region, rank, wid
