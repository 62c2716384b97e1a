-- @include rank.device_activity
-- @include rank.steps
-- @query work_items
-- Per window of {windows} (rank, wid, start_ns, end_ns) each device work item (kernel,
-- memcpy, memset) starting in it, and each gloo span (a GPU run's gloo collective:
-- `gloo`): the items `work` orders.
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column ts_ns BIGINT: the work's start
-- @column end_ns BIGINT: the work's end
-- @column launch_ns BIGINT: its launch call's start
-- @column gloo BOOLEAN: a gloo span, not device work
WITH sw AS ({windows})
SELECT a.rank, sw.wid, a.ts_ns, a.end_ns, a.launch_ns, a.kind = 'comm_thread' AS gloo
FROM device_activity a JOIN sw ON a.rank = sw.rank
WHERE a.kind IN ('kernel', 'memcpy', 'memset', 'comm_thread')
  AND a.ts_ns >= sw.start_ns AND a.ts_ns < sw.end_ns

-- @query work
-- The rows of `work_items` ({items}) each with the end of the work before it in its
-- window on any stream (`prev_end`): one sort of the items, which `device_gaps` and
-- `piece_work` read (`metrics.breakdown.piece_work_table`: the same rows with numpy,
-- this running max is twice DuckDB's sort of the items).
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column ts_ns BIGINT: the work's start
-- @column end_ns BIGINT: the work's end
-- @column launch_ns BIGINT: its launch call's start
-- @column gloo BOOLEAN: a gloo span, not device work
-- @column prev_end BIGINT: the end of the work before it, null for the first
SELECT *, max(end_ns) OVER (PARTITION BY rank, wid ORDER BY ts_ns, end_ns
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
FROM ({items})

-- @query device_gaps
-- Per window each device work item (kernel, memcpy, memset) with the end of the work
-- before it on any stream (`prev_end`): a gap where it starts after `prev_end`,
-- host-bound where it was also launched only after `prev_end`. An item whose gap spans
-- the start of a ProfilerStep is left out (the previous step's tail). A gloo span is
-- work before an item too (the host that launched late was waiting for it, not slow to
-- launch), not an item. `host_bound` and the loader's share of it read these rows.
-- Placeholder {work}: `work` over the windows (or rows of its columns: the report's
-- windows from `piece_work`).
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column ts_ns BIGINT: the work's start
-- @column end_ns BIGINT: the work's end
-- @column launch_ns BIGINT: its launch call's start
-- @column prev_end BIGINT: the end of the work before it, null for the first
WITH l0 AS ({work}),
boundary AS (
    SELECT DISTINCT l0.rank, l0.wid, l0.ts_ns FROM l0 JOIN steps s
      ON s.rank = l0.rank AND s.ts_ns > l0.prev_end AND s.ts_ns <= l0.launch_ns
)
SELECT l0.rank, l0.wid, l0.ts_ns, l0.end_ns, l0.launch_ns, l0.prev_end
FROM l0 ANTI JOIN boundary b
ON b.rank = l0.rank AND b.wid = l0.wid AND b.ts_ns = l0.ts_ns
WHERE NOT l0.gloo

-- @query host_bound
-- Per window of `device_gaps`' windows the host-bound time: a device gap
-- (no kernel, memcpy or memset on any stream) that ends with a kernel launched only after
-- the previous work had ended (`device_activity.launch_ns`): the device waited for the
-- host. A gap across the start of a ProfilerStep is left out: that is the previous step's
-- tail (waiting on other ranks, a pipeline's cooldown), not launch overhead. GPU runs.
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column host_bound_ns HUGEINT: host-bound gap time
-- @column host_gaps BIGINT: host-bound gaps
-- @column gap_ns HUGEINT: all device gaps between kernels
-- @column median_kernel_ns DOUBLE: median kernel duration
-- Placeholder {gaps}: `device_gaps` over the same windows.
WITH l AS ({gaps})
SELECT rank, wid,
       coalesce(sum(ts_ns - prev_end) FILTER (ts_ns > prev_end AND launch_ns >= prev_end),
                0) AS host_bound_ns,
       count(*) FILTER (ts_ns > prev_end AND launch_ns >= prev_end) AS host_gaps,
       coalesce(sum(ts_ns - prev_end) FILTER (ts_ns > prev_end), 0) AS gap_ns,
       median(end_ns - ts_ns) AS median_kernel_ns
FROM l GROUP BY rank, wid

-- @query piece_work
-- `work`'s items over the pieces (the report's windows cut at the step windows,
-- `metrics.windows.pieces`), each also with the latest end of the work in the earlier
-- pieces of its rank (`before_end`, null for none). Every item of an earlier piece
-- starts before the piece does, so over the whole window the work before an item ends at
-- the greater of `prev_end` and `before_end`: one sort of the items serves both the step
-- windows and the report's (`device_gaps` over each). Pieces are disjoint and an item
-- starts in its piece, so the pieces are in the order of their first items. Placeholder
-- {work}: `work` over the pieces.
WITH l0 AS ({work}),
pm AS (
    SELECT rank, wid, max(max(end_ns)) OVER (PARTITION BY rank ORDER BY min(ts_ns)
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end
    FROM l0 GROUP BY rank, wid
)
SELECT l0.rank, l0.wid, l0.ts_ns, l0.end_ns, l0.launch_ns, l0.gloo, l0.prev_end,
       pm.before_end
FROM l0 JOIN pm USING (rank, wid)

-- @query piece_work_joined
-- Table {name}: the rows of `piece_work` from the items sorted by (rank, ts_ns, end_ns)
-- ({sorted}) and, by position, their running maxima computed in numpy ({numbers}: prev,
-- before, p0 the item opens its piece, r0 its piece opens the rank's), as
-- `metrics.breakdown.piece_work_table` makes them.
CREATE TABLE IF NOT EXISTS {name} AS
SELECT s.rank, s.wid, s.ts_ns, s.end_ns, s.launch_ns, s.gloo,
       CASE WHEN n.p0 THEN NULL ELSE n.prev END AS prev_end,
       CASE WHEN n.r0 THEN NULL ELSE n.before END AS before_end
FROM {sorted} s POSITIONAL JOIN {numbers} n
