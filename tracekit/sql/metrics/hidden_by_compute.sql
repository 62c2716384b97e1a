-- @include rank.activity_islands
-- @query hidden_by_compute
-- The rows of {intervals} (rank, s, e, any other columns) with `hidden`, the part of [s, e)
-- under the rank's compute islands clipped to {windows} (rank, start_ns, end_ns). No sweep,
-- no interval join: with C(t) the rank's compute time before t — the islands' running sum
-- materialized at ingest (`activity_islands.before_ns`, one ASOF lookup per point) — the
-- part of [s, e) under compute within a window W is C(clamp_W(e)) − C(clamp_W(s)), summed
-- over the windows the interval meets.
-- @column hidden: ns of [s, e) under compute (the other columns are the input's)
WITH hw AS ({windows}),
iv AS (SELECT row_number() OVER () AS _id, * FROM ({intervals})),
pairs AS (
    SELECT iv._id, iv.rank,
           least(greatest(iv.s, hw.start_ns), hw.end_ns) AS a,
           least(greatest(iv.e, hw.start_ns), hw.end_ns) AS b
    FROM iv JOIN hw ON iv.rank = hw.rank
    WHERE iv.e > iv.s AND iv.e > hw.start_ns AND iv.s < hw.end_ns
),
pts AS (
    SELECT _id, rank, a AS t, -1 AS sign FROM pairs
    UNION ALL SELECT _id, rank, b, 1 FROM pairs
),
comp AS (
    SELECT rank, ts_ns, end_ns, before_ns FROM activity_islands
    WHERE category = 'computing'
),
c AS (
    SELECT pts._id,
           sum(pts.sign * coalesce(comp.before_ns + least(pts.t, comp.end_ns) - comp.ts_ns,
                                   0)) AS hidden
    FROM pts ASOF LEFT JOIN comp ON pts.rank = comp.rank AND pts.t >= comp.ts_ns
    GROUP BY pts._id
)
SELECT iv.* EXCLUDE (_id), greatest(coalesce(c.hidden, 0), 0)::BIGINT AS hidden
FROM iv LEFT JOIN c USING (_id)
