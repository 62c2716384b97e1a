-- @include base.tables
-- @include rank.activity_segments
-- @include rank.steps
-- @include run.collectives
-- What the merged Perfetto trace (`tracekit export`) and the HTML report's links to it
-- read from the store: where the trace's clock starts, the step boundaries, the exposed
-- communication as intervals, and the places a finding's evidence points at. Every
-- instant is aligned (`tracekit.store.clocks`), as the figures are.

-- @query base
-- The merged trace's zero: the earliest event of any rank, ns since the epoch.
-- @column base_ns BIGINT: the earliest event start, ns since the epoch
SELECT min(ts_ns) AS base_ns FROM events

-- @query steps
-- Each rank's ProfilerSteps.
-- @column rank INTEGER: global rank
-- @column step BIGINT: N of ProfilerStep#N
-- @column ts_ns BIGINT: step start, ns since the epoch
-- @column end_ns BIGINT: step end, ns since the epoch
SELECT rank, step, ts_ns, end_ns FROM steps ORDER BY rank, ts_ns

-- @query exposed
-- Communication no compute hides, as intervals: the `activity_segments` where
-- communication runs and compute does not, touching segments joined.
-- @column rank INTEGER: global rank
-- @column ts_ns BIGINT: interval start, ns since the epoch
-- @column end_ns BIGINT: interval end, ns since the epoch
WITH s AS (
    SELECT rank, ts_ns, end_ns,
           ts_ns <> coalesce(lag(end_ns) OVER (PARTITION BY rank ORDER BY ts_ns), -1) AS fresh
    FROM activity_segments WHERE comm AND NOT compute
), g AS (
    SELECT rank, ts_ns, end_ns,
           sum(fresh::INT) OVER (PARTITION BY rank ORDER BY ts_ns) AS grp
    FROM s
)
SELECT rank, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns FROM g
GROUP BY rank, grp ORDER BY rank, ts_ns

-- @query collective
-- The instance of collective $name on ranks $ranks that kept its rank longest (all sizes
-- when $bytes is null).
-- @column rank: global rank
-- @column ts_ns: transfer start, ns since the epoch
-- @column end_ns: transfer end, ns since the epoch
SELECT rank, ts_ns, end_ns FROM collectives
WHERE name = $name AND list_contains($ranks, rank) AND ($bytes IS NULL OR bytes = $bytes)
ORDER BY dur_ns DESC, ts_ns LIMIT 1

-- @query memory_peak
-- When the allocator's total reached its peak on ranks $ranks.
-- @column rank: global rank
-- @column ts_ns: the instant of the peak, ns since the epoch
SELECT rank, ts_ns FROM memory
WHERE list_contains($ranks, rank) AND total_allocated IS NOT NULL
ORDER BY total_allocated DESC, ts_ns LIMIT 1

-- @query memory_timeline
-- Each rank's allocator total over time, as the highest total in each of $buckets equal
-- spans of the trace (what a chart can draw of a trace with thousands of allocations).
-- @column rank: global rank
-- @column t_ns: the span's start, ns since the epoch
-- @column allocated_bytes: the largest total allocated in the span
-- @column reserved_bytes: the largest total reserved in the span
WITH m AS (
    SELECT rank, ts_ns, total_allocated, total_reserved,
           min(ts_ns) OVER () AS t0, max(ts_ns) OVER () AS t1
    FROM memory WHERE total_allocated IS NOT NULL
), b AS (
    SELECT rank, t0 + floor((ts_ns - t0) * $buckets / greatest(t1 - t0, 1))::BIGINT
                      * greatest(t1 - t0, 1) // $buckets AS t_ns,
           total_allocated, total_reserved
    FROM m
)
SELECT rank, t_ns, max(total_allocated) AS allocated_bytes, max(total_reserved) AS reserved_bytes
FROM b GROUP BY rank, t_ns ORDER BY rank, t_ns
