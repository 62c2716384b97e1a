-- @include base.tables
-- The TUI's memory (screen 6): the allocator's totals over the run.

-- @query span
-- The span of the [memory] events.
-- @column t0: the first event
-- @column t1: the last event
-- @column n: events
SELECT min(ts_ns) AS t0, max(ts_ns) AS t1, count(*) AS n FROM memory

-- @query series
-- Peak allocated and reserved per rank in each of $n columns of [$t0, $t1].
-- @column rank: global rank
-- @column col: the column, 0 … $n - 1
-- @column allocated: peak total allocated, bytes
-- @column reserved: peak total reserved, bytes
SELECT rank, ((ts_ns - $t0) * $n // ($t1 - $t0 + 1))::BIGINT AS col,
       max(total_allocated) AS allocated, max(total_reserved) AS reserved
FROM memory GROUP BY ALL ORDER BY rank, col

-- @query profile_memory
-- Whether each rank's trace was recorded with profile_memory=True.
-- @column rank: global rank
-- @column profile_memory: the trace says profile_memory was on
SELECT rank, profile_memory FROM rank_info ORDER BY rank
