-- @include base.tables
-- @view step_host
-- The step model's host nodes, rank-local and window-free (built at ingest for a run the
-- step model can cover, `tracekit.ingest.steptables`; else by the store from the events): the
-- top-level events of each thread over the whole trace, each with the blocking call
-- inside it that started last. An event (a CPU op or runtime call; ProfilerStep#N
-- operators of old traces left out) is top-level where it starts at or after the end
-- of every earlier event of its thread, in the order `rank, tid, ts_ns, end_ns DESC`
-- (the outer of two that start together first; of twins, same start and end, the CPU op
-- first, then by name); the events after it, up to the next
-- top-level one, are inside it. `stepmodel.graph:host` clips them to the analysed
-- windows; where a window may cut through a group (`cover_end_ns`) the graph groups that
-- rank's events of the window again (tracekit/stepmodel/rows.py). One sort per thread
-- (its order, running cover and last end in one window), then the top-level events and
-- the blocking calls alone are grouped: two sorts of every host event took twice as long.
-- @column rank INTEGER: global rank
-- @column tid BIGINT: thread id
-- @column k BIGINT: the event's place in its thread's order (ties of start and end kept as grouped)
-- @column ts_ns BIGINT: start, ns since the epoch
-- @column end_ns BIGINT: end, ns since the epoch
-- @column name VARCHAR: event name
-- @column cover_end_ns BIGINT: the latest end of the events of its group (itself and those inside it)
-- @column sync_name VARCHAR: the blocking call of its group that comes last (a runtime call that blocks the host until device work is done: `cudaDeviceSynchronize`, `cudaStreamSynchronize`, `cudaEventSynchronize` and their `hip` names, a blocking copy such as `cudaMemcpy`, or any call a Kineto `cuda_sync` event names by its correlation); null without one
-- @column sync_ts_ns BIGINT: that call's start (null without one)
-- @column sync_end_ns BIGINT: that call's end (null without one)
-- @column sync_stream BIGINT: the stream waited for, of the last blocking call of its group for which a `Stream Sync` event names one (null: none names one)
CREATE OR REPLACE VIEW step_host AS
WITH sc AS (  -- the calls Kineto's cuda_sync events name (recorded with sync events only)
    SELECT rank, correlation, any_value(CASE WHEN name::VARCHAR = 'Stream Sync' THEN stream END)
           AS stream
    FROM events WHERE kind = 'sync' AND correlation IS NOT NULL
      AND name::VARCHAR <> 'Stream Wait Event'
    GROUP BY rank, correlation
), h AS (
    SELECT e.rank, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns, e.name::VARCHAR AS name,
           e.kind = 'runtime' AS is_runtime,
           e.kind = 'runtime' AND (sc.correlation IS NOT NULL
               OR suffix(e.name::VARCHAR, 'Synchronize')
               OR (contains(e.name::VARCHAR, 'Memcpy') AND regexp_matches(e.name::VARCHAR,
                   '^(cuda|hip|cu)Memcpy(2D|3D|Peer|DtoH|DtoD|HtoD)?(WithStream|_v2)?$')))
               AS is_sync,
           sc.stream AS sync_stream
    FROM events e
    LEFT JOIN sc ON sc.rank = e.rank AND sc.correlation = e.correlation AND e.kind = 'runtime'
    WHERE e.kind IN ('cpu_op', 'runtime')
      AND NOT prefix(e.name::VARCHAR, 'ProfilerStep#')
), o AS (  -- one sort per thread: its order, its cover so far, its last end
    SELECT rank, tid, ts_ns, end_ns, name, is_sync, sync_stream,
           row_number() OVER (t) AS k,
           max(end_ns) OVER (t ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS cover,
           max(end_ns) OVER (t ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
               AS thread_end
    FROM h
    -- twins (same start and end): the CPU op before the runtime call it wraps, then by name
    WINDOW t AS (PARTITION BY rank, tid ORDER BY ts_ns, end_ns DESC, is_runtime, name)
), f AS (  -- the top-level events and the blocking calls alone, grouped
    SELECT *, sum(top::INTEGER) OVER (PARTITION BY rank, tid ORDER BY k) AS grp,
           -- a group's cover: the next top-level event's cover so far (covers only grow)
           coalesce(min(CASE WHEN top THEN cover END)
                        OVER (PARTITION BY rank, tid ORDER BY k
                              ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING),
                    thread_end) AS cover_end
    FROM (SELECT *, cover IS NULL OR ts_ns >= cover AS top FROM o) x
    WHERE top OR is_sync
)
SELECT rank, tid, min(k) AS k, arg_min(ts_ns, k) AS ts_ns, arg_min(end_ns, k) AS end_ns,
       arg_min(name::VARCHAR, k) AS name, arg_min(cover_end, k) AS cover_end_ns,
       arg_max(name::VARCHAR, k) FILTER (WHERE is_sync) AS sync_name,
       arg_max(ts_ns, k) FILTER (WHERE is_sync) AS sync_ts_ns,
       arg_max(end_ns, k) FILTER (WHERE is_sync) AS sync_end_ns,
       arg_max(sync_stream, k) FILTER (WHERE is_sync AND sync_stream IS NOT NULL) AS sync_stream
FROM f
GROUP BY rank, tid, grp;
