-- @query step_windows
-- Each selected ProfilerStep as its own window: the per-step samples' windows.
-- Placeholder {selection}: a predicate on `steps.step` (TRUE for all).
-- @column rank: global rank
-- @column wid: the step number (the window's id)
-- @column start_ns: step start, ns since the epoch
-- @column end_ns: step end, ns since the epoch
-- @column n: 1 (one step)
SELECT rank, step AS wid, ts_ns AS start_ns, end_ns, 1 AS n FROM steps WHERE {selection}
