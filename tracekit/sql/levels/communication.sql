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
