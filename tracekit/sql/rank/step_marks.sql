-- @include base.tables
-- @view step_marks
-- The step model's small inputs, rank-local and window-free (built at ingest for a run the
-- step model can cover, `tracekit.ingest.steptables`; else by the store from the events): the
-- thread of each ProfilerStep annotation, the data loader's fetches (PyTorch's
-- record_function around each batch, `enumerate(DataLoader)#…__next__`: a CPU op in old
-- traces, a user annotation since) and the event calls (`cudaEventRecord`, `hipEventRecord`,
-- `…WithFlags`; `cudaStreamWaitEvent`, `hipStreamWaitEvent`), from which the graph pairs a
-- stream's wait with the work recorded before it. `stepmodel.graph` clips them to the
-- analysed windows.
-- @column rank INTEGER: global rank
-- @column what VARCHAR: step (a ProfilerStep#N annotation), input (a data loader fetch), record (an event record call) or wait (a stream's wait for an event)
-- @column tid BIGINT: thread id
-- @column ts_ns BIGINT: start, ns since the epoch
-- @column end_ns BIGINT: end, ns since the epoch
CREATE OR REPLACE VIEW step_marks AS
SELECT rank,
       CASE WHEN prefix(name::VARCHAR, 'ProfilerStep#') THEN 'step'
            WHEN prefix(name::VARCHAR, 'enumerate(DataLoader)') THEN 'input'
            WHEN contains(name::VARCHAR, 'StreamWaitEvent') THEN 'wait'
            ELSE 'record' END AS what,
       tid, ts_ns, ts_ns + dur_ns AS end_ns
FROM events
WHERE prefix(name::VARCHAR, 'ProfilerStep#')
   OR prefix(name::VARCHAR, 'enumerate(DataLoader)')
   OR (kind = 'runtime' AND contains(name::VARCHAR, 'Event')  -- cheap, before the regex
       AND regexp_matches(name::VARCHAR,
       '^(cuda|hip)(EventRecord|EventRecordWithFlags|StreamWaitEvent)$'));
