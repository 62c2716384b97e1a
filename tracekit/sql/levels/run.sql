-- @include base.tables
-- @include run.collectives
-- The run's givens the levels read: its device and where its ranks sit.

-- @query device
-- The device most ranks ran on (ties: the first name), its largest memory, and whether
-- any rank has device events (false: a CPU run).
-- @column device_name: the device's name from the trace header
-- @column device_memory_bytes: its memory, bytes
-- @column has_device_events: some rank has kernels, memcpys or memsets
-- @column device_compute_capability: its compute capability (computeMajor.computeMinor)
-- @column device_sms: its SM (CU) count, numSms
SELECT device_name, max(device_memory_bytes) AS device_memory_bytes,
       bool_or(has_device_events) AS has_device_events,
       min(device_compute_capability) AS device_compute_capability,
       max(device_sms) AS device_sms
FROM rank_info GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1

-- @query hosts
-- Each traced rank's host and the world size its trace states.
-- @column rank: global rank
-- @column host_name: the host it ran on (null when the trace does not say)
-- @column world_size: the world size in its header
SELECT rank, host_name, world_size FROM rank_info

-- @query gloo_collectives
-- How many collective spans ran on gloo (its worker threads), over the run: on a GPU
-- run, collectives of a gloo process group (CUDA tensors go through host memory).
-- @column n: gloo collective spans
SELECT count(*) AS n FROM collectives WHERE backend = 'gloo'
