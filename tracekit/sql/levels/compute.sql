-- @include base.tables
-- @include rank.kernel_ops
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
-- Each rank's compute kernels in its window, by what tracekit knows of their FLOPs:
-- `kernel_attribution_by_kernel`'s rows, one per rank. Placeholder {by_kernel}: that
-- query over the windows (`tracekit.analysis.uncounted.attribution_sql`).
-- @column rank: global rank
-- @column why: counted (an op with FLOPs), op_without_flops (a table op whose FLOPs the trace cannot give), graph_replay (replayed by a graph launch, no op above the kernels), op_without_formula (launched by an op tracekit has no FLOP formula for), no_op (no launching op in the trace)
-- @column op: the op (or, for graph_replay, the launch call) the kernels belong to; NULL for no_op
-- @column kernel: kernel name
-- @column note: for op_without_flops, why the FLOPs are unknown (the least note)
-- @column ns: device time in the window, ns
-- @column n: kernels starting in the window
-- @column ops: distinct launching ops (graph launches for graph_replay) with a kernel in the window
SELECT unnest(ranks) AS rank, why, op, kernel, unnest(notes) AS note, unnest(ns) AS ns,
       unnest(n) AS n, unnest(ops) AS ops
FROM ({by_kernel})

-- @query kernel_attribution_by_kernel
-- Each rank's compute kernels in its window, by what tracekit knows of their FLOPs
-- (`kernel_ops`, built at ingest: the op of the FLOPs table whose launch they came from,
-- else the CUDA/HIP graph launch that replayed them, else the innermost CPU op around the
-- launch), gathered by kernel: one row per (why, op, kernel), in that order, with its
-- ranks' figures as lists in rank order (tens of rows at 1,024 ranks, not 90,000 each
-- with its kernel name). Time is the kernels' device time clipped to the window, a plain
-- sum (as `top_kernels`). Placeholders {windows}: the windows (rank, wid, start_ns,
-- end_ns, n); {key}: what a kernel's (why, op, kernel) is grouped by, of `kernel_ops k`:
-- `hash(k.why, k.op, k.kernel)` (numbers through the groupings, the names joined back
-- once: half the CPU of grouping by the names at 1,024 ranks), or, where two share a
-- hash (`key` repeats), `(k.why, k.op, k.kernel)` itself.
-- @column why: as `kernel_attribution`
-- @column op: as `kernel_attribution`
-- @column kernel: as `kernel_attribution`
-- @column ranks: the ranks with such kernels in their window, ascending
-- @column notes: each rank's note
-- @column ns: each rank's device time in the window, ns
-- @column n: each rank's kernels starting in the window
-- @column ops: each rank's distinct launching ops
-- @column key: the {key} the row was grouped by
WITH w AS ({windows}),
k AS (
    SELECT k.rank, {key} AS key, k.why, k.op, k.kernel, k.op_key, k.note,
           least(k.end_ns, w.end_ns) - greatest(k.ts_ns, w.start_ns) AS ns,
           k.ts_ns >= w.start_ns AS starts
    FROM kernel_ops k JOIN w ON w.rank = k.rank
    WHERE k.end_ns > w.start_ns AND k.ts_ns < w.end_ns
),
names AS (SELECT DISTINCT key, why, op, kernel FROM k),
-- distinct ops counted in two steps (each op's kernels first): a count(DISTINCT) per
-- group held a hash table per (rank, kernel) group, 1 GB at 1,024 ranks
g AS (
    SELECT rank, key, op_key, min(note) AS note, sum(ns) AS ns, count(*) FILTER (starts) AS n
    FROM k
    GROUP BY rank, key, op_key
),
r AS (
    SELECT rank, key, min(note) AS note, sum(ns)::BIGINT AS ns, sum(n)::BIGINT AS n,
           count(op_key) AS ops
    FROM g
    GROUP BY rank, key
),
l AS (
    SELECT key, list(rank ORDER BY rank) AS ranks, list(note ORDER BY rank) AS notes,
           list(ns ORDER BY rank) AS ns, list(n ORDER BY rank) AS n,
           list(ops ORDER BY rank) AS ops
    FROM r
    GROUP BY key
)
SELECT names.why, names.op, names.kernel, l.ranks, l.notes, l.ns, l.n, l.ops, l.key
FROM l JOIN names USING (key)
ORDER BY why, op, kernel

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
    WHERE kind = 'runtime' AND contains(name, 'Capture')  -- a cheap filter before the regex
      AND regexp_matches(name::VARCHAR, '^(cuda|hip)Stream(BeginCapture|EndCapture)')
)
SELECT b.rank, b.tid, b.ts_ns AS start_ns,
       coalesce(min(e.ts_ns), 9223372036854775807) AS end_ns
FROM calls b LEFT JOIN calls e
  ON e.rank = b.rank AND e.tid = b.tid AND NOT e.begins AND e.ts_ns > b.ts_ns
WHERE b.begins
GROUP BY ALL
ORDER BY ALL
