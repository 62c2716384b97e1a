-- @include base.tables
-- What opening a run checks (tracekit/store/health.py): one run or several, ranks
-- missing, ranks without device events. Counting rank_info's rows stays in Python.

-- @query rank_starts
-- Each rank's stated world size and first event: traces of different runs disagree.
-- @column rank INTEGER: global rank
-- @column world_size BIGINT: the world size its trace states
-- @column trace_start_ns BIGINT: its first event, ns since the epoch
SELECT rank, world_size, trace_start_ns FROM rank_info ORDER BY rank

-- @query world_size
-- The largest world size any trace states.
-- @column world_size BIGINT: max(rank_info.world_size)
SELECT max(world_size) AS world_size FROM rank_info

-- @query ranks
-- The ranks with a trace.
-- @column rank INTEGER: global rank
SELECT DISTINCT rank FROM rank_info

-- @query host_ranks
-- How many ranks hold no kernel, copy or memset.
-- @column ranks BIGINT: ranks without device events
SELECT count(*) AS ranks FROM rank_info WHERE NOT has_device_events
