-- @include base.tables
-- @view device_activity
-- Work on each rank's device, classified by one rule:
--   GPU run: kernels that kernel_classes marks communication (tracekit/commkernels.py:
--            NCCL/RCCL, DeepEP, NVSHMEM, symmetric memory, custom all-reduce,
--            userbuffers, and the user's --comm-kernel / comm_kernels patterns) are
--            communication; memcpy and memset events are memcpy / memset; every other
--            kernel is compute.
--   CPU run (no device events in the trace): the host is the device. gloo:* execution
--            spans are communication (gloo:send / gloo:recv too: they sit on the calling
--            thread but are in-flight isend/irecv transfers while the thread runs on, as
--            torch.distributed.pipelining does); cpu_op events are compute; the c10d /
--            _c10d_functional collective ops and record_param_comms are host_wait: the
--            thread is issuing or waiting for communication, and metrics take that time
--            out of compute even where an enclosing op (autograd, DTensor dispatch) spans it.
--   A GPU run's gloo:* spans (a gloo process group, on CUDA tensors or CPU-side groups)
--            are communication too: the collective is in flight on gloo's threads, and its
--            result reaches the device only after it (the device idles meanwhile unless
--            compute overlaps it); without them a GPU run on gloo read 0% communication.
-- Overlapping events are allowed; metrics take unions of intervals.
-- @column rank INTEGER: global rank
-- @column category VARCHAR: compute, communication, memcpy, memset or host_wait (CPU runs)
-- @column kind VARCHAR: event kind (kernel, memcpy, memset, comm_thread, cpu_op)
-- @column name VARCHAR: event name
-- @column lane BIGINT: stream (GPU) or thread (CPU) the work ran on
-- @column correlation BIGINT: runtime correlation id (GPU)
-- @column family VARCHAR: library of a communication kernel (nccl, deepep, nvshmem, symm_mem, custom_all_reduce, userbuffers, user); gloo for gloo spans; null otherwise
-- @column ts_ns BIGINT: start, ns since the epoch
-- @column dur_ns BIGINT: duration, ns
-- @column end_ns BIGINT: end, ns since the epoch
-- @column launch_ns BIGINT: start of the runtime call that launched it (same correlation; the earliest if several), GPU runs; null when the trace has none
CREATE OR REPLACE VIEW device_activity AS
SELECT e.rank,
       CASE WHEN e.kind = 'kernel' THEN coalesce(kc.category, 'compute')
            ELSE e.kind::VARCHAR END AS category,
       e.kind::VARCHAR AS kind, e.name::VARCHAR AS name, coalesce(e.stream, e.tid) AS lane,
       e.correlation, e.ts_ns, e.dur_ns, e.ts_ns + e.dur_ns AS end_ns, kc.family,
       l.launch_ns
FROM events e
LEFT JOIN kernel_classes kc
       ON e.kind = 'kernel' AND kc.rank = e.rank AND kc.name = e.name::VARCHAR
LEFT JOIN (SELECT rank, correlation, min(ts_ns) AS launch_ns FROM events
           WHERE kind = 'runtime' AND correlation IS NOT NULL GROUP BY rank, correlation) l
       ON l.rank = e.rank AND l.correlation = e.correlation
WHERE e.kind IN ('kernel', 'memcpy', 'memset')
UNION ALL
SELECT e.rank,
       CASE WHEN e.kind = 'comm_thread' THEN 'communication'
            WHEN prefix(e.name::VARCHAR, 'c10d::')
              OR prefix(e.name::VARCHAR, '_c10d_functional::')
              OR e.name::VARCHAR = 'record_param_comms' THEN 'host_wait'
            ELSE 'compute' END,
       e.kind::VARCHAR, e.name::VARCHAR, e.tid, e.correlation, e.ts_ns, e.dur_ns,
       e.ts_ns + e.dur_ns, CASE WHEN e.kind = 'comm_thread' THEN 'gloo' END, NULL::BIGINT
FROM events e
JOIN rank_info r ON r.rank = e.rank
WHERE (e.kind IN ('comm_thread', 'cpu_op') AND NOT r.has_device_events)
   OR (e.kind = 'comm_thread' AND r.has_device_events);
