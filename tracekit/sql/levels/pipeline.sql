-- @include base.tables
-- @include rank.steps
-- @include run.collectives
-- Pipeline parallelism: what the scaling level reads to detect a pipeline and time it.

-- @query stage_labels
-- Every stage label torch (or tracekit's jobs) emits: `PP:{stage}{F|B|I|W}{microbatch}`
-- (multi-stage runtime schedules) and `Forward i` / `Backward i` (ScheduleGPipe).
-- @column rank: global rank
-- @column name: the label
SELECT rank, name::VARCHAR AS name FROM events
WHERE kind IN ('user_annotation', 'gpu_annotation')
  AND (starts_with(name::VARCHAR, 'PP:') OR starts_with(name::VARCHAR, 'Forward ')
       OR starts_with(name::VARCHAR, 'Backward '))

-- @query pp_group_size
-- The size of the `mesh_pp` process group, when a device mesh names one.
-- @column pp: ranks in the pipeline group (null without one)
SELECT max(pg_size) AS pp FROM process_groups WHERE pg_desc = 'mesh_pp'

-- @query p2p_in_windows
-- The sends and receives that start in the analysed windows, in order per rank.
-- Placeholder {rows}: collective rows that start in a window (`windows.starting_in`).
-- @column rank: global rank
-- @column name: send or recv
-- @column ts_ns: start, ns since the epoch
SELECT rank, name, ts_ns FROM ({rows}) WHERE name IN ('send', 'recv') ORDER BY rank, ts_ns

-- @query non_p2p_count
-- Collectives other than point-to-point and barriers: a pipeline's p2p carries the step.
-- @column n: how many
SELECT count(*) AS n FROM collectives WHERE name NOT IN ('send', 'recv', 'barrier')

-- @query stage_operations
-- Each stage operation (a `PP:…` or `Forward i` / `Backward i` label) that starts in an
-- analysed window, with the compute inside it and the step it belongs to.
-- Placeholders {labels}: label events starting in a window; {hidden}: those rows (as
-- rank, name, s, e) with `hidden`, their part under compute.
-- @column rank: global rank
-- @column name: the label
-- @column s: start, ns since the epoch
-- @column e: end, ns since the epoch
-- @column comp_ns: compute inside the operation, ns
-- @column step: the ProfilerStep it starts in
WITH lab AS (
    SELECT rank, name::VARCHAR AS name, ts_ns AS s, ts_ns + dur_ns AS e FROM ({labels})
    WHERE kind IN ('user_annotation', 'gpu_annotation')
      AND (regexp_matches(name::VARCHAR, '^PP:[0-9]+[FBIW][0-9]+$')
           OR regexp_matches(name::VARCHAR, '^(Forward|Backward) [0-9]+$'))
),
inside AS ({hidden})
SELECT i.rank, i.name, i.s, i.e, i.hidden AS comp_ns, st.step
FROM inside i JOIN steps st ON st.rank = i.rank AND i.s >= st.ts_ns AND i.s < st.end_ns
ORDER BY i.s

-- @query operation_host_ops
-- The host ops inside each stage operation of a CPU run (ops on the label's own thread,
-- starting inside it), outermost first where two start together, for the microbatch
-- what-if's split of an operation into work and per-op dispatch.
-- Placeholder {labels}: label events starting in a window (`windows.starting_in`).
-- @column rank: global rank
-- @column label: the stage label
-- @column label_ts_ns: the label's start, ns since the epoch
-- @column name: the op
-- @column ts_ns: the op's start, ns since the epoch
-- @column dur_ns: the op's duration, ns
WITH lab AS (
    SELECT rank, tid, name::VARCHAR AS label, ts_ns AS s, dur_ns AS d FROM ({labels})
    WHERE kind = 'user_annotation'
      AND (regexp_matches(name::VARCHAR, '^PP:[0-9]+[FBIW][0-9]+$')
           OR regexp_matches(name::VARCHAR, '^(Forward|Backward) [0-9]+$'))
)
SELECT l.rank, l.label, l.s AS label_ts_ns, o.name::VARCHAR AS name, o.ts_ns, o.dur_ns
FROM lab l JOIN events o
  ON o.rank = l.rank AND o.tid = l.tid AND o.kind = 'cpu_op'
 AND o.ts_ns >= l.s AND o.ts_ns < l.s + l.d
ORDER BY l.rank, l.s, o.ts_ns, o.dur_ns DESC

-- @query dispatch_ns
-- The median duration of the view ops (no data touched: torch's "Tensor Views") that
-- start in the analysed windows: what one op's dispatch costs on this host.
-- Placeholders {ops}: events starting in a window; {names}: the view ops, as SQL strings.
-- @column ns: the median, ns (null without view ops)
SELECT median(dur_ns) AS ns FROM ({ops})
WHERE kind = 'cpu_op' AND dur_ns > 0 AND name IN ({names})
