-- @include rank.device_activity
-- @view activity_islands
-- Each rank's device activity merged into islands: per category, the maximal intervals
-- where at least one event of that category runs (the union the breakdown measures).
-- Materialized at ingest, so every analysis sweeps islands instead of raw events; a
-- union clipped to a window is the islands clipped to it. Category `computing` is the
-- compute_fraction rule: compute running and no host wait (CPU runs).
-- @column rank INTEGER: global rank
-- @column category VARCHAR: compute, communication, memcpy, memset, host_wait (device_activity's), or computing
-- @column ts_ns BIGINT: island start, ns since the epoch
-- @column end_ns BIGINT: island end, ns since the epoch
-- @column before_ns BIGINT: time of the rank's earlier islands of this category, ns (a running sum: the category's time before t is before_ns + min(t, end_ns) − ts_ns for the last island starting at or before t)
CREATE OR REPLACE VIEW activity_islands AS
WITH o AS (
    SELECT rank, category, ts_ns, end_ns,
           max(end_ns) OVER (PARTITION BY rank, category ORDER BY ts_ns, end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM device_activity
),
g AS (
    SELECT *, sum((prev_end IS NULL OR ts_ns > prev_end)::INT)
                  OVER (PARTITION BY rank, category ORDER BY ts_ns, end_ns
                        ROWS UNBOUNDED PRECEDING) AS island
    FROM o
),
by_category AS (
    SELECT rank, category, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns
    FROM g GROUP BY rank, category, island
),
-- computing: compute islands less host waits (one sweep over both, on the ranks that have
-- host waits: CPU runs); elsewhere the compute islands of non-zero length themselves, which
-- the sweep returns for islands apart from each other (a GPU run's: 0.01 s a big rank)
waits AS (SELECT DISTINCT rank FROM by_category WHERE category = 'host_wait'),
edges AS (
    SELECT rank, t, sum(dc) AS dc, sum(dw) AS dw FROM (
        SELECT rank, ts_ns AS t, (category = 'compute')::INT AS dc,
               (category = 'host_wait')::INT AS dw
        FROM by_category WHERE category IN ('compute', 'host_wait')
        UNION ALL
        SELECT rank, end_ns, -(category = 'compute')::INT, -(category = 'host_wait')::INT
        FROM by_category WHERE category IN ('compute', 'host_wait'))
    WHERE rank IN (SELECT rank FROM waits)
    GROUP BY rank, t
),
seg AS (
    SELECT rank, t, lead(t) OVER (PARTITION BY rank ORDER BY t) AS t2,
           sum(dc) OVER run > 0 AND sum(dw) OVER run = 0 AS comp
    FROM edges
    WINDOW run AS (PARTITION BY rank ORDER BY t ROWS UNBOUNDED PRECEDING)
),
flagged AS (
    SELECT rank, t, t2, comp,
           comp AND NOT coalesce(lag(comp) OVER (PARTITION BY rank ORDER BY t), FALSE) AS starts
    FROM seg WHERE t2 IS NOT NULL
),
computing AS (
    SELECT rank, t, t2, comp,
           sum(starts::INT) OVER (PARTITION BY rank ORDER BY t ROWS UNBOUNDED PRECEDING) AS island
    FROM flagged
),
islands AS (
    SELECT rank, category, ts_ns, end_ns FROM by_category
    UNION ALL
    SELECT rank, 'computing', min(t), max(t2) FROM computing WHERE comp GROUP BY rank, island
    UNION ALL
    SELECT rank, 'computing', ts_ns, end_ns FROM by_category
    WHERE category = 'compute' AND end_ns > ts_ns AND rank NOT IN (SELECT rank FROM waits)
)
SELECT *, coalesce(sum(end_ns - ts_ns) OVER (PARTITION BY rank, category ORDER BY ts_ns
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::BIGINT AS before_ns
FROM islands;
