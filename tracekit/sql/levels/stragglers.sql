-- @include rank.steps
-- @include run.collectives
-- Stragglers: who makes the others wait at matched collectives.

-- @query waits_by_last_rank
-- Each rank's wait at matched collectives (at most the collective's duration), summed per
-- (waiting rank, the instance's last arrival, step). Placeholder {rows}: collective rows
-- that start in an analysed window.
-- @column rank: the waiting rank
-- @column last_rank: the rank that arrived last at those instances
-- @column step: the ProfilerStep the waits start in (−1 outside every step)
-- @column wait_ns: the summed wait, ns
WITH c AS (
    SELECT rank, instance_key, least(wait_ns, dur_ns) AS wait_ns, ts_ns FROM ({rows})
    WHERE instance_key IS NOT NULL AND wait_ns IS NOT NULL AND matched
)
SELECT c.rank, i.last_rank, coalesce(st.step, -1) AS step, sum(c.wait_ns) AS wait_ns
FROM c JOIN collective_instances i USING (instance_key)
LEFT JOIN steps st ON st.rank = c.rank AND c.ts_ns >= st.ts_ns AND c.ts_ns < st.end_ns
WHERE c.rank <> i.last_rank AND c.wait_ns > 0
GROUP BY ALL
ORDER BY ALL  -- the caller sums floats in this order: the same whatever the rows' storage order

-- @query costliest_instance
-- The instance at which rank $rank, arriving last, imposed the most wait.
-- Placeholder {rows}: collective rows that start in an analysed window.
-- @column instance_key: the instance
WITH c AS (
    SELECT * FROM ({rows}) WHERE instance_key IS NOT NULL AND wait_ns IS NOT NULL
)
SELECT instance_key FROM c JOIN collective_instances i USING (instance_key)
WHERE i.last_rank = $rank GROUP BY instance_key
ORDER BY sum(least(c.wait_ns, c.dur_ns)) DESC, instance_key LIMIT 1

-- @query instance_issue_times
-- When each rank issued instance $key and when its device started it.
-- @column rank: global rank
-- @column issue_ts_ns: the issuing call's start, ns since the epoch
-- @column ts_ns: the collective's start on the device, ns since the epoch
SELECT rank, issue_ts_ns, ts_ns FROM collectives WHERE instance_key = $key

-- @query first_step_start
-- Each rank's first ProfilerStep start.
-- @column rank: global rank
-- @column ts_ns: the start, ns since the epoch
SELECT rank, min(ts_ns) AS ts_ns FROM steps GROUP BY rank

-- @query last_arrivals
-- Per rank, how often it arrived last at a matched instance and the skew it caused.
-- @column rank: the last arrival
-- @column instances: instances it arrived last at
-- @column skew_ns: their summed skew (last start − first start), ns
SELECT last_rank AS rank, count(*) AS instances, sum(skew_ns) AS skew_ns
FROM collective_instances WHERE ranks_matched >= 2 GROUP BY last_rank ORDER BY last_rank

-- @query issue_lateness
-- Rank $rank's issue lateness at each matched instance: its issuing call's start minus the
-- median other rank's. Placeholder {rows}: collective rows that start in an analysed window.
-- @column late_ns: its issue time − the median other rank's, ns
-- @column is_last: whether it arrived last at the instance
WITH c AS (
    SELECT rank, instance_key, issue_ts_ns FROM ({rows})
    WHERE instance_key IS NOT NULL AND issue_ts_ns IS NOT NULL AND matched
),
me AS (SELECT instance_key, issue_ts_ns FROM c WHERE rank = $rank),
peers AS (
    SELECT instance_key, median(issue_ts_ns) AS peer_ns FROM c WHERE rank <> $rank
    GROUP BY instance_key
)
SELECT me.issue_ts_ns - peers.peer_ns AS late_ns, i.last_rank = $rank AS is_last
FROM me JOIN peers USING (instance_key) JOIN collective_instances i USING (instance_key)
ORDER BY ALL
