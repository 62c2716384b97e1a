-- @include base.tables
-- @include rank.steps
-- @include run.collectives
-- @include rank.step_device
-- @include rank.step_host
-- @include rank.step_marks
-- The step model's inputs (tracekit/stepmodel/graph.py builds the dependency graph from
-- them): host events, device work with its launch, collective rows, the steps.
-- Placeholder {windows}: rows (rank, wid, start_ns, end_ns, n), each rank's analysed window.

-- @query host
-- The top-level host events of each thread that start in the window (`step_host`, built
-- at ingest), in each thread's order, with the blocking call inside each. Exact where no
-- group of events crosses a window edge (`host_cut` names the ranks where one does:
-- their events are grouped again from `host_events`).
-- @column rank: global rank
-- @column tid: thread id
-- @column ts_ns: start, ns since the epoch
-- @column end_ns: end, ns since the epoch
-- @column name: event name
-- @column sync_name: the last blocking call inside it (null: none)
-- @column sync_ts_ns: its start
-- @column sync_end_ns: its end
-- @column sync_stream: the stream the last blocking call that names one waited for
WITH w AS ({windows})
SELECT h.rank, h.tid, h.ts_ns, h.end_ns, h.name, h.sync_name, h.sync_ts_ns, h.sync_end_ns,
       h.sync_stream
FROM step_host h JOIN w ON h.rank = w.rank
WHERE h.ts_ns >= w.start_ns AND h.ts_ns < w.end_ns
ORDER BY h.rank, h.tid, h.k

-- @query host_cut
-- The ranks where a group of host events (a top-level event and those inside it) may
-- cross an edge of the window: one that started before the window and covers its start,
-- or one that starts in it and ends at or after its end (events inside it may start
-- after the window). Grouped in the window alone, their events may group otherwise than
-- over the whole trace.
-- @column rank: global rank
WITH w AS ({windows})
SELECT DISTINCT h.rank
FROM step_host h JOIN w ON h.rank = w.rank
WHERE h.ts_ns < w.end_ns AND h.cover_end_ns > w.start_ns
  AND (h.ts_ns < w.start_ns OR h.cover_end_ns >= w.end_ns)
ORDER BY h.rank

-- @query host_events
-- The CPU ops and runtime calls of each thread that start in the window (stage/step
-- annotations and Python frames are left out), in each thread's time order, the outer
-- of two events that start together first, twins CPU op first then by name
-- (`ORDER BY rank, tid, ts_ns, end_ns DESC, kind = 'runtime', name`):
-- tracekit/stepmodel/rows.py `top_level` groups them into the top-level events the host
-- timeline is replayed in, each with the blocking sync that runs inside it. Read only
-- for the ranks `host_cut` names (the windows given are theirs).
-- @column rank: global rank
-- @column tid: thread id
-- @column ts_ns: start, ns since the epoch
-- @column end_ns: end, ns since the epoch
-- @column name: event name
-- @column is_sync: a runtime call that blocks the host until device work is done: `cudaDeviceSynchronize`, `cudaStreamSynchronize`, `cudaEventSynchronize` (and their `hip` names), a blocking copy (`cudaMemcpy`, `cudaMemcpyWithStream`, `hipMemcpy`, `hipMemcpyWithStream`, `hipMemcpyDtoH`, `cuMemcpyDtoH` …), or any call a Kineto `cuda_sync` event (`Stream Sync`, `Event Sync`, `Context Sync`) names by its correlation
-- @column sync_stream: the stream a blocking call waited for, where a `Stream Sync` event names it (null: any, or not a blocking call)
WITH w AS ({windows}),
sc AS (  -- the calls Kineto's cuda_sync events name (recorded with sync events only)
    SELECT rank, correlation, any_value(CASE WHEN name::VARCHAR = 'Stream Sync' THEN stream END)
           AS stream
    FROM events WHERE kind = 'sync' AND correlation IS NOT NULL
      AND name::VARCHAR <> 'Stream Wait Event'
    GROUP BY rank, correlation
)
SELECT e.rank, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns, e.name::VARCHAR AS name,
       e.kind = 'runtime' AND (sc.correlation IS NOT NULL OR regexp_matches(e.name::VARCHAR,
           'Synchronize$|^(cuda|hip|cu)Memcpy(2D|3D|Peer|DtoH|DtoD|HtoD)?(WithStream|_v2)?$'))
           AS is_sync,
       sc.stream AS sync_stream
FROM events e JOIN w ON e.rank = w.rank
LEFT JOIN sc ON sc.rank = e.rank AND sc.correlation = e.correlation AND e.kind = 'runtime'
WHERE e.kind IN ('cpu_op', 'runtime') AND e.ts_ns >= w.start_ns AND e.ts_ns < w.end_ns
  -- old traces record ProfilerStep#N as an operator: a step is not one host op
  AND NOT starts_with(e.name::VARCHAR, 'ProfilerStep#')
