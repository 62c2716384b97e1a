-- @include run.collectives
-- Communication: what the communication level reads beyond the collectives table.

-- @query bare_instances
-- Of the collective's instances (after their wait for late peers), how many run with
-- (almost) no compute beside them: at least 90% of the instance exposed.
-- Placeholder {hidden}: the instances as rows (rank, s, e) with `hidden`, their part under
-- compute (`metrics.hidden_by_compute`).
-- @column bare: instances with ≥ 90% of their time exposed
-- @column total: all instances
SELECT count(*) FILTER (e > s AND e - s - hidden >= 0.9 * (e - s)) AS bare, count(*) AS total
FROM ({hidden})

-- @query bucket_sizes
-- The median duration and size of collective $name's instances that start in an analysed
-- window. Placeholder {rows}: collective rows that start in an analysed window.
-- @column dur_ns: the median instance's duration, ns
-- @column bytes: the median instance's payload, bytes (null where no size is known)
SELECT median(dur_ns) AS dur_ns, median(bytes) AS bytes FROM ({rows}) WHERE name = $name

-- @query group_sources
-- Where the group sizes of collectives the trace does not name a group for came from
-- (shapes, pg_config, world), per collective and group size.
-- @column name: the collective
-- @column group_size: ranks taking part
-- @column group_source: shapes, pg_config or world
SELECT DISTINCT name, group_size, group_source FROM collectives
WHERE group_source IN ('shapes', 'pg_config', 'world') AND name IS NOT NULL
ORDER BY group_source, name, group_size
