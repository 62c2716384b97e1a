-- @include run.collectives
-- The TUI's collectives (screen 4): the skew of matched instances, one collective's
-- instances across ranks, the instance a finding's jump lands on.

-- @query skew
-- Per collective and size, the skew of its instances matched across ranks.
-- @column name: the collective (all_reduce …)
-- @column bytes: its size
-- @column mean_skew_ns: mean spread of the ranks' arrivals, ns
-- @column max_skew_ns: largest spread of the ranks' arrivals, ns
-- @column n: matched instances
SELECT name, bytes, avg(skew_ns) AS mean_skew_ns, max(skew_ns) AS max_skew_ns,
       count(*) AS n
FROM collective_instances GROUP BY ALL

-- @query instances
-- Each rank's part in the instances of collective $name of size $bytes (null: no size),
-- the first $lim rows by occurrence and rank.
-- @column instance_key: the instance matched across ranks
-- @column occurrence: its position among the collective's instances
-- @column rank: global rank
-- @column ts_ns: the rank's start
-- @column dur_ns: the rank's duration, ns
-- @column arrival_ns: the rank's start after the first rank's, ns
-- @column wait_ns: time the rank waited for the last, ns
-- @column last: the rank arrived last (and others were matched)
-- @column skew_ns: the instance's spread of arrivals, ns
-- @column transfer_ns: the instance's transfer time, ns
SELECT c.instance_key, c.occurrence, c.rank, c.ts_ns, c.dur_ns,
       c.ts_ns - i.first_start_ns AS arrival_ns, c.wait_ns,
       i.last_rank = c.rank AND c.ranks_matched > 1 AS last, i.skew_ns,
       i.transfer_ns
FROM collectives c JOIN collective_instances i USING (instance_key)
WHERE c.name = $name AND c.bytes IS NOT DISTINCT FROM $bytes
ORDER BY c.occurrence, c.rank LIMIT $lim

-- @query longest
-- The instance of collective $name on rank $rank that kept it longest past its wait,
-- starting in [$lo, $hi) when they are given.
-- @column ts_ns: its start
-- @column raw_name: the name the trace gives it (the timeline highlights it)
-- @column lane: its stream / thread
SELECT ts_ns, raw_name, lane FROM collectives WHERE rank = $rank AND name = $name
  AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns < $hi)
ORDER BY dur_ns - coalesce(wait_ns, 0) DESC LIMIT 1
