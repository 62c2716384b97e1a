-- @include run.collectives
-- @query sweep_full
-- `metrics.sweep` over any activity table {activity} (rank, category, ts_ns, end_ns): one
-- sweep over interval boundaries — the running depth of compute (C), communication (M),
-- other device work (O: memcpy, memset), host waits (W) and waits for late peers (P);
-- each segment between two boundaries is classified as `activity_segments` does. Used
-- for HTA's rounded activity (`--window hta`) and by the tests as an oracle.
-- @column rank: global rank
-- @column wid: the window's id
-- @column busy_ns: union of all device activity in the window
-- @column compute_ns: compute, no host wait
-- @column comm_ns: communication, or a host waiting for it
-- @column overlap_ns: compute and communication together
-- @column wait_ns: exposed communication waiting for a late peer
WITH sw AS ({windows}),
src AS (
    SELECT rank, category, ts_ns, end_ns FROM {activity} WHERE category <> 'computing'
    UNION ALL
    SELECT rank, 'peer_wait', ts_ns, ts_ns + least(wait_ns, dur_ns) FROM collectives
    WHERE wait_ns > 0 AND matched
),
act AS (
    SELECT a.rank, sw.wid, a.category,
           greatest(a.ts_ns, sw.start_ns) AS s, least(a.end_ns, sw.end_ns) AS e
    FROM src a JOIN sw ON a.rank = sw.rank
    WHERE a.end_ns > sw.start_ns AND a.ts_ns < sw.end_ns
),
edges AS (
    SELECT rank, wid, t, sum(dc) AS dc, sum(dm) AS dm, sum(do_) AS do_, sum(dw) AS dw,
           sum(dp) AS dp
    FROM (
        SELECT rank, wid, s AS t,
               (category = 'compute')::INT AS dc, (category = 'communication')::INT AS dm,
               (category IN ('memcpy', 'memset'))::INT AS do_,
               (category = 'host_wait')::INT AS dw, (category = 'peer_wait')::INT AS dp
        FROM act
        UNION ALL
        SELECT rank, wid, e,
               -(category = 'compute')::INT, -(category = 'communication')::INT,
               -(category IN ('memcpy', 'memset'))::INT, -(category = 'host_wait')::INT,
               -(category = 'peer_wait')::INT
        FROM act
    )
    GROUP BY rank, wid, t
),
segments AS (
    SELECT rank, wid,
           lead(t) OVER (PARTITION BY rank, wid ORDER BY t) - t AS len,
           sum(dc) OVER run > 0 AS c, sum(dm) OVER run > 0 AS m,
           sum(do_) OVER run > 0 AS o, sum(dw) OVER run > 0 AS wt,
           sum(dp) OVER run > 0 AS pw
    FROM edges
    WINDOW run AS (PARTITION BY rank, wid ORDER BY t ROWS UNBOUNDED PRECEDING)
),
k AS (
    SELECT rank, wid, len, c AND NOT wt AS comp, m OR wt AS comm, o, pw
    FROM segments WHERE len > 0
)
SELECT rank, wid,
       coalesce(sum(len) FILTER (comp OR comm OR o), 0) AS busy_ns,
       coalesce(sum(len) FILTER (comp), 0) AS compute_ns,
       coalesce(sum(len) FILTER (comm), 0) AS comm_ns,
       coalesce(sum(len) FILTER (comp AND comm), 0) AS overlap_ns,
       coalesce(sum(len) FILTER (comm AND NOT comp AND pw), 0) AS wait_ns
FROM k GROUP BY rank, wid
