-- @include base.tables
-- @include rank.regions
-- @include rank.steps
-- The regions screen's jumps (tui/screens/regions.py): a region's first occurrence in an
-- analysed step, and the ops that ran inside it.

-- @query first
-- The region's first occurrence on rank $rank at or after $from_ns (the first analysed
-- step's start): where the timeline puts its cursor.
-- @column ts_ns: its start (CPU), ns since the epoch
-- @column step: the ProfilerStep whose span holds that start (null: none)
SELECT g.ts_ns,
       (SELECT s.step FROM steps s WHERE s.rank = g.rank AND g.ts_ns >= s.ts_ns
          AND g.ts_ns < s.ts_ns + s.dur_ns ORDER BY s.ts_ns DESC LIMIT 1) AS step
FROM regions g
WHERE g.rank = $rank AND g.path = $path AND g.ts_ns >= $from_ns
ORDER BY g.ts_ns LIMIT 1

-- @query ops
-- The CPU ops that start inside the region's spans on its thread, over every rank, by
-- their summed CPU time (the heaviest first): where the ops screen puts its cursor.
-- @column name: op name
-- @column n: how many
-- @column cpu_ns: their summed CPU time, ns
SELECT e.name::VARCHAR AS name, count(*) AS n, sum(e.dur_ns) AS cpu_ns
FROM regions g
JOIN events e ON e.rank = g.rank AND e.tid = g.tid AND e.kind = 'cpu_op'
 AND e.ts_ns >= g.ts_ns AND e.ts_ns < g.end_ns
WHERE g.path = $path
GROUP BY 1 ORDER BY cpu_ns DESC LIMIT 50
