-- @include base.tables
-- @include rank.op_flops
-- @view regions
-- One row per region instance per rank: every `record_function` range (`user_annotation`,
-- ProfilerStep and gloo execution spans left out) and every `nn.Module: X` python_function
-- event (with_modules / with_stack), nested by containment on their thread: a region's
-- parents are the regions of its thread open when it starts (of two with one start, the
-- longer is the parent), found by one sweep over the thread's starts and ends. Containment
-- gives the tree the "Python parent id" links give modules, and places annotations among
-- them; ranges that overlap without nesting are taken as nested. ProfilerStep is the root,
-- left out of paths. Device time is the work a region launched: the device events (kernel,
-- memcpy, memset) whose runtime call (same correlation) started on the region's thread
-- inside its span [start, end) — inclusive of its children (device_ns) and its own
-- (device_self_ns: launched while no child region was open). FLOPs are those of the
-- counted ops (op_flops) that start inside the span on its thread, children's included.
-- @column rank INTEGER: global rank
-- @column tid BIGINT: thread the region ran on
-- @column kind VARCHAR: module (an nn.Module event) or annotation (a record_function range)
-- @column name VARCHAR: the region's name (a module's without "nn.Module: ")
-- @column path VARCHAR[]: names from the outermost region to this one (ProfilerStep left out), the leaf last
-- @column depth INTEGER: regions above it on its thread (0: outermost)
-- @column ts_ns BIGINT: region start (CPU), ns since the epoch
-- @column dur_ns BIGINT: region duration (CPU), ns
-- @column end_ns BIGINT: region end (CPU), ns since the epoch
-- @column launched DOUBLE: device events launched inside the span, children's included
-- @column device_ns DOUBLE: summed duration of those device events, ns (children's included)
-- @column device_self_ns DOUBLE: the part of device_ns launched outside every child region, ns
-- @column flops DOUBLE: FLOPs of the counted ops that start inside the span (null: none counted)
-- @column work_ns BIGINT: where its work runs: the start of the first device event it launched, else its CPU start — the time a window counts the region by, as it counts ops (`windows.ops_in`)
CREATE OR REPLACE VIEW regions AS
WITH RECURSIVE r AS (
    SELECT row_number() OVER (ORDER BY rank, tid, ts_ns, dur_ns DESC, name) AS rid, rank, tid,
           CASE WHEN kind = 'python' THEN 'module' ELSE 'annotation' END AS kind,
           CASE WHEN kind = 'python' THEN trim((name::VARCHAR)[12:]) ELSE name::VARCHAR END
               AS name,
           ts_ns, dur_ns, ts_ns + dur_ns AS end_ns
    FROM events
    WHERE (kind = 'python' AND prefix(name::VARCHAR, 'nn.Module: '))
       OR (kind = 'user_annotation' AND NOT prefix(name::VARCHAR, 'ProfilerStep#'))
),
-- what regions hold: device work by its runtime call, and counted ops
work AS (
    SELECT row_number() OVER () AS wid, * FROM (
        SELECT l.rank, l.tid, l.ts_ns AS t, d.ts_ns AS d_ts, d.dur_ns AS d_dur,
               NULL::DOUBLE AS flops
        FROM events l JOIN events d ON d.rank = l.rank AND d.correlation = l.correlation
        WHERE l.kind = 'runtime' AND d.kind IN ('kernel', 'memcpy', 'memset')
          AND l.correlation IS NOT NULL
        UNION ALL
        SELECT rank, tid, ts_ns, NULL, NULL, flops FROM op_flops WHERE flops IS NOT NULL
    )
),
-- one sweep per thread (sorting, not a range join: 100,000 regions on one thread took
-- 70 s as a self-join): +1 at a region's start, -1 at its end. At one instant ends come
-- first (a region ending as another starts does not hold it), then starts in rid order
-- (the parent first), then the work (a region holds [start, end)), then the ends of
-- zero-length regions. Open regions at a start: its depth + 1; at a launch or an op: the
-- depth of the innermost region holding it + 1.
ev AS (
    SELECT rank, tid, ts_ns AS t, 1 AS ord, rid AS k, 1 AS delta FROM r
    UNION ALL
    SELECT rank, tid, end_ns, CASE WHEN dur_ns = 0 THEN 3 ELSE 0 END, rid, -1 FROM r
    UNION ALL
    SELECT rank, tid, t, 2, wid, 0 FROM work
),
sweep AS (
    SELECT *, sum(delta) OVER (PARTITION BY rank, tid ORDER BY t, ord, k
                               ROWS UNBOUNDED PRECEDING) AS n_open
    FROM ev
),
d AS (SELECT r.*, s.n_open - 1 AS depth FROM r JOIN sweep s ON s.ord = 1 AND s.k = r.rid),
-- a region's parent: the latest region one level up that started before it on its thread
-- (ranges that overlap without nesting are taken as nested)
par AS MATERIALIZED (
    SELECT c.rid, a.rid AS parent
    FROM d c ASOF JOIN d a ON a.rank = c.rank AND a.tid = c.tid AND a.depth = c.depth - 1
                          AND c.rid > a.rid
    WHERE c.depth > 0
),
tree AS (
    SELECT rid, [name] AS path, [rid] AS line FROM d WHERE depth = 0
    UNION ALL
    SELECT d.rid, tree.path || [d.name], tree.line || [d.rid]
    FROM par JOIN d ON d.rid = par.rid JOIN tree ON tree.rid = par.parent
),
-- each piece of work to the innermost region open on its thread
wd AS (
    SELECT w.*, s.n_open - 1 AS depth
    FROM work w JOIN sweep s ON s.ord = 2 AND s.k = w.wid
    WHERE s.n_open > 0
),
own AS (
    SELECT a.rid, count(w.d_dur) AS launched, sum(w.d_dur) AS device_ns, min(w.d_ts) AS first_ns,
           sum(w.flops) AS flops
    FROM wd w ASOF JOIN d a ON a.rank = w.rank AND a.tid = w.tid AND a.depth = w.depth
                           AND w.t >= a.ts_ns
    GROUP BY a.rid
),
-- a region's work: its own and that of every region below it
tot AS (
    SELECT u.up AS rid, sum(own.launched) AS launched, sum(own.device_ns) AS device_ns,
           min(own.first_ns) AS first_ns, sum(own.flops) AS flops
    FROM (SELECT rid, unnest(line) AS up FROM tree) u JOIN own ON own.rid = u.rid
    GROUP BY u.up
)
SELECT d.rank, d.tid, d.kind, d.name, tree.path, d.depth::INTEGER AS depth, d.ts_ns, d.dur_ns,
       d.end_ns, coalesce(tot.launched, 0) AS launched, coalesce(tot.device_ns, 0) AS device_ns,
       coalesce(own.device_ns, 0) AS device_self_ns, tot.flops,
       coalesce(tot.first_ns, d.ts_ns) AS work_ns
FROM d JOIN tree USING (rid) LEFT JOIN own USING (rid) LEFT JOIN tot USING (rid);
