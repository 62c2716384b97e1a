-- @include rank.steps
-- @include rank.device_activity
-- @view device_steps
-- One row per ProfilerStep per rank with the device work it launched and its window on
-- the device. A device event (kernel, memcpy, memset) belongs to the step whose CPU span
-- holds the runtime call with its correlation (cudaLaunchKernel, cudaMemcpyAsync …; a
-- graph's kernels carry their cudaGraphLaunch's). The device runs behind the CPU in a
-- saturated job, so a step's device work can end after its CPU span, and work launched
-- before the step can still run after its CPU start. A step's window runs from its CPU
-- start, or the end of the device work before it when that is later — work launched
-- before its CPU start, and work that started before the first work it launched (its
-- launch may precede the trace) — (the device still runs earlier steps' work: not this
-- step's), to the end of the last work it
-- launched, or its CPU end when that is later (the device's idle tail while the host
-- still runs the step is the step's own). From the CPU start, not the first work
-- launched: the wait for the first launch is the step's too, and a step without lag keeps
-- its CPU span. Windows do not overlap: a step's starts no earlier than the previous
-- analysed step's ends. Under a steady lag L the windows are the CPU spans moved by L; on
-- several streams that lag differently, work a step launched on a stream running ahead
-- of the others falls in the window before (a time window cannot split one instant).
-- A step that launched no device work on a rank whose other
-- steps did (the stub the profiler records when it stops) is not analysed; on a rank
-- where no step launched any (CPU and gloo runs, traces without correlations) every step
-- is.
-- @column rank INTEGER: global rank
-- @column step BIGINT: N of ProfilerStep#N
-- @column cpu_ts_ns BIGINT: the step's CPU span start, ns since the epoch
-- @column cpu_end_ns BIGINT: the step's CPU span end, ns since the epoch
-- @column launched BIGINT: device events launched inside the CPU span
-- @column device_first_ns BIGINT: start of the first device work it launched (null: none)
-- @column device_end_ns BIGINT: end of the last device work it launched (null: none)
-- @column prior_end_ns BIGINT: end of the device work before it: launched before its CPU start, or started before the first work it launched (null: none)
-- @column analysed BOOLEAN: the step is analysed (false: a step without device work on a GPU rank)
-- @column ts_ns BIGINT: the step's window start on the device, ns since the epoch (null when not analysed)
-- @column end_ns BIGINT: the step's window end on the device, ns since the epoch (null when not analysed)
-- @column dur_ns BIGINT: the window's length, ns (null when not analysed)
CREATE OR REPLACE VIEW device_steps AS
WITH s AS (
    SELECT rank, step, ts_ns, end_ns FROM steps
),
-- device work with the start of the runtime call that launched it: device_activity has
-- both (its own lookup of every launch, not a second one here)
k AS (
    SELECT rank, launch_ns, ts_ns, end_ns FROM device_activity
    WHERE kind IN ('kernel', 'memcpy', 'memset') AND launch_ns IS NOT NULL
),
d AS (  -- to the step whose CPU span holds its launch (steps do not nest)
    SELECT k.rank, s.ts_ns AS step_ts, count(*) AS launched, min(k.ts_ns) AS first_ns,
           max(k.end_ns) AS last_ns
    FROM k ASOF JOIN s ON s.rank = k.rank AND k.launch_ns >= s.ts_ns
    WHERE k.launch_ns < s.end_ns
    GROUP BY k.rank, s.ts_ns
),
c AS (  -- the latest end of the work launched up to each launch
    SELECT rank, launch_ns,
           max(end_ns) OVER (PARTITION BY rank ORDER BY launch_ns ROWS UNBOUNDED PRECEDING)
               AS run_end
    FROM (SELECT rank, launch_ns, max(end_ns) AS end_ns FROM k GROUP BY rank, launch_ns)
),
a AS (  -- the latest end of the work started up to each start, launched or not
    SELECT rank, ts_ns,
           max(end_ns) OVER (PARTITION BY rank ORDER BY ts_ns ROWS UNBOUNDED PRECEDING)
               AS run_end
    FROM (SELECT rank, ts_ns, max(end_ns) AS end_ns FROM device_activity
          WHERE kind IN ('kernel', 'memcpy', 'memset') GROUP BY rank, ts_ns)
),
b0 AS (
    SELECT s.rank, s.step, s.ts_ns AS cpu_ts_ns, s.end_ns AS cpu_end_ns,
           coalesce(d.launched, 0) AS launched, d.first_ns AS device_first_ns,
           d.last_ns AS device_end_ns, c.run_end AS launched_before_end,
           coalesce(d.launched, 0) > 0
               OR NOT coalesce(bool_or(d.launched > 0) OVER (PARTITION BY s.rank), false)
               AS analysed
    FROM s LEFT JOIN d ON d.rank = s.rank AND d.step_ts = s.ts_ns
    ASOF LEFT JOIN c ON c.rank = s.rank AND s.ts_ns > c.launch_ns
),
b AS (
    SELECT b0.* EXCLUDE (launched_before_end),
           CASE WHEN a.run_end IS NULL THEN launched_before_end
                ELSE greatest(a.run_end, coalesce(launched_before_end, a.run_end))
           END AS prior_end_ns
    FROM b0 ASOF LEFT JOIN a ON a.rank = b0.rank AND b0.device_first_ns > a.ts_ns
),
e AS (
    SELECT *, greatest(cpu_end_ns, coalesce(device_end_ns, cpu_end_ns)) AS _end
    FROM b WHERE analysed
),
w AS (
    SELECT *, greatest(cpu_ts_ns, coalesce(prior_end_ns, cpu_ts_ns),
                       coalesce(max(_end) OVER (PARTITION BY rank ORDER BY cpu_ts_ns, step
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), cpu_ts_ns))
               AS _start
    FROM e
)
SELECT rank, step, cpu_ts_ns, cpu_end_ns, launched, device_first_ns, device_end_ns,
       prior_end_ns, true AS analysed, _start AS ts_ns, greatest(_end, _start) AS end_ns,
       greatest(_end, _start) - _start AS dur_ns
FROM w
UNION ALL
SELECT rank, step, cpu_ts_ns, cpu_end_ns, launched, device_first_ns, device_end_ns,
       prior_end_ns, false, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT
FROM b WHERE NOT analysed;
