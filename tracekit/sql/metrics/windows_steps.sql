-- @include rank.activity_islands
-- @include rank.device_steps
-- @include rank.steps
-- @query windows_steps
-- The analysed window of each rank with ProfilerSteps: the first selected step's start to
-- the last one's end, each step's window on the device (`device_steps`: to the end of the
-- work it launched; a step that launched nothing on a GPU rank left out); ranks without
-- steps fall back to their device activity (`trace`).
-- Placeholder {selection}: a predicate on `steps.step` (TRUE for all).
-- @column rank INTEGER: global rank
-- @column start_ns BIGINT: window start, ns since the epoch
-- @column end_ns BIGINT: window end, ns since the epoch
-- @column n_steps BIGINT: ProfilerSteps in the window (0 for a rank without steps)
-- @column step_ns DOUBLE: mean step duration on the device (its window), ns (null without steps)
WITH s AS (SELECT * FROM device_steps WHERE analysed AND {selection}),
sw AS (SELECT rank, min(ts_ns) AS start_ns, max(end_ns) AS end_ns,
              count(*) AS n_steps, avg(dur_ns) AS step_ns
       FROM s GROUP BY rank)
SELECT * FROM sw
UNION ALL
SELECT rank, min(ts_ns), max(end_ns), 0, NULL::DOUBLE FROM activity_islands
WHERE rank NOT IN (SELECT rank FROM steps)
GROUP BY rank
