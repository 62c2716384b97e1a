-- @query windows_trace
-- The analysed window of each rank for `--window trace`: its first to last device activity.
-- Placeholder {activity}: the activity table (`activity_islands`, or HTA's `_hta_activity`).
-- @column rank INTEGER: global rank
-- @column start_ns BIGINT: window start, ns since the epoch
-- @column end_ns BIGINT: window end, ns since the epoch
-- @column n_steps INTEGER: 0 (a trace window counts no steps)
-- @column step_ns DOUBLE: null
SELECT rank, min(ts_ns) AS start_ns, max(end_ns) AS end_ns, 0 AS n_steps, NULL::DOUBLE AS step_ns
FROM {activity} GROUP BY rank
