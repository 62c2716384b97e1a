-- @include base.tables
-- @view step_device
-- The step model's device rows, rank-local and window-free (built at ingest for a run the
-- step model can cover, `tracekit.ingest.steptables`; else by the store from the events):
-- every kernel, copy and memset with the runtime call that launched it (same
-- correlation), and every gloo worker-thread span. `stepmodel.graph:device` clips them
-- to the analysed windows and joins each communication row to its collective (a
-- cross-rank matching); before, the recompute found each launch by a scan of every
-- runtime call of the run.
-- @column rank INTEGER: global rank
-- @column lane BIGINT: stream (device) or worker thread (gloo)
-- @column ts_ns BIGINT: start, ns since the epoch
-- @column end_ns BIGINT: end, ns since the epoch
-- @column kind VARCHAR: kernel, memcpy, memset or comm_thread
-- @column name VARCHAR: event name
-- @column comm BOOLEAN: communication (a communication kernel or a gloo span)
-- @column launch_tid BIGINT: thread of the launching runtime call (null when none, and for gloo)
-- @column launch_ts_ns BIGINT: start of the launching runtime call (null when none, and for gloo)
-- @column launch_end_ns BIGINT: end of the launching runtime call (null when none, and for gloo)
-- @column launch_name VARCHAR: the launching runtime call (`cudaLaunchKernel`, `cudaGraphLaunch` — a graph's kernels carry its launch's correlation —, `hipMemcpyWithStream` …; null when none, and for gloo)
CREATE OR REPLACE VIEW step_device AS
WITH d AS (
    SELECT e.rank, coalesce(e.stream, e.tid) AS lane, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
           e.kind, e.name::VARCHAR AS name, e.correlation
    FROM events e
    WHERE e.kind IN ('kernel', 'memcpy', 'memset', 'comm_thread')
), r AS (
    -- the launches of device work only (not every runtime call of the rank)
    SELECT rank, correlation, any_value(tid) AS tid, min(ts_ns) AS ts_ns,
           max(ts_ns + dur_ns) AS end_ns, arg_min(name, ts_ns)::VARCHAR AS name FROM events
    WHERE kind = 'runtime' AND correlation IS NOT NULL
      AND (rank, correlation) IN (SELECT rank, correlation FROM d WHERE kind <> 'comm_thread')
    GROUP BY rank, correlation
)
SELECT d.rank, d.lane, d.ts_ns, d.end_ns, d.kind, d.name,
       (d.kind = 'comm_thread' OR coalesce(kc.category = 'communication', false)) AS comm,
       r.tid AS launch_tid, r.ts_ns AS launch_ts_ns, r.end_ns AS launch_end_ns,
       r.name AS launch_name
FROM d
LEFT JOIN r ON r.rank = d.rank AND r.correlation = d.correlation AND d.kind <> 'comm_thread'
LEFT JOIN kernel_classes kc ON kc.rank = d.rank AND kc.name = d.name;
