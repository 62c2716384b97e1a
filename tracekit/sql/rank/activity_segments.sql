-- @include rank.activity_islands
-- @view activity_segments
-- Each rank's busy time cut where what runs changes: between two consecutive island
-- boundaries of activity_islands, one row saying what the device (and, on CPU runs, the
-- host) does there, by the breakdown's rules. Materialized at ingest, so a breakdown
-- over any windows is a clipped sum over these rows instead of a sweep over the
-- islands; idle time has no row.
-- @column rank INTEGER: global rank
-- @column ts_ns BIGINT: segment start, ns since the epoch
-- @column end_ns BIGINT: segment end, ns since the epoch
-- @column compute BOOLEAN: compute runs and no host waits for communication (compute_fraction's rule)
-- @column comm BOOLEAN: communication runs, or a host waits for it (comm_fraction's rule)
-- @column other BOOLEAN: memcpy or memset runs
CREATE OR REPLACE VIEW activity_segments AS
WITH edges AS (
    SELECT rank, t, sum(dc) AS dc, sum(dm) AS dm, sum(do_) AS do_, sum(dw) AS dw
    FROM (
        SELECT rank, ts_ns AS t,
               (category = 'compute')::INT AS dc, (category = 'communication')::INT AS dm,
               (category IN ('memcpy', 'memset'))::INT AS do_,
               (category = 'host_wait')::INT AS dw
        FROM activity_islands WHERE category <> 'computing'
        UNION ALL
        SELECT rank, end_ns,
               -(category = 'compute')::INT, -(category = 'communication')::INT,
               -(category IN ('memcpy', 'memset'))::INT, -(category = 'host_wait')::INT
        FROM activity_islands WHERE category <> 'computing'
    )
    GROUP BY rank, t
),
depth AS (
    SELECT rank, t AS ts_ns, lead(t) OVER (PARTITION BY rank ORDER BY t) AS end_ns,
           sum(dc) OVER run > 0 AS c, sum(dm) OVER run > 0 AS m,
           sum(do_) OVER run > 0 AS o, sum(dw) OVER run > 0 AS w
    FROM edges
    WINDOW run AS (PARTITION BY rank ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT rank, ts_ns, end_ns, c AND NOT w AS compute, m OR w AS comm, o AS other
FROM depth
WHERE end_ns > ts_ns AND (c OR m OR o OR w);
