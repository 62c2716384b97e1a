-- @include base.tables
-- @include rank.op_flops
-- @include rank.steps
-- Compute: counted ops (the FLOPs table, `op_flops`) in the analysed windows.

-- @query op_dtypes
-- The (dtype, tf32) pairs of the counted ops that start in an analysed window.
-- Placeholder {ops}: `op_flops` rows that start in a window.
-- @column dtype: the op's element type
-- @column tf32: a TF32 kernel ran it
SELECT DISTINCT dtype, tf32 FROM ({ops})

-- @query op_groups
-- Counted ops in each rank's window, grouped by (rank, name, dtype, tf32, phase, and
-- whether the op ran faster than its dtype's peak — a suspect count). Placeholders {ops}:
-- `op_flops` rows starting in a window; {peaks}: rows (dtype, tf32, peak) of peak FLOP/s.
-- @column rank: global rank
-- @column name: op name
-- @column dtype: element type
-- @column tf32: a TF32 kernel ran it
-- @column phase: forward, backward or optimizer
-- @column suspect: it ran faster than its dtype's peak
-- @column winograd: its kernels include a Winograd convolution (fewer multiplies than its FLOPs)
-- @column n: ops
-- @column n_null: ops whose FLOPs the trace cannot give
-- @column flops: their FLOPs
-- @column timed_flops: FLOPs of the ops with device time
-- @column device_ns: device time of the ops with FLOPs
-- @column null_device_ns: device time of the ops without FLOPs
-- @column note: why some FLOPs are unknown (the least note, deterministic)
-- @column max_peak_ratio: the fastest op's achieved FLOP/s ÷ peak
WITH f AS ({ops}), p AS ({peaks})
SELECT f.rank, f.name, f.dtype, f.tf32, f.phase,
       coalesce(f.achieved_flops_per_s > p.peak, false) AS suspect, f.winograd, count(*) AS n,
       count(*) FILTER (f.flops IS NULL) AS n_null, sum(f.flops) AS flops,
       sum(f.flops) FILTER (f.device_ns > 0) AS timed_flops,
       sum(f.device_ns) FILTER (f.flops IS NOT NULL) AS device_ns,
       sum(f.device_ns) FILTER (f.flops IS NULL) AS null_device_ns, min(f.flops_note) AS note,
       max(f.achieved_flops_per_s / p.peak) AS max_peak_ratio
FROM f LEFT JOIN p ON p.dtype IS NOT DISTINCT FROM f.dtype AND p.tf32 = coalesce(f.tf32, false)
GROUP BY ALL
ORDER BY ALL  -- the sums then add in one order: the same report every time

-- @query host_bound_by_rank
-- Each rank's host-bound gaps over its analysed window. Placeholders {windows}: the
-- windows (rank, wid, start_ns, end_ns, n); {host_bound}: `metrics.host_bound` over them.
-- @column rank: global rank
-- @column n: steps in the window
-- @column host_bound_ns: host-bound gap time
-- @column host_gaps: host-bound gaps
-- @column gap_ns: all device gaps between kernels
-- @column median_kernel_ns: median kernel duration
WITH w AS ({windows})
SELECT h.rank, w.n, h.host_bound_ns, h.host_gaps, h.gap_ns, h.median_kernel_ns
FROM ({host_bound}) h JOIN w USING (rank)

