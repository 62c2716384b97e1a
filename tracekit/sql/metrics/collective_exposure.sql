-- @include run.collectives
-- @query collective_exposure
-- Per rank, window of {windows} (rank, wid, start_ns, end_ns) and collective key (name,
-- group size, bytes): the union of the collective's intervals, the union of its waits for
-- late peers (matched instances only), and the part of each no compute hides — all
-- clipped to the window, so no figure exceeds it (concurrent sends count once).
-- @column rank: global rank
-- @column wid: the window's id
-- @column name: collective name
-- @column group_size: ranks in its group
-- @column bytes: nccl-tests' S
-- @column union_ns: union of the key's intervals in the window
-- @column exposed_ns: the part of union_ns no compute hides
-- @column wait_exposed_ns: exposed waiting for a late peer
WITH w AS ({windows}),
iv AS (
    SELECT rank, wid, name, group_size, bytes, 'all' AS part, s, e
    FROM ({all_rows})
    UNION ALL
    SELECT rank, wid, name, group_size, bytes, 'wait', s, e
    FROM ({wait_rows})
),
flagged AS (
    SELECT *, CASE WHEN s <= max(e) OVER (
                  PARTITION BY rank, wid, name, group_size, bytes, part ORDER BY s, e
                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
              THEN 0 ELSE 1 END AS new
    FROM iv WHERE e > s
),
isl AS (
    SELECT rank, wid, name, group_size, bytes, part, min(s) AS s, max(e) AS e FROM (
        SELECT *, sum(new) OVER (PARTITION BY rank, wid, name, group_size, bytes, part
                                 ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
        FROM flagged)
    GROUP BY rank, wid, name, group_size, bytes, part, island
),
hid AS ({hidden})
SELECT rank, wid, name, group_size, bytes,
       sum(e - s) FILTER (part = 'all') AS union_ns,
       sum(e - s - hidden) FILTER (part = 'all') AS exposed_ns,
       coalesce(sum(e - s - hidden) FILTER (part = 'wait'), 0) AS wait_exposed_ns
FROM hid GROUP BY rank, wid, name, group_size, bytes

-- @query collective_rows
-- Every collective row: what `collective_exposure` clips to the windows ({all_rows}).
SELECT * FROM collectives

-- @query wait_rows
-- The waits for late peers of matched instances, each [ts_ns, wait_end_ns): what
-- `collective_exposure` clips to the windows ({wait_rows}).
SELECT *, ts_ns + least(wait_ns, dur_ns) AS wait_end_ns FROM collectives
WHERE wait_ns > 0 AND matched
