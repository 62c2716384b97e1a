-- @include base.tables
-- @view steps
-- One row per ProfilerStep#N per rank (the CPU-side annotation that prof.step() emits).
-- @column rank INTEGER: global rank
-- @column step BIGINT: N of ProfilerStep#N
-- @column ts_ns BIGINT: step start, ns since the epoch
-- @column dur_ns BIGINT: step duration, ns
-- @column end_ns BIGINT: step end, ns since the epoch
CREATE OR REPLACE VIEW steps AS
SELECT rank,
       TRY_CAST(split_part(name::VARCHAR, '#', 2) AS BIGINT) AS step,
       ts_ns,
       dur_ns,
       ts_ns + dur_ns AS end_ns
FROM events
WHERE kind IN ('user_annotation', 'cpu_op')
  AND prefix(name::VARCHAR, 'ProfilerStep#');
