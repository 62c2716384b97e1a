-- @include run.collectives
-- @query collective_instances_in_windows
-- Per window id of {rows} (collective rows that start in a window, with its `wid` and
-- `n`, its steps) and collective key: one row per instance — matched across ranks, or a
-- rank's own row when unmatched (point-to-point, a partial run) — summarised.
-- @column wid INTEGER: the window's id
-- @column name VARCHAR: collective name
-- @column group_size BIGINT: ranks in its group
-- @column bytes BIGINT: nccl-tests' S
-- @column dtypes VARCHAR: element types seen, comma-separated in order
-- @column pg_ranks VARCHAR: the group's ranks as the trace writes them (the least, deterministic)
-- @column instances BIGINT: instances (rank rows when unmatched)
-- @column transfer_ns DOUBLE: median over instances of the shortest duration across matched ranks (unmatched: the row's own duration, waiting included)
-- @column matched BOOLEAN: every instance matched across its whole group
-- @column n INTEGER: steps in the window (most over its ranks)
WITH c AS (
    SELECT c.*, i.transfer_ns FROM ({rows}) c
    LEFT JOIN collective_instances i USING (instance_key)
),
inst AS (
    SELECT wid, name, group_size, bytes, min(dtype) AS dtype, min(pg_ranks) AS pg_ranks,
           coalesce(any_value(transfer_ns), min(dur_ns)) AS transfer_ns,
           bool_and(transfer_ns IS NOT NULL AND matched) AS matched, max(n) AS n
    FROM c
    GROUP BY wid, name, group_size, bytes, coalesce(instance_key, rank || '/' || ts_ns)
)
-- every value deterministic: the same trace gives the same report, byte for byte
-- (one size of two dtypes, int indices and float embeddings, lists both)
SELECT wid, name, group_size, bytes, string_agg(DISTINCT dtype, ',' ORDER BY dtype) AS dtypes,
       min(pg_ranks) AS pg_ranks, count(*) AS instances, median(transfer_ns) AS transfer_ns,
       bool_and(matched) AS matched, max(n) AS n
FROM inst GROUP BY wid, name, group_size, bytes
