-- The report's `run` block and what `tracekit ingest` prints.

-- @query ranks
-- Each rank's world size, backend and device.
-- @column rank: global rank
-- @column world_size: the world size its trace states
-- @column backend: gloo, nccl … (null when the trace does not say)
-- @column device_name: the device's name (null on CPU)
-- @column has_device_events: it has kernels, memcpys or memsets
SELECT rank, world_size, backend, device_name, has_device_events FROM rank_info ORDER BY rank

-- @query steps
-- The ProfilerStep numbers present on any rank.
-- @column step: the step number
SELECT DISTINCT step FROM steps ORDER BY step

-- @query ingest_listing
-- Per rank what `tracekit ingest` lists: where it came from, its events, steps and
-- collectives, backend and device.
-- @column rank: global rank
-- @column rank_source: where the rank came from (header, file name …)
-- @column event_count: events ingested
-- @column backend: gloo, nccl …
-- @column device: the device's name, "unknown device", or "cpu"
-- @column steps: ProfilerSteps
-- @column collectives: collective instances
-- @column source: the trace file
SELECT rank, rank_source, event_count, backend,
       coalesce(device_name, CASE WHEN has_device_events THEN 'unknown device' ELSE 'cpu' END)
           AS device,
       (SELECT count(*) FROM steps s WHERE s.rank = i.rank) AS steps,
       (SELECT count(*) FROM collectives c WHERE c.rank = i.rank) AS collectives, source
FROM rank_info i ORDER BY rank
