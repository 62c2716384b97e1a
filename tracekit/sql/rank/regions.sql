-- @view regions
-- One row per region instance per rank: every `record_function` range (`user_annotation`,
-- ProfilerStep and gloo execution spans left out) and every `nn.Module: X` python_function
-- event (with_modules / with_stack), nested by containment on their thread: a region's
-- parents are the regions of its thread whose span holds it (two of one span: the earlier
-- in the trace is the parent). Containment gives the tree the "Python parent id" links give
-- modules, and places annotations among them. ProfilerStep is the root, left out of paths.
-- Device time is the work a region launched: the device events (kernel, memcpy, memset)
-- whose runtime call (same correlation) ran on the region's thread inside its span —
-- inclusive of its children (device_ns) and its own (device_self_ns: launches no child
-- region holds). FLOPs are those of the counted ops (op_flops) that start inside the span
-- on its thread.
-- @column rank: global rank
-- @column tid: thread the region ran on
-- @column kind: module (an nn.Module event) or annotation (a record_function range)
-- @column name: the region's name (a module's without "nn.Module: ")
-- @column path: names from the outermost region to this one (ProfilerStep left out), the leaf last
-- @column depth: regions above it on its thread (0: outermost)
-- @column ts_ns: region start (CPU), ns since the epoch
-- @column dur_ns: region duration (CPU), ns
-- @column end_ns: region end (CPU), ns since the epoch
-- @column launched: device events launched inside the span, children's included
-- @column device_ns: summed duration of those device events, ns (children's included)
-- @column device_self_ns: the part of device_ns launched outside every child region, ns
-- @column flops: FLOPs of the counted ops that start inside the span (null: none counted)
-- @column work_ns: where its work runs: the start of the first device event it launched, else its CPU start — the time a window counts the region by, as it counts ops (`windows.ops_in`)
CREATE OR REPLACE VIEW regions AS
WITH r AS (
    SELECT row_number() OVER (ORDER BY rank, tid, ts_ns, dur_ns DESC, name) AS rid, rank, tid,
           CASE WHEN kind = 'python' THEN 'module' ELSE 'annotation' END AS kind,
           CASE WHEN kind = 'python' THEN trim((name::VARCHAR)[12:]) ELSE name::VARCHAR END
               AS name,
           ts_ns, dur_ns, ts_ns + dur_ns AS end_ns
    FROM events
    WHERE (kind = 'python' AND starts_with(name::VARCHAR, 'nn.Module: '))
       OR (kind = 'user_annotation' AND NOT starts_with(name::VARCHAR, 'ProfilerStep#'))
),
-- each region with every region above it (same thread, span holds it; rid orders ties)
anc AS (
    SELECT c.rid, a.rid AS arid, a.ts_ns AS a_ts, a.name AS a_name
    FROM r c JOIN r a ON a.rank = c.rank AND a.tid = c.tid
    WHERE a.ts_ns <= c.ts_ns AND a.end_ns >= c.end_ns AND a.rid < c.rid
),
up AS (
    SELECT rid, list(a_name ORDER BY a_ts, arid) AS above, count(*) AS depth
    FROM anc GROUP BY rid
),
p AS (
    SELECT r.*, coalesce(up.above, []) || [r.name] AS path, coalesce(up.depth, 0) AS depth
    FROM r LEFT JOIN up USING (rid)
),
launches AS (
    SELECT row_number() OVER () AS lid, l.rank, l.tid, l.ts_ns AS launch_ns, d.ts_ns AS d_ts, d.dur_ns AS d_dur
    FROM events l JOIN events d ON d.rank = l.rank AND d.correlation = l.correlation
    WHERE l.kind = 'runtime' AND d.kind IN ('kernel', 'memcpy', 'memset')
      AND l.correlation IS NOT NULL
),
-- each launch with every region holding it, and the innermost of them
held AS (
    SELECT p.rid, p.depth, l.launch_ns, l.d_ts, l.d_dur,
           p.depth = max(p.depth) OVER (PARTITION BY l.lid)
               AS innermost
    FROM launches l JOIN p ON p.rank = l.rank AND p.tid = l.tid
    WHERE l.launch_ns >= p.ts_ns AND l.launch_ns <= p.end_ns
),
dev AS (
    SELECT rid, count(*) AS launched, sum(d_dur) AS device_ns,
           coalesce(sum(d_dur) FILTER (innermost), 0) AS device_self_ns, min(d_ts) AS first_ns
    FROM held GROUP BY rid
),
fl AS (
    SELECT p.rid, sum(o.flops) AS flops
    FROM op_flops o JOIN p ON p.rank = o.rank AND p.tid = o.tid
    WHERE o.ts_ns >= p.ts_ns AND o.ts_ns <= p.end_ns AND o.flops IS NOT NULL
    GROUP BY p.rid
)
SELECT p.rank, p.tid, p.kind, p.name, p.path, p.depth::INTEGER AS depth, p.ts_ns, p.dur_ns,
       p.end_ns, coalesce(dev.launched, 0) AS launched, coalesce(dev.device_ns, 0) AS device_ns,
       coalesce(dev.device_self_ns, 0) AS device_self_ns, fl.flops,
       coalesce(dev.first_ns, p.ts_ns) AS work_ns
FROM p LEFT JOIN dev USING (rid) LEFT JOIN fl USING (rid);
