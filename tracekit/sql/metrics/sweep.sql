-- @include rank.activity_segments
-- @include run.collectives
-- @query sweep
-- Per window of {windows} (columns rank, wid, start_ns, end_ns; one window per rank for the
-- report, one per step for the samples) the breakdown's figures, from the segments
-- materialized at ingest (`activity_segments`, the report's classification: compute is
-- compute running and no host wait; communication is communication running or a host
-- waiting for it) clipped to the windows and summed. Peer wait: exposed communication
-- inside a matched collective before its last peer arrived (`collectives.wait_ns`).
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column busy_ns HUGEINT: union of all device activity in the window
-- @column compute_ns HUGEINT: compute, no host wait
-- @column comm_ns HUGEINT: communication, or a host waiting for it
-- @column overlap_ns HUGEINT: compute and communication together
-- @column wait_ns HUGEINT: exposed communication waiting for a late peer
WITH sw AS ({windows}),
seg AS (
    SELECT a.rank, sw.wid, a.compute, a.comm, a.other,
           greatest(a.ts_ns, sw.start_ns) AS s, least(a.end_ns, sw.end_ns) AS e
    FROM activity_segments a JOIN sw ON a.rank = sw.rank
    WHERE a.end_ns > sw.start_ns AND a.ts_ns < sw.end_ns
),
sums AS (
    SELECT rank, wid, sum(e - s) AS busy_ns,
           coalesce(sum(e - s) FILTER (compute), 0) AS compute_ns,
           coalesce(sum(e - s) FILTER (comm), 0) AS comm_ns,
           coalesce(sum(e - s) FILTER (compute AND comm), 0) AS overlap_ns
    FROM seg GROUP BY rank, wid
),
pw AS (
    SELECT c.rank, sw.wid, greatest(c.ts_ns, sw.start_ns) AS s,
           least(c.ts_ns + least(c.wait_ns, c.dur_ns), sw.end_ns) AS e
    FROM collectives c JOIN sw ON c.rank = sw.rank
    WHERE c.wait_ns > 0 AND c.matched
      AND c.ts_ns + least(c.wait_ns, c.dur_ns) > sw.start_ns AND c.ts_ns < sw.end_ns
),
edges AS (
    SELECT rank, wid, t, sum(dx) AS dx, sum(dp) AS dp FROM (
        SELECT rank, wid, s AS t, 1 AS dx, 0 AS dp FROM seg WHERE comm AND NOT compute
        UNION ALL SELECT rank, wid, e, -1, 0 FROM seg WHERE comm AND NOT compute
        UNION ALL SELECT rank, wid, s, 0, 1 FROM pw
        UNION ALL SELECT rank, wid, e, 0, -1 FROM pw)
    GROUP BY rank, wid, t
),
waits AS (
    SELECT rank, wid, sum(len) AS wait_ns FROM (
        SELECT rank, wid, lead(t) OVER run - t AS len,
               sum(dx) OVER cum > 0 AND sum(dp) OVER cum > 0 AS waiting
        FROM edges
        WINDOW run AS (PARTITION BY rank, wid ORDER BY t),
               cum AS (PARTITION BY rank, wid ORDER BY t ROWS UNBOUNDED PRECEDING))
    WHERE waiting AND len > 0 GROUP BY rank, wid
)
SELECT s.rank, s.wid, s.busy_ns, s.compute_ns, s.comm_ns, s.overlap_ns,
       coalesce(w.wait_ns, 0) AS wait_ns
FROM sums s LEFT JOIN waits w USING (rank, wid)