-- twins (same start and end): the CPU op before the runtime call it wraps, then by name,
-- so the node a twin pair is named after does not depend on DuckDB's sort
ORDER BY e.rank, e.tid, e.ts_ns, end_ns DESC, e.kind = 'runtime', name

-- @query input_spans
-- The data loader's fetches in each window: PyTorch's record_function around each batch
-- (`enumerate(DataLoader)#…__next__`, a CPU op in old traces, a user annotation since),
-- the spans `no-input-wait` takes the host time out of.
-- @column rank: global rank
-- @column ts_ns: start of the fetch, ns since the epoch
-- @column end_ns: its end, ns since the epoch
WITH w AS ({windows})
SELECT m.rank, m.ts_ns, m.end_ns
FROM step_marks m JOIN w ON m.rank = w.rank
WHERE m.what = 'input' AND m.ts_ns < w.end_ns AND m.end_ns > w.start_ns
ORDER BY m.rank, m.ts_ns

-- @query device
-- Device work (kernels, copies, memsets) and gloo worker-thread spans starting in the
-- window (`step_device`, built at ingest, with the runtime call that launched it) and,
-- for communication, its collective row.
-- @column rank: global rank
-- @column lane: stream (device) or worker thread (gloo)
-- @column ts_ns: start, ns since the epoch
-- @column end_ns: end, ns since the epoch
-- @column gloo: a gloo worker-thread span (else a kernel, copy or memset)
-- @column name: event name
-- @column comm: communication (a communication kernel or a gloo span)
-- @column launch_tid: thread of the launching runtime call (null when none)
-- @column launch_ts_ns: start of the launching runtime call (gloo: the issue op)
-- @column launch_end_ns: end of the launching runtime call (null for gloo)
-- @column coll: collective (all_reduce …) of a communication row
-- @column instance_key: cross-rank instance of a matched collective, or of a send and its recv (`p2p:SRC>DST:K`, the K-th of that pair of ranks in each trace, same bytes; where the peer is known: `collectives.peer`, or the other rank of a 2-rank group); null otherwise
-- @column bytes: nccl-tests size S of a collective, bytes
-- @column group_size: ranks in its group
-- @column launch_name: the launching runtime call where it ended at or after its work (a call that may have waited for it: a blocking copy's `cudaMemcpy` …); null otherwise and for gloo (the graph reads no other: most rows are `cudaLaunchKernel`, and a string per row costs its fetch)
WITH w AS ({windows}),
d AS (
    SELECT s.* FROM step_device s JOIN w ON s.rank = w.rank
    WHERE s.ts_ns >= w.start_ns AND s.ts_ns < w.end_ns
), p AS (  -- point-to-point rows whose peer is known: the trace's (`collectives.peer`),
          -- else the other rank of a 2-rank group
    SELECT rank, ts_ns, lane, bytes,
           CASE WHEN name = 'send' THEN rank ELSE _peer END AS src,
           CASE WHEN name = 'send' THEN _peer ELSE rank END AS dst,
           row_number() OVER (PARTITION BY rank, name, _peer ORDER BY ts_ns) AS k
    FROM (SELECT *, coalesce(peer,
                             CASE WHEN len(group_ranks) = 2 AND list_contains(group_ranks, rank)
                                  THEN group_ranks[1] + group_ranks[2] - rank END) AS _peer
          FROM collectives WHERE name IN ('send', 'recv'))
    WHERE _peer IS NOT NULL AND _peer <> rank
), pk AS (  -- the K-th send from SRC to DST and the K-th recv at DST from SRC
    SELECT rank, ts_ns, lane, 'p2p:' || src || '>' || dst || ':' || k AS key,
           count(*) OVER (PARTITION BY src, dst, k) AS n,
           min(bytes) OVER (PARTITION BY src, dst, k) = max(bytes) OVER (PARTITION BY src, dst, k)
               AS same_bytes
    FROM p
)
SELECT d.rank, d.lane, d.ts_ns, d.end_ns, d.kind = 'comm_thread' AS gloo, d.name, d.comm,
       d.launch_tid, coalesce(d.launch_ts_ns, c.issue_ts_ns) AS launch_ts_ns,
       d.launch_end_ns,
       c.name AS coll,
       CASE WHEN c.matched THEN c.instance_key
            WHEN pk.n = 2 AND pk.same_bytes THEN pk.key END AS instance_key,
       c.bytes, c.group_size,
       CASE WHEN d.end_ns <= d.launch_end_ns THEN d.launch_name END AS launch_name
FROM d
LEFT JOIN collectives c ON c.rank = d.rank AND c.ts_ns = d.ts_ns AND c.lane = d.lane
LEFT JOIN pk ON pk.rank = c.rank AND pk.ts_ns = c.ts_ns AND pk.lane = c.lane
ORDER BY d.rank, d.lane, d.ts_ns

-- @query steps
-- The ProfilerSteps inside each window, and the thread that records them.
-- @column rank: global rank
-- @column step: N of ProfilerStep#N
-- @column ts_ns: step start
-- @column end_ns: step end
-- @column tid: thread of the step annotation
WITH w AS ({windows})
SELECT s.rank, s.step, s.ts_ns, s.end_ns,
       (SELECT any_value(m.tid) FROM step_marks m
        WHERE m.rank = s.rank AND m.ts_ns = s.ts_ns AND m.what = 'step') AS tid
FROM steps s JOIN w ON s.rank = w.rank
WHERE s.ts_ns >= w.start_ns AND s.ts_ns < w.end_ns
ORDER BY s.rank, s.ts_ns

-- @query event_waits
-- Cross-stream waits the trace records (CUDA sync events, `enable_cuda_sync_events=True`):
-- each `Stream Wait Event` pairs the device work that must finish — the last work on
-- `wait_on_stream` launched before the `cudaEventRecord` call with that correlation — with
-- the next work on the waiting stream (its `stream`) starting at or after the event.
-- @column rank: global rank
-- @column src_lane: stream of the awaited work
-- @column src_ts_ns: start of the awaited work, ns since the epoch
-- @column dst_lane: the waiting stream
-- @column dst_ts_ns: start of the work that waited, ns since the epoch
WITH w AS ({windows}),
sw AS (
    SELECT e.rank, e.stream AS lane, e.ts_ns, e.wait_on_stream, e.wait_on_event_correlation
    FROM events e JOIN w ON e.rank = w.rank
    WHERE e.kind = 'sync' AND e.name::VARCHAR = 'Stream Wait Event'
      AND e.wait_on_stream IS NOT NULL AND e.wait_on_event_correlation IS NOT NULL
      AND e.stream IS NOT NULL AND e.ts_ns >= w.start_ns AND e.ts_ns < w.end_ns
), rec AS (
    SELECT r.rank, r.correlation, min(r.ts_ns) AS ts_ns FROM events r SEMI JOIN sw
      ON sw.rank = r.rank AND sw.wait_on_event_correlation = r.correlation
    WHERE r.kind = 'runtime' GROUP BY ALL
), dev AS (
    SELECT d.rank, d.stream AS lane, d.ts_ns, l.ts_ns AS launch_ns
    FROM events d JOIN events l ON l.rank = d.rank AND l.correlation = d.correlation
     AND l.kind = 'runtime'
    WHERE d.kind IN ('kernel', 'memcpy', 'memset') AND d.stream IS NOT NULL
), src AS (
    SELECT sw.rank, sw.lane, sw.ts_ns, sw.wait_on_stream AS src_lane,
           arg_max(dev.ts_ns, dev.launch_ns) AS src_ts_ns
    FROM sw JOIN rec ON rec.rank = sw.rank AND rec.correlation = sw.wait_on_event_correlation
    JOIN dev ON dev.rank = sw.rank AND dev.lane = sw.wait_on_stream AND dev.launch_ns < rec.ts_ns
    GROUP BY ALL
)
SELECT src.rank, src.src_lane, src.src_ts_ns, src.lane AS dst_lane,
       min(d.ts_ns) AS dst_ts_ns
FROM src JOIN events d ON d.rank = src.rank AND d.stream = src.lane AND d.ts_ns >= src.ts_ns
 AND d.kind IN ('kernel', 'memcpy', 'memset')
GROUP BY ALL
ORDER BY ALL

-- @query event_calls
-- The event calls of each thread in the window, in time order: `cudaEventRecord` (and
-- `hipEventRecord`, `…WithFlags`) and `cudaStreamWaitEvent` (`hipStreamWaitEvent`), from
-- which the graph pairs a stream's wait with the work recorded before it (without CUDA
-- sync events the trace names neither stream).
-- @column rank: global rank
-- @column tid: thread id
-- @column ts_ns: start of the call, ns since the epoch
-- @column is_wait: a stream's wait for an event (else an event record)
WITH w AS ({windows})
SELECT m.rank, m.tid, m.ts_ns, m.what = 'wait' AS is_wait
FROM step_marks m JOIN w ON m.rank = w.rank
WHERE m.what IN ('record', 'wait') AND m.ts_ns >= w.start_ns AND m.ts_ns < w.end_ns
ORDER BY m.rank, m.ts_ns, m.tid
