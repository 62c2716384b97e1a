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
-- the four running counts as one running sum, each count a base-1024 digit of it: one
-- window aggregate instead of four (0.081 → 0.052 s per 128 small ranks). A digit is
-- exact: a category's islands are disjoint, so its count is 0 or 1 (other: 0 to 2)
depth AS (
    SELECT rank, t AS ts_ns, lead(t) OVER run AS end_ns,
           sum(dc + 1024 * dm + 1048576 * do_ + 1073741824 * dw) OVER run AS n
    FROM edges
    WINDOW run AS (PARTITION BY rank ORDER BY t ROWS UNBOUNDED PRECEDING)
),
flags AS (
    SELECT rank, ts_ns, end_ns, n % 1024 > 0 AS c, n // 1024 % 1024 > 0 AS m,
           n // 1048576 % 1024 > 0 AS o, n // 1073741824 > 0 AS w
    FROM depth
)
SELECT rank, ts_ns, end_ns, c AND NOT w AS compute, m OR w AS comm, o AS other
FROM flags
WHERE end_ns > ts_ns AND (c OR m OR o OR w);