-- @query kernel_attribution
-- Each rank's compute kernels in its window, by what tracekit knows of their FLOPs: the
-- op of the FLOPs table whose launch they came from (as `op_flops` attributes kernels:
-- the innermost table op on the launching thread that encloses the launch), else the
-- CUDA/HIP graph launch that replayed them, else the innermost CPU op around the launch
-- on its thread (or, failing that, the CPU op with the kernel's External id). Time is the kernels'
-- device time clipped to the window, a plain sum (as `top_kernels`).
-- Placeholders {windows}: the windows (rank, wid, start_ns, end_ns, n); {ranks}: a predicate
-- on `e.rank` that holds for their ranks (TRUE, or a range: the scans then skip the row
-- groups of other ranks when the query runs over chunks of ranks).
-- @column rank: global rank
-- @column why: counted (an op with FLOPs), op_without_flops (a table op whose FLOPs the trace cannot give), graph_replay (replayed by a graph launch, no op above the kernels), op_without_formula (launched by an op tracekit has no FLOP formula for), no_op (no launching op in the trace)
-- @column op: the op (or, for graph_replay, the launch call) the kernels belong to; NULL for no_op
-- @column kernel: kernel name
-- @column note: for op_without_flops, why the FLOPs are unknown (the least note)
-- @column ns: device time in the window, ns
-- @column n: kernels starting in the window
-- @column ops: distinct launching ops (graph launches for graph_replay) with a kernel in the window
WITH w AS ({windows}),
-- compute kernels by a number: their names (hundreds of characters) carried through the
-- joins below took a gigabyte at 1,024 ranks; the name joins back at the end
kn AS (
    SELECT rank, name, row_number() OVER () AS kid
    FROM kernel_classes WHERE category = 'compute'
),
k AS (
    SELECT e.rank, kn.kid, e.correlation, e.external_id,
           greatest(e.ts_ns, w.start_ns) AS s, least(e.ts_ns + e.dur_ns, w.end_ns) AS e,
           e.ts_ns >= w.start_ns AS starts_in
    FROM events e
    JOIN kn ON kn.rank = e.rank AND kn.name = e.name::VARCHAR
    JOIN w ON w.rank = e.rank
    WHERE e.kind = 'kernel' AND {ranks}
      AND e.ts_ns + e.dur_ns > w.start_ns AND e.ts_ns < w.end_ns
),
l AS (  -- the launch calls of those kernels only (a semi join first: runs have millions)
    SELECT rank, correlation, arg_min(name::VARCHAR, ts_ns) AS launch,
           arg_min(tid, ts_ns) AS tid, min(ts_ns) AS launch_ns
    FROM events e SEMI JOIN k USING (rank, correlation)
    WHERE e.kind = 'runtime' AND {ranks}
    GROUP BY rank, correlation
),
kl AS (SELECT k.*, l.launch, l.tid, l.launch_ns FROM k LEFT JOIN l USING (rank, correlation)),
f AS (
    SELECT rank, tid, name, ts_ns, ts_ns + dur_ns AS end_ns, flops, flops_note
    FROM op_flops e WHERE {ranks}
),
kf AS (
    SELECT kl.*, f.name AS t_op, f.flops, f.flops_note, f.ts_ns AS t_ts, f.end_ns AS t_end
    FROM kl ASOF LEFT JOIN f
      ON f.rank = kl.rank AND f.tid = kl.tid AND kl.launch_ns >= f.ts_ns
),
c AS (  -- CPU ops of the threads that launched those kernels
    SELECT rank, tid, name::VARCHAR AS name, ts_ns, ts_ns + dur_ns AS end_ns,
           row_number() OVER () AS op_id
    FROM events e SEMI JOIN (SELECT DISTINCT rank, tid FROM kl) t USING (rank, tid)
    WHERE e.kind = 'cpu_op' AND {ranks}
),
kc AS (
    SELECT kf.*, c.op_id AS c_id, c.ts_ns AS c_ts, c.end_ns AS c_end, c.name AS c_name
    FROM kf ASOF LEFT JOIN c
      ON c.rank = kf.rank AND c.tid = kf.tid AND kf.launch_ns >= c.ts_ns
),
-- where the last op started before the launch has ended (a child such as aten::empty
-- ran first), the innermost op around the launch is the latest-starting op that encloses
-- it. A plain range join of launches and ops ran as a nested loop (15 s on 8 ranks of
-- v100_ddp_rank1); the same predicate joined on 1 ms buckets of the thread's time axis
-- is a hash join: an op of at most 64 ms is listed once per bucket it covers (a launch's
-- bucket is then one of them), the few longer ops are range-joined alone
dead AS (SELECT DISTINCT rank, tid, launch_ns FROM kc WHERE launch_ns > c_end),
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
-- the enclosing op's name: looked up for those launches alone (joining every kernel to
-- every CPU op by id for its name was a fifth of this query at 1,024 ranks)
en AS (SELECT enc.*, c.name AS e_name FROM enc JOIN c ON c.op_id = enc.e_id),
x AS (
    SELECT rank, external_id, min(name::VARCHAR) AS name
    FROM events e SEMI JOIN k USING (rank, external_id)
    WHERE e.kind = 'cpu_op' AND {ranks}
    GROUP BY rank, external_id
),
a AS (
    SELECT kc.rank, kc.kid, kc.s, kc.e, kc.starts_in, kc.correlation,
           CASE WHEN kc.launch_ns <= kc.t_end THEN kc.t_op END AS t_op,
           CASE WHEN kc.launch_ns <= kc.t_end THEN kc.flops END AS flops,
           CASE WHEN kc.launch_ns <= kc.t_end THEN kc.flops_note END AS note,
           CASE WHEN kc.launch_ns <= kc.t_end THEN kc.t_ts END AS t_key,
           coalesce(contains(kc.launch, 'GraphLaunch'), false) AS graph,
           coalesce(CASE WHEN kc.launch_ns <= kc.c_end THEN kc.c_name ELSE en.e_name END,
                    x.name) AS c_op,
           -- an op by its start (ns, > 0) or, found by External id, by −id − 1 (< 0)
           CASE WHEN kc.launch_ns <= kc.c_end THEN kc.c_ts
                WHEN en.e_id IS NOT NULL THEN en.e_ts
                WHEN x.name IS NOT NULL THEN -kc.external_id - 1 END AS c_key,
           kc.launch
    FROM kc LEFT JOIN x ON x.rank = kc.rank AND x.external_id = kc.external_id
    -- the op around the launch: the last one started before it, else the enclosing one
    LEFT JOIN en ON en.rank = kc.rank AND en.tid = kc.tid AND en.launch_ns = kc.launch_ns
),
-- distinct ops counted in two steps (each op's kernels first): a count(DISTINCT) per
-- group held a hash table per (rank, kernel) group, 1 GB at 1,024 ranks
g AS (
    SELECT rank,
           CASE WHEN t_op IS NOT NULL AND flops IS NOT NULL THEN 'counted'
                WHEN t_op IS NOT NULL THEN 'op_without_flops'
                WHEN graph THEN 'graph_replay'
                WHEN c_op IS NOT NULL THEN 'op_without_formula'
                ELSE 'no_op' END AS why,
           CASE WHEN t_op IS NOT NULL THEN t_op WHEN graph THEN launch ELSE c_op END AS op,
           kid,
           CASE WHEN t_op IS NOT NULL THEN t_key WHEN graph THEN correlation ELSE c_key
           END AS op_key,
           min(note) AS note, sum(e - s) AS ns, count(*) FILTER (starts_in) AS n
    FROM a
    GROUP BY ALL
)
SELECT g.rank, why, op, kn.name AS kernel, min(note) AS note, sum(ns) AS ns,
       sum(n)::BIGINT AS n, count(op_key) AS ops
FROM g JOIN kn USING (kid)
GROUP BY g.rank, why, op, kn.name
ORDER BY ALL

-- @query graph_captures
-- CUDA/HIP graph captures per rank and step, and the kernel launches recorded inside them
-- (their kernels do not run then; `op_flops` leaves their ops out). A capture before the
-- first step has step NULL. Placeholder {spans}: the `capture_spans` query.
-- @column rank: global rank
-- @column step: the ProfilerStep the capture starts in (NULL: outside every step)
-- @column captures: captures that start in it
-- @column launches: kernel launch calls inside them
SELECT c.rank, (SELECT min(s.step) FROM steps s WHERE s.rank = c.rank
                AND c.start_ns BETWEEN s.ts_ns AND s.end_ns) AS step,
       count(DISTINCT c.start_ns) AS captures,
       count(r.ts_ns) AS launches
FROM ({spans}) c LEFT JOIN events r
  ON r.rank = c.rank AND r.tid = c.tid AND r.kind = 'runtime'
 AND r.ts_ns BETWEEN c.start_ns AND c.end_ns
 AND regexp_matches(r.name::VARCHAR, 'Launch(Kernel|CooperativeKernel)')
GROUP BY ALL
ORDER BY ALL

-- @query capture_spans
-- Each CUDA/HIP graph capture: `cudaStreamBeginCapture` to the first
-- `cudaStreamEndCapture` after it on its thread (`hip…` alike; never ended: to the end of
-- time). Ops starting inside one were recorded into a graph, not run (`rank.op_flops`
-- spells the same spans at ingest).
-- @column rank: global rank
-- @column tid: the capturing thread
-- @column start_ns: the begin call's start
-- @column end_ns: the end call's start
WITH calls AS (
    SELECT rank, tid, ts_ns, regexp_matches(name::VARCHAR, 'StreamBeginCapture') AS begins
    FROM events
    WHERE kind = 'runtime'
      AND regexp_matches(name::VARCHAR, '^(cuda|hip)Stream(BeginCapture|EndCapture)')
)
SELECT b.rank, b.tid, b.ts_ns AS start_ns,
       coalesce(min(e.ts_ns), 9223372036854775807) AS end_ns
FROM calls b LEFT JOIN calls e
  ON e.rank = b.rank AND e.tid = b.tid AND NOT e.begins AND e.ts_ns > b.ts_ns
WHERE b.begins
GROUP BY ALL
ORDER BY ALL
