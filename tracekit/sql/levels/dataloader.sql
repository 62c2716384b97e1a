-- @include base.tables
-- @include rank.activity_segments
-- Data loading: the device idle while the host fetches a batch.

-- @query loader_spans
-- The data loader's CPU spans — PyTorch's record_function around each batch fetch,
-- `enumerate(DataLoader)#<iterator>.__next__` — clipped to the analysed windows
-- {windows} (rank, wid, start_ns, end_ns, …) and merged (nested or repeated spans count
-- once).
-- @column rank: global rank
-- @column s: span start, ns since the epoch
-- @column e: span end, ns since the epoch
WITH w AS ({windows}),
sp AS (
    SELECT ev.rank, greatest(ev.ts_ns, w.start_ns) AS s,
           least(ev.ts_ns + ev.dur_ns, w.end_ns) AS e
    FROM events ev JOIN w ON ev.rank = w.rank
    WHERE ev.kind IN ('cpu_op', 'user_annotation')
      AND starts_with(ev.name, 'enumerate(DataLoader)#')
      AND ev.ts_ns < w.end_ns AND ev.ts_ns + ev.dur_ns > w.start_ns
),
o AS (
    SELECT *, max(e) OVER (PARTITION BY rank ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
    FROM sp
),
g AS (
    SELECT *, sum((prev_e IS NULL OR s > prev_e)::INT)
                  OVER (PARTITION BY rank ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
    FROM o
)
SELECT rank, min(s) AS s, max(e) AS e FROM g GROUP BY rank, island

-- @query loader_idle
-- Per rank, the loader's spans and the device idle inside them: span time less the
-- device's busy segments within (any kernel, memcpy, memset or communication:
-- activity_segments). Placeholder {spans}: `loader_spans`.
-- @column rank: global rank
-- @column spans: merged loader spans
-- @column loader_ns: their summed time
-- @column idle_ns: device idle inside them
WITH m AS ({spans}),
busy AS (
    SELECT m.rank, m.s, sum(least(a.end_ns, m.e) - greatest(a.ts_ns, m.s)) AS busy_ns
    FROM m JOIN activity_segments a ON a.rank = m.rank AND a.ts_ns < m.e AND a.end_ns > m.s
    GROUP BY m.rank, m.s
)
SELECT m.rank, count(*) AS spans, sum(m.e - m.s) AS loader_ns,
       sum(m.e - m.s - coalesce(busy.busy_ns, 0)) AS idle_ns
FROM m LEFT JOIN busy USING (rank, s) GROUP BY m.rank ORDER BY m.rank

-- @query host_bound_in_loader
-- Per rank, the part of its host-bound gaps that lies inside the loader's spans: the
-- gaps as `metrics.host_bound` defines them (a device gap ended by work launched only
-- after the previous work ended; a gap across a ProfilerStep start left out), over
-- {gaps} (`metrics.host_bound:device_gaps` over the analysed windows). Placeholder
-- {spans}: `loader_spans`.
-- @column rank: global rank
-- @column host_bound_ns: host-bound gap time inside the loader's spans
WITH m AS ({spans}),
gaps AS (
    SELECT rank, prev_end AS gs, ts_ns AS ge FROM ({gaps})
    WHERE ts_ns > prev_end AND launch_ns >= prev_end
)
SELECT gaps.rank, sum(least(gaps.ge, m.e) - greatest(gaps.gs, m.s)) AS host_bound_ns
FROM gaps JOIN m ON m.rank = gaps.rank AND gaps.gs < m.e AND gaps.ge > m.s
GROUP BY gaps.rank ORDER BY gaps.rank
