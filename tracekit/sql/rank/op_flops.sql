-- @include base.tables
-- @view op_flops
-- One row per counted op: an op of the FLOPs signature table (GEMMs, convolutions and
-- their backward, attention forward and backward; tracekit/model/flops/) that is the
-- innermost such op on its thread (tracekit/opscan.py), with its FLOPs from the shapes
-- and the device time of the kernels it launched. Ops whose FLOPs the trace cannot give
-- are kept with flops NULL and flops_note saying why: they are the "not counted" figure.
-- Ops inside a CUDA/HIP graph capture (between `cudaStreamBeginCapture` and
-- `cudaStreamEndCapture` on their thread, `hip…` alike; a capture never ended runs to the
-- trace's end) are not here: their launches were recorded into a graph, their kernels did
-- not run, so they did no work (the graph's replays do it, with no op above them).
-- @column rank INTEGER: global rank
-- @column tid BIGINT: thread the op ran on
-- @column name VARCHAR: aten op name
-- @column ts_ns BIGINT: op start (CPU), ns since the epoch
-- @column dur_ns BIGINT: op duration (CPU), ns
-- @column flops DOUBLE: FLOPs the op executed (2 per multiply-add); NULL when the trace lacks an argument the formula needs
-- @column flops_note VARCHAR: why flops is NULL (the missing argument), else NULL
-- @column dtype VARCHAR: first input tensor dtype as traced (c10::BFloat16, float …)
-- @column phase VARCHAR: forward, backward (inside an autograd node: gradients and activation recompute) or optimizer
-- @column tf32 BOOLEAN: an fp32 op that ran on TF32 tensor cores: a launched kernel named *tf32* / *s1688* or, for convolutions, cuDNN's allow_tf32 argument
-- @column winograd BOOLEAN: a launched kernel is a Winograd convolution (*winograd*: cuDNN's `…winograd…4x4_3x3`, `winogradForwardData4x4`): it does fewer multiplies than the convolution's FLOPs, so its speed may pass the peak with an exact count
-- @column kernels BIGINT: compute kernels launched inside the op (communication kernels excluded; 0 on CPU runs)
-- @column kernel_ns DOUBLE: summed duration of those kernels (GPU), ns
-- @column device_ns DOUBLE: time the work took: kernel_ns on GPU runs, dur_ns on CPU runs
-- @column achieved_flops_per_s DOUBLE: flops ÷ device_ns
-- @column work_ns BIGINT: where its work runs: the start of its first launched kernel (GPU), else the op's start — the time a window counts its FLOPs by, as it counts the kernels' time (`tracekit.metrics.windows.ops_in`)
CREATE OR REPLACE VIEW op_flops AS
WITH capture_calls AS (
    SELECT rank, tid, ts_ns, regexp_matches(name::VARCHAR, 'StreamBeginCapture') AS begins
    FROM events
    WHERE kind = 'runtime' AND contains(name, 'Capture')  -- a cheap filter before the regex
      AND regexp_matches(name::VARCHAR, '^(cuda|hip)Stream(BeginCapture|EndCapture)')
),
captures AS (  -- each begin to the first end after it (levels.compute:capture_spans)
    SELECT b.rank, b.tid, b.ts_ns AS start_ns,
           coalesce(min(e.ts_ns), 9223372036854775807) AS end_ns
    FROM capture_calls b LEFT JOIN capture_calls e
      ON e.rank = b.rank AND e.tid = b.tid AND NOT e.begins AND e.ts_ns > b.ts_ns
    WHERE b.begins
    GROUP BY ALL
),
o AS (
    SELECT row_number() OVER () AS op_id, *, ts_ns + dur_ns AS end_ns FROM _ops x
    WHERE innermost AND NOT EXISTS (
        SELECT 1 FROM captures c
        WHERE c.rank = x.rank AND c.tid = x.tid AND x.ts_ns BETWEEN c.start_ns AND c.end_ns
    )
),
-- the compute kernels, their names tested once per name (not once per launch: a name
-- is hundreds of characters, and launches are tens of thousands)
kn AS (
    SELECT kc.rank, kc.name, t.tf32, t.winograd
    FROM kernel_classes kc
    JOIN (SELECT name, regexp_matches(name, 'tf32|s1688', 'i') AS tf32,
                 regexp_matches(name, 'winograd', 'i') AS winograd
          FROM (SELECT DISTINCT name FROM kernel_classes WHERE category = 'compute')) t
      USING (name)
    WHERE kc.category = 'compute'
),
launches AS (
    SELECT r.rank, r.tid, r.ts_ns AS launch_ns, k.ts_ns AS k_ts, k.dur_ns AS k_dur,
           kn.tf32, kn.winograd
    FROM events r JOIN events k ON k.rank = r.rank AND k.correlation = r.correlation
    JOIN kn ON kn.rank = k.rank AND kn.name = k.name::VARCHAR
    WHERE r.kind = 'runtime' AND k.kind = 'kernel'
),
-- each launch to the op it ran inside: innermost ops on a thread never overlap (an op
-- inside another is not innermost), so that op is the last one starting at or before the
-- launch, when it has not ended (one ASOF lookup per launch, not a range join)
inside AS (
    SELECT a.op_id, l.k_ts, l.k_dur, l.tf32, l.winograd
    FROM launches l ASOF JOIN o a ON a.rank = l.rank AND a.tid = l.tid AND l.launch_ns >= a.ts_ns
    WHERE l.launch_ns <= a.end_ns
),
k AS (
    SELECT o.op_id, count(l.k_dur) AS kernels, sum(l.k_dur) AS kernel_ns, min(l.k_ts) AS k_first,
           coalesce(bool_or(l.tf32), false) AS tf32_kernel,
           coalesce(bool_or(l.winograd), false) AS winograd
    FROM o LEFT JOIN inside l USING (op_id)
    GROUP BY o.op_id
)
SELECT o.rank, o.tid, o.name, o.ts_ns, o.dur_ns, o.flops, o.flops_note, o.dtype, o.phase,
       (o.tf32_arg OR k.tf32_kernel) AND lower(coalesce(o.dtype, '')) IN ('float', 'c10::float')
           AS tf32,
       k.winograd, coalesce(k.kernels, 0) AS kernels, k.kernel_ns,
       CASE WHEN r.has_device_events THEN k.kernel_ns ELSE o.dur_ns END AS device_ns,
       o.flops / nullif(CASE WHEN r.has_device_events THEN k.kernel_ns ELSE o.dur_ns END, 0)
           * 1e9 AS achieved_flops_per_s,
       coalesce(k.k_first, o.ts_ns) AS work_ns
FROM o JOIN k USING (op_id) JOIN rank_info r ON r.rank = o.rank;
