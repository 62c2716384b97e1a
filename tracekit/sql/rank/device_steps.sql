-- @view device_steps
-- One row per ProfilerStep per rank with the device work it launched and its window on
-- the device. A device event (kernel, memcpy, memset) belongs to the step whose CPU span
-- holds the runtime call with its correlation (cudaLaunchKernel, cudaMemcpyAsync …; a
-- graph's kernels carry their cudaGraphLaunch's). The device runs behind the CPU in a
-- saturated job, so a step's device work can end after its CPU span: the step's window
-- runs from its CPU start to the end of the last work it launched, or to its CPU end when
-- that is later (the device's idle tail while the host still runs the step is the step's
-- own). From the CPU start, not the first work launched: the wait for the first launch is
-- the step's too, and a step without lag keeps its CPU span. Windows do not overlap: a
-- step's window starts no earlier than the previous analysed step's ends (the device
-- still runs that step's work). A step that launched no device work on a rank whose other
-- steps did (the stub the profiler records when it stops) is not analysed; on a rank
-- where no step launched any (CPU and gloo runs, traces without correlations) every step
-- is.
-- @column rank: global rank
-- @column step: N of ProfilerStep#N
-- @column cpu_ts_ns: the step's CPU span start, ns since the epoch
-- @column cpu_end_ns: the step's CPU span end, ns since the epoch
-- @column launched: device events launched inside the CPU span
-- @column device_first_ns: start of the first device work it launched (null: none)
-- @column device_end_ns: end of the last device work it launched (null: none)
-- @column analysed: the step is analysed (false: a step without device work on a GPU rank)
-- @column ts_ns: the step's window start on the device, ns since the epoch (null when not analysed)
-- @column end_ns: the step's window end on the device, ns since the epoch (null when not analysed)
-- @column dur_ns: the window's length, ns (null when not analysed)
CREATE OR REPLACE VIEW device_steps AS
WITH s AS (
    SELECT rank, step, ts_ns, end_ns FROM steps
),
r AS (  -- each runtime call to the step whose CPU span holds it (steps do not nest)
    SELECT e.rank, e.correlation, s.ts_ns AS step_ts
    FROM (SELECT rank, ts_ns, correlation FROM events
          WHERE kind = 'runtime' AND correlation IS NOT NULL) e
    ASOF JOIN s ON s.rank = e.rank AND e.ts_ns >= s.ts_ns
    WHERE e.ts_ns < s.end_ns
),
d AS (
    SELECT r.rank, r.step_ts, count(*) AS launched, min(k.ts_ns) AS first_ns,
           max(k.ts_ns + k.dur_ns) AS last_ns
    FROM events k JOIN r ON r.rank = k.rank AND r.correlation = k.correlation
    WHERE k.kind IN ('kernel', 'memcpy', 'memset')
    GROUP BY r.rank, r.step_ts
),
b AS (
    SELECT s.rank, s.step, s.ts_ns AS cpu_ts_ns, s.end_ns AS cpu_end_ns,
           coalesce(d.launched, 0) AS launched, d.first_ns AS device_first_ns,
           d.last_ns AS device_end_ns,
           coalesce(d.launched, 0) > 0
               OR NOT coalesce(bool_or(d.launched > 0) OVER (PARTITION BY s.rank), false)
               AS analysed
    FROM s LEFT JOIN d ON d.rank = s.rank AND d.step_ts = s.ts_ns
),
w AS (
    SELECT *, greatest(cpu_end_ns, coalesce(device_end_ns, cpu_end_ns)) AS _end,
           greatest(cpu_ts_ns, coalesce(max(greatest(cpu_end_ns, coalesce(device_end_ns,
               cpu_end_ns))) OVER (PARTITION BY rank ORDER BY cpu_ts_ns, step
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), cpu_ts_ns)) AS _start
    FROM b WHERE analysed
)
SELECT rank, step, cpu_ts_ns, cpu_end_ns, launched, device_first_ns, device_end_ns,
       true AS analysed, _start AS ts_ns, greatest(_end, _start) AS end_ns,
       greatest(_end, _start) - _start AS dur_ns
FROM w
UNION ALL
SELECT rank, step, cpu_ts_ns, cpu_end_ns, launched, device_first_ns, device_end_ns,
       false, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT
FROM b WHERE NOT analysed;
