-- @include base.tables
-- @include rank.device_activity
-- @include rank.steps
-- Holistic Trace Analysis's device activity (`--window hta`): device work whose launch
-- (runtime correlation) began before the last ProfilerStep started; ranks with fewer
-- than two steps keep everything. Like HTA (trace_parser.py), each interval is rounded
-- inward to whole microseconds. Internal (a `_` view): no column docs.
CREATE OR REPLACE TEMP VIEW _hta_activity AS
WITH last AS (SELECT rank, max(ts_ns) AS last_start, count(*) AS n FROM steps GROUP BY rank),
launched AS (
    SELECT e.rank, e.correlation FROM events e JOIN last l USING (rank)
    WHERE e.kind = 'runtime' AND e.correlation IS NOT NULL AND e.ts_ns < l.last_start
)
SELECT a.* REPLACE (
           (a.ts_ns + 999) // 1000 * 1000 AS ts_ns,
           a.end_ns // 1000 * 1000 AS end_ns)
FROM device_activity a
LEFT JOIN last l USING (rank)
WHERE l.n IS NULL OR l.n < 2
   OR (a.rank, a.correlation) IN (SELECT (rank, correlation) FROM launched)
