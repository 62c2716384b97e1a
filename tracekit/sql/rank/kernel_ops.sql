-- @include base.tables
-- @include rank.op_flops
-- @view kernel_ops
-- One row per compute kernel (kernel_classes: not communication) per rank, with what
-- tracekit knows of its FLOPs: the op of the FLOPs table whose launch it came from (as
-- `op_flops` attributes kernels: the innermost table op on the launching thread that
-- encloses the launch), else the CUDA/HIP graph launch that replayed it, else the
-- innermost CPU op around the launch on its thread (or, failing that, the CPU op with the
-- kernel's External id). Rank-local and window-free, so built once at ingest;
-- `levels.compute:kernel_attribution` clips it to the analysed windows and sums it.
-- @column rank INTEGER: global rank
-- @column ts_ns BIGINT: kernel start (GPU), ns since the epoch
-- @column end_ns BIGINT: kernel end (GPU), ns since the epoch
-- @column kernel VARCHAR: kernel name as traced
-- @column why VARCHAR: counted (an op with FLOPs), op_without_flops (a table op whose FLOPs the trace cannot give), graph_replay (replayed by a graph launch, no op above the kernel), op_without_formula (launched by an op tracekit has no FLOP formula for), no_op (no launching op in the trace)
-- @column op VARCHAR: the op (or, for graph_replay, the launch call) the kernel belongs to; NULL for no_op
-- @column op_key BIGINT: which instance of op: a table op's or enclosing CPU op's start (ns, > 0), a graph launch's correlation, or an op found by External id as −id − 1 (< 0); NULL for no_op
-- @column note VARCHAR: for op_without_flops, why the FLOPs are unknown
CREATE OR REPLACE VIEW kernel_ops AS
-- compute kernels by a number: their names (hundreds of characters) carried through the
-- joins below took a gigabyte at 1,024 ranks; the name joins back at the end
WITH kn AS (
    SELECT rank, name, row_number() OVER () AS kid
    FROM kernel_classes WHERE category = 'compute'
),
k AS (
    SELECT e.rank, kn.kid, e.correlation, e.external_id, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns
    FROM events e
    JOIN kn ON kn.rank = e.rank AND kn.name = e.name::VARCHAR
    WHERE e.kind = 'kernel'
),
l AS (  -- the launch calls of those kernels only (a semi join first: runs have millions)
    SELECT rank, correlation, arg_min(name::VARCHAR, ts_ns) AS launch,
           arg_min(tid, ts_ns) AS tid, min(ts_ns) AS launch_ns
    FROM events e SEMI JOIN k USING (rank, correlation)
    WHERE e.kind = 'runtime'
    GROUP BY rank, correlation
),
kl AS (SELECT k.*, l.launch, l.tid, l.launch_ns FROM k LEFT JOIN l USING (rank, correlation)),
f AS (SELECT rank, tid, name, ts_ns, ts_ns + dur_ns AS end_ns, flops, flops_note FROM op_flops),
kf AS (
    SELECT kl.*, f.name AS t_op, f.flops, f.flops_note, f.ts_ns AS t_ts, f.end_ns AS t_end
    FROM kl ASOF LEFT JOIN f
      ON f.rank = kl.rank AND f.tid = kl.tid AND kl.launch_ns >= f.ts_ns
),
c AS (  -- CPU ops of the threads that launched those kernels
    SELECT rank, tid, name::VARCHAR AS name, ts_ns, ts_ns + dur_ns AS end_ns,
           row_number() OVER () AS op_id
    FROM events e SEMI JOIN (SELECT DISTINCT rank, tid FROM kl) t USING (rank, tid)
    WHERE e.kind = 'cpu_op'
),
-- each launch once, with the last op started before it: ids and times only through the
-- ASOF join (sorting the kernels' rows and the ops' names with it was half its cost at
-- 128 small ranks); names join back for the ops chosen
p AS (SELECT DISTINCT rank, tid, launch_ns FROM kl WHERE launch_ns IS NOT NULL),
pc AS (
    SELECT p.rank, p.tid, p.launch_ns, c.op_id AS c_id, c.ts_ns AS c_ts, c.end_ns AS c_end
    FROM p ASOF LEFT JOIN (SELECT rank, tid, ts_ns, end_ns, op_id FROM c) c
      ON c.rank = p.rank AND c.tid = p.tid AND p.launch_ns >= c.ts_ns
),
-- where the last op started before the launch has ended (a child such as aten::empty
-- ran first), the innermost op around the launch is the latest-starting op that encloses
-- it. A plain range join of launches and ops ran as a nested loop (15 s on 8 ranks of
-- v100_ddp_rank1); the same predicate joined on 1 ms buckets of the thread's time axis
-- is a hash join: an op of at most 64 ms is listed once per bucket it covers (a launch's
-- bucket is then one of them), the few longer ops are range-joined alone
dead AS (SELECT rank, tid, launch_ns FROM pc WHERE launch_ns > c_end),
-- the ops that can enclose one (by the thread's span of such launches), without names:
-- an op is listed once per 1 ms it covers, so names would be copied that many times
cd AS (
    SELECT c.rank, c.tid, c.ts_ns, c.end_ns, c.op_id
    FROM c JOIN (SELECT rank, tid, min(launch_ns) AS lo, max(launch_ns) AS hi
                 FROM dead GROUP BY rank, tid) s
      ON s.rank = c.rank AND s.tid = c.tid AND c.ts_ns <= s.hi AND c.end_ns >= s.lo
),
around AS (
    SELECT d.rank, d.tid, d.launch_ns, cb.op_id, cb.ts_ns
    FROM (SELECT *, launch_ns // 1000000 AS b FROM dead) d
    JOIN (SELECT rank, tid, op_id, ts_ns, end_ns,
                 unnest(range(ts_ns // 1000000, end_ns // 1000000 + 1)) AS b
          FROM cd WHERE end_ns - ts_ns <= 64000000) cb
      ON cb.rank = d.rank AND cb.tid = d.tid AND cb.b = d.b
     AND cb.ts_ns <= d.launch_ns AND cb.end_ns >= d.launch_ns
    UNION ALL
    SELECT d.rank, d.tid, d.launch_ns, cl.op_id, cl.ts_ns
    FROM dead d
    JOIN (SELECT * FROM cd WHERE end_ns - ts_ns > 64000000) cl
      ON cl.rank = d.rank AND cl.tid = d.tid
     AND cl.ts_ns <= d.launch_ns AND cl.end_ns >= d.launch_ns
),
enc AS (
    SELECT rank, tid, launch_ns, arg_max(op_id, (ts_ns, -op_id)) AS e_id, max(ts_ns) AS e_ts
    FROM around GROUP BY rank, tid, launch_ns
),
-- each launch's op: the last one started before it where that encloses the launch, else
-- the enclosing one; its name looked up for those ops alone
po AS (
    SELECT pc.rank, pc.tid, pc.launch_ns,
           CASE WHEN pc.launch_ns <= pc.c_end THEN pc.c_id ELSE enc.e_id END AS o_id,
           CASE WHEN pc.launch_ns <= pc.c_end THEN pc.c_ts ELSE enc.e_ts END AS o_ts
    FROM pc LEFT JOIN enc USING (rank, tid, launch_ns)
),
pn AS (SELECT po.*, c.name AS o_name FROM po JOIN c ON c.op_id = po.o_id),
x AS (  -- by External id: for the kernels without an op around their launch alone
    SELECT rank, external_id, min(name::VARCHAR) AS name
    FROM events e SEMI JOIN (
        SELECT kf.rank, kf.external_id FROM kf
        ANTI JOIN pn ON pn.rank = kf.rank AND pn.tid = kf.tid AND pn.launch_ns = kf.launch_ns
    ) USING (rank, external_id)
    WHERE e.kind = 'cpu_op'
    GROUP BY rank, external_id
),
a AS (
    SELECT kf.rank, kf.kid, kf.ts_ns, kf.end_ns, kf.correlation,
           CASE WHEN kf.launch_ns <= kf.t_end THEN kf.t_op END AS t_op,
           CASE WHEN kf.launch_ns <= kf.t_end THEN kf.flops END AS flops,
           CASE WHEN kf.launch_ns <= kf.t_end THEN kf.flops_note END AS note,
           CASE WHEN kf.launch_ns <= kf.t_end THEN kf.t_ts END AS t_key,
           coalesce(contains(kf.launch, 'GraphLaunch'), false) AS graph,
           coalesce(pn.o_name, x.name) AS c_op,
           -- an op by its start (ns, > 0) or, found by External id, by −id − 1 (< 0)
           CASE WHEN pn.o_id IS NOT NULL THEN pn.o_ts
                WHEN x.name IS NOT NULL THEN -kf.external_id - 1 END AS c_key,
           kf.launch
    FROM kf LEFT JOIN x ON x.rank = kf.rank AND x.external_id = kf.external_id
    -- the op around the launch: the last one started before it, else the enclosing one
    LEFT JOIN pn ON pn.rank = kf.rank AND pn.tid = kf.tid AND pn.launch_ns = kf.launch_ns
)
SELECT a.rank, a.ts_ns, a.end_ns, kn.name AS kernel,
       CASE WHEN t_op IS NOT NULL AND flops IS NOT NULL THEN 'counted'
            WHEN t_op IS NOT NULL THEN 'op_without_flops'
            WHEN graph THEN 'graph_replay'
            WHEN c_op IS NOT NULL THEN 'op_without_formula'
            ELSE 'no_op' END AS why,
       CASE WHEN t_op IS NOT NULL THEN t_op WHEN graph THEN launch ELSE c_op END AS op,
       CASE WHEN t_op IS NOT NULL THEN t_key WHEN graph THEN correlation ELSE c_key
       END AS op_key,
       a.note
FROM a JOIN kn USING (kid);
