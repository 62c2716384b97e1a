-- @view op_flops
-- One row per counted op (GEMM, convolution, attention; forward and backward) that is
-- the innermost counted op on its thread, with its FLOPs from the shapes
-- (tracekit/model/flops.py) and the device time of the kernels it launched.
-- @column rank: global rank
-- @column tid: thread the op ran on
-- @column name: aten op name
-- @column ts_ns: op start (CPU), ns since the epoch
-- @column dur_ns: op duration (CPU), ns
-- @column flops: FLOPs of the op (2 per multiply-add)
-- @column dtype: first input tensor dtype as traced (c10::BFloat16, float …)
-- @column kernels: compute kernels launched inside the op (NCCL kernels excluded; 0 on CPU runs)
-- @column kernel_ns: summed duration of those kernels (GPU), ns
-- @column device_ns: time the work took: kernel_ns on GPU runs, dur_ns on CPU runs
-- @column achieved_flops_per_s: flops ÷ device_ns
CREATE OR REPLACE VIEW op_flops AS
WITH o AS (
    SELECT row_number() OVER () AS op_id, *, ts_ns + dur_ns AS end_ns FROM _ops
    WHERE flops IS NOT NULL
),
nested AS (  -- ops that contain another counted op on the same thread (DTensor, linear …)
    SELECT DISTINCT p.op_id FROM o p JOIN o c
      ON c.rank = p.rank AND c.tid = p.tid AND c.op_id <> p.op_id
     AND c.ts_ns >= p.ts_ns AND c.end_ns <= p.end_ns
     AND (c.ts_ns > p.ts_ns OR c.end_ns < p.end_ns OR c.op_id > p.op_id)
),
inner_ops AS (SELECT * FROM o WHERE op_id NOT IN (SELECT op_id FROM nested)),
launches AS (
    SELECT r.tid, r.ts_ns AS launch_ns, k.dur_ns AS k_dur
    FROM events r JOIN events k ON k.correlation = r.correlation
    WHERE r.kind = 'runtime' AND k.kind = 'kernel' AND NOT starts_with(k.name, 'nccl')
),
k AS (
    SELECT i.op_id, count(l.k_dur) AS kernels, sum(l.k_dur) AS kernel_ns
    FROM inner_ops i LEFT JOIN launches l
      ON l.tid = i.tid AND l.launch_ns >= i.ts_ns AND l.launch_ns <= i.end_ns
    GROUP BY i.op_id
)
SELECT i.rank, i.tid, i.name, i.ts_ns, i.dur_ns, i.flops, i.dtype,
       coalesce(k.kernels, 0) AS kernels, k.kernel_ns,
       CASE WHEN r.has_device_events THEN k.kernel_ns ELSE i.dur_ns END AS device_ns,
       i.flops / nullif(CASE WHEN r.has_device_events THEN k.kernel_ns ELSE i.dur_ns END, 0)
           * 1e9 AS achieved_flops_per_s
FROM inner_ops i JOIN k USING (op_id) JOIN rank_info r ON r.rank = i.rank;
