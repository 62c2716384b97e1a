-- @include base.tables
-- The TUI's ops & kernels (screen 5).

-- @query kernels
-- The kernels op $name launched over the run (GPU runs): launches on the op's thread
-- within the op's span, joined to kernels by correlation — as `op_flops` counts them;
-- the $lim with most device time.
-- @column name: the kernel's name
-- @column launches: how many times it ran
-- @column total_ns: its device time, ns
-- @column mean_ns: its mean duration, ns
-- @column stream: the lowest stream it ran on
WITH o AS (SELECT rank, tid, ts_ns, ts_ns + dur_ns AS end_ns FROM events
           WHERE kind = 'cpu_op' AND name = $name)
SELECT k.name, count(*) AS launches, sum(k.dur_ns) AS total_ns,
       avg(k.dur_ns) AS mean_ns, min(k.stream) AS stream
FROM o JOIN events r ON r.rank = o.rank AND r.tid = o.tid AND r.kind = 'runtime'
     AND r.ts_ns >= o.ts_ns AND r.ts_ns <= o.end_ns
JOIN events k ON k.rank = r.rank AND k.correlation = r.correlation
     AND k.kind IN ('kernel', 'memcpy', 'memset')
GROUP BY k.name ORDER BY total_ns DESC LIMIT $lim
