-- @view device_activity
-- Work on each rank's device, classified by one rule:
--   GPU run: kernels named nccl* (ncclKernel_*, ncclDevKernel_*) are communication;
--            memcpy and memset events are memcpy / memset; every other kernel is compute.
--   CPU run (no device events in the trace): the host is the device. gloo:* execution
--            spans are communication; cpu_op events are compute, except the c10d /
--            _c10d_functional collective ops and record_param_comms, which only issue
--            or wait for communication.
-- Overlapping events are allowed; metrics take unions of intervals.
-- @column rank: global rank
-- @column category: compute, communication, memcpy or memset
-- @column kind: event kind (kernel, memcpy, memset, comm_thread, cpu_op)
-- @column name: event name
-- @column lane: stream (GPU) or thread (CPU) the work ran on
-- @column correlation: runtime correlation id (GPU)
-- @column ts_ns: start, ns since the epoch
-- @column dur_ns: duration, ns
-- @column end_ns: end, ns since the epoch
CREATE OR REPLACE VIEW device_activity AS
SELECT e.rank,
       CASE WHEN e.kind = 'kernel' AND starts_with(e.name::VARCHAR, 'nccl') THEN 'communication'
            WHEN e.kind = 'kernel' THEN 'compute'
            ELSE e.kind::VARCHAR END AS category,
       e.kind::VARCHAR AS kind, e.name::VARCHAR AS name, coalesce(e.stream, e.tid) AS lane,
       e.correlation, e.ts_ns, e.dur_ns, e.ts_ns + e.dur_ns AS end_ns
FROM events e
WHERE e.kind IN ('kernel', 'memcpy', 'memset')
UNION ALL
SELECT e.rank,
       CASE WHEN e.kind = 'comm_thread' THEN 'communication' ELSE 'compute' END,
       e.kind::VARCHAR, e.name::VARCHAR, e.tid, e.correlation, e.ts_ns, e.dur_ns,
       e.ts_ns + e.dur_ns
FROM events e
JOIN rank_info r ON r.rank = e.rank AND NOT r.has_device_events
WHERE e.kind = 'comm_thread'
   OR (e.kind = 'cpu_op'
       AND NOT starts_with(e.name::VARCHAR, 'c10d::')
       AND NOT starts_with(e.name::VARCHAR, '_c10d_functional::')
       AND e.name::VARCHAR <> 'record_param_comms');
