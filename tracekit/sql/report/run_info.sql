-- @include base.tables
-- @include rank.device_steps
-- @include rank.steps
-- @include run.collectives
-- The report's `run` block and what `tracekit ingest` prints.

-- @query ranks
-- Each rank's world size, backend and device.
-- @column rank INTEGER: global rank
-- @column world_size BIGINT: the world size its trace states
-- @column backend VARCHAR: gloo, nccl … (null when the trace does not say)
-- @column device_name VARCHAR: the device's name (null on CPU)
-- @column has_device_events BOOLEAN: it has kernels, memcpys or memsets
SELECT rank, world_size, backend, device_name, has_device_events FROM rank_info ORDER BY rank

-- @query steps
-- The ProfilerStep numbers present on any rank.
-- @column step BIGINT: the step number
SELECT DISTINCT step FROM steps ORDER BY step

-- @query ingest_listing
-- Per rank what `tracekit ingest` lists: where it came from, its events, steps and
-- collectives, backend and device.
-- @column rank INTEGER: global rank
-- @column rank_source VARCHAR: where the rank came from (header, file name …)
-- @column event_count BIGINT: events ingested
-- @column backend VARCHAR: gloo, nccl …
-- @column device VARCHAR: the device's name, "unknown device", or "cpu"
-- @column steps BIGINT: ProfilerSteps
-- @column collectives BIGINT: collective instances
-- @column source VARCHAR: the trace file
SELECT rank, rank_source, event_count, backend,
       coalesce(device_name, CASE WHEN has_device_events THEN 'unknown device' ELSE 'cpu' END)
           AS device,
       (SELECT count(*) FROM steps s WHERE s.rank = i.rank) AS steps,
       (SELECT count(*) FROM collectives c WHERE c.rank = i.rank) AS collectives, source
FROM rank_info i ORDER BY rank

-- @query device_lag
-- Per rank, how far its device runs behind its CPU: over its analysed steps that launched
-- device work, the mean and the largest time the last work a step launched ends after the
-- step's CPU span (0 where it ends inside it), and the mean step to that end.
-- @column rank INTEGER: global rank
-- @column steps BIGINT: analysed steps that launched device work
-- @column lag_ns DOUBLE: mean of max(device end − CPU end, 0) over those steps, ns
-- @column max_lag_ns BIGINT: the largest of them, ns
-- @column step_ns DOUBLE: mean of those steps from their CPU start to the later of their CPU end and their device end, ns
SELECT rank, count(*) AS steps,
       avg(greatest(device_end_ns - cpu_end_ns, 0)) AS lag_ns,
       max(greatest(device_end_ns - cpu_end_ns, 0)) AS max_lag_ns,
       avg(greatest(device_end_ns, cpu_end_ns) - cpu_ts_ns) AS step_ns
FROM device_steps WHERE analysed AND launched > 0
GROUP BY rank ORDER BY rank

-- @query unanalysed_steps
-- The ProfilerSteps left out of the analysis: a step that launched no device work on a
-- rank whose other steps did (the stub the profiler records when it stops).
-- @column rank INTEGER: global rank
-- @column step BIGINT: N of ProfilerStep#N
-- @column cpu_ns BIGINT: its CPU span, ns
SELECT rank, step, cpu_end_ns - cpu_ts_ns AS cpu_ns FROM device_steps
WHERE NOT analysed ORDER BY rank, step

-- @query launches_without_device
-- Ranks whose trace launched device work (kernel and graph launch calls) but holds no
-- kernel, copy or memset (`tracekit.store.health`): the profiler ran without its device
-- activity, or the trace holds only graph captures.
-- @column rank INTEGER: global rank
-- @column launches BIGINT: kernel and graph launch calls
-- @column captured BIGINT: of them, those at or after the rank's first stream capture
WITH cap AS (
    SELECT rank, min(ts_ns) AS first FROM events
    WHERE kind = 'runtime' AND contains(name, 'StreamBeginCapture')
    GROUP BY rank
)
SELECT e.rank, count(*) AS launches,
       count(*) FILTER (cap.first IS NOT NULL AND e.ts_ns >= cap.first) AS captured
FROM events e
JOIN rank_info r ON r.rank = e.rank AND NOT r.has_device_events
LEFT JOIN cap ON cap.rank = e.rank
WHERE e.kind = 'runtime'
  AND regexp_matches(e.name::VARCHAR, 'LaunchKernel|GraphLaunch|LaunchCooperative')
GROUP BY e.rank ORDER BY e.rank
