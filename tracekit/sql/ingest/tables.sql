-- @include base.tables
-- How ingest builds the base tables (base.tables) from one trace, or a batch of traces,
-- in DuckDB (tracekit/ingest/tables.py, tracekit/ingest/runner.py). The trace JSON is read
-- into table `raw` (ph, cat, name, pid, tid, ts, dur, id, args: the kept `args` keys);
-- each base table is then a query over `raw`.
--
-- What depends on the trace comes in as placeholders, built by Python:
--   {rank}   the rank: a literal for one trace, an expression of the row's file (`_f`)
--            when `raw` holds a batch;
--   {ts_ns}  the event's start in ns since the epoch (its ts in µs plus the base time);
--   {pid}, {tid}  the ids as integers (numeric strings and "stream 7" too);
--   {ts_ok}, {dur_ok}  the predicates of a usable ts and dur;
--   an `args` key's value: its typed field, or its JSON cast with TRY_CAST when the
--   trace had to be read with every arg as JSON (`raw` then holds JSON values).

-- @query read
-- Table `raw` from the file {path} holding the `traceEvents` array, with the columns
-- {columns} (`tables.raw_columns`).
CREATE OR REPLACE TABLE raw AS SELECT * FROM read_json(
{path}, format = 'array',
columns = {columns}, maximum_object_size = 268435456)

-- @query read_batch
-- Table `raw` from the files {paths} (each a trace's `traceEvents` array, named
-- `.<batch>.<n>.events.tmp`), each row with the number `_f` of its file. A batched file
-- holds less than 16 MiB of JSON (`batchplan.SMALL_BYTES`), so no event of it is bigger
-- than the reader's 16 MiB (an odd one fails the joint read: the batch is then read file
-- by file, at 256 MiB); 256 MiB here took a new buffer per file, 25,000 page faults and
-- 0.05 s of CPU per 128 small ranks.
CREATE OR REPLACE TABLE raw AS SELECT * EXCLUDE (filename),
TRY_CAST(split_part(filename, '.', -3) AS INTEGER) AS _f FROM read_json(
[{paths}], format = 'array', columns = {columns},
maximum_object_size = 16777216, filename = true)

-- @query read_lenient
-- Table `raw` from {path} event by event: a field of the wrong type becomes NULL, an
-- element that is not an object has a NULL `ph`. {args}: the kept `args` keys as JSON.
CREATE OR REPLACE TABLE raw AS
SELECT CASE WHEN json_type(j->'ph') = 'VARCHAR' THEN j->>'ph' END AS ph,
       CASE WHEN json_type(j->'cat') IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE') THEN j->>'cat' END AS cat,
       CASE WHEN json_type(j->'name') IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE') THEN j->>'name' END AS name,
       CASE WHEN json_type(j->'pid') IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE') THEN j->>'pid' END AS pid,
       CASE WHEN json_type(j->'tid') IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE') THEN j->>'tid' END AS tid,
       CASE WHEN json_type(j->'ts') IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE') THEN TRY_CAST(j->>'ts' AS DOUBLE) END AS ts,
       CASE WHEN json_type(j->'dur') IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE') THEN TRY_CAST(j->>'dur' AS DOUBLE) END AS dur,
       CASE WHEN json_type(j->'id') IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE') THEN j->>'id' END AS id,
       struct_pack({args}) AS args
FROM (SELECT json AS j FROM read_json_objects({path}, format = 'array',
      maximum_object_size = 268435456))

-- @query events_per_file
-- Events of each file of a batch's `raw` (a table of ingest only: the columns are left
-- untyped, as no opened run can describe them).
-- @column _f: the file's number
-- @column events: its events
SELECT _f, count(*) AS events FROM raw GROUP BY _f

-- @query skipped
-- The events of `raw` the tables leave out, by reason, for each value of {part} (the
-- file of each event when `raw` holds several, else 0). {dur_max}: the longest dur kept
-- (µs); {device_cat}, {host_cat}: the categories of device events tracekit does not
-- model, and of their host-side calls (which are kept); {modeled}: the categories
-- tracekit models (`tables.CAT_KIND`), as Kineto spells them: none is such a device
-- category, so the regular expressions skip them (they were half of this query's CPU).
-- @column part: the value of {part}
-- @column reason VARCHAR: why the events were left out
-- @column n BIGINT: how many
SELECT part, reason, count(*) AS n FROM (SELECT {part} AS part, CASE
        WHEN ph IS NULL THEN 'not an event object, or no ph'
        WHEN (ph IN ('X', 's', 'f', 't') OR (ph = 'i' AND name = '[memory]')) AND ts IS NULL
            THEN 'ts missing or not a number'
        WHEN (ph IN ('X', 's', 'f', 't') OR (ph = 'i' AND name = '[memory]')) AND NOT {ts_ok}
            THEN 'ts not finite or out of range'
        WHEN ph = 'X' AND dur IS NULL THEN 'dur missing or not a number'
        WHEN ph = 'X' AND NOT isfinite(dur) THEN 'dur not finite'
        WHEN ph = 'X' AND dur < 0 THEN 'negative dur'
        WHEN ph = 'X' AND dur > {dur_max} THEN 'dur longer than a day'
        WHEN ph = 'X' AND cat NOT IN {modeled} AND regexp_matches(lower(cat), {device_cat})
             AND NOT regexp_matches(lower(cat), {host_cat})
            THEN 'device events of a kind tracekit does not model (' || lower(cat) || ')'
        END AS reason FROM raw) WHERE reason IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2

-- @query events
-- The `events` rows (base.tables) of `raw`: its complete (`ph: X`) events with a usable
-- ts and dur. {kind}: Kineto's category → tracekit's kind (`tables.CAT_KIND`); every other
-- placeholder but {rank}, {pid}, {tid}, {ts_ns}, {ts_ok}, {dur_ok} reads the `args` key
-- of the column it names ({bandwidth}: "memory bandwidth (GB/s)", a copy's size being its
-- bandwidth × duration).
SELECT {rank}::INTEGER AS rank,
       {kind} AS kind,
       -- a name that is null or not a string (read as NULL) is the empty string: every
       -- table, figure and report row below carries names as strings
       cat, coalesce(name, '') AS name,
       {pid} AS pid, {tid} AS tid,
       {ts_ns} AS ts_ns,
       round(dur * 1000)::BIGINT AS dur_ns,
       {correlation} AS correlation,
       {external_id} AS external_id,
       {device} AS device,
       {stream} AS stream,
       TRY_CAST(round({bandwidth} * dur * 1000) AS BIGINT) AS bytes,
       {coll_name} AS coll_name,
       {in_nelems} AS in_nelems,
       {out_nelems} AS out_nelems,
       {in_split} AS in_split,
       {out_split} AS out_split,
       {group_size} AS group_size,
       {dtype} AS dtype,
       {pg_name} AS pg_name,
       {pg_desc} AS pg_desc,
       {pg_ranks} AS pg_ranks,
       {seq} AS seq,
       {input_dims} AS input_dims,
       {input_types} AS input_types,
       {concrete_inputs} AS concrete_inputs,
       {wait_on_stream} AS wait_on_stream,
       {wait_on_event_correlation} AS wait_on_event_correlation,
       {comm_rank} AS comm_rank
FROM raw WHERE ph = 'X' AND {ts_ok} AND {dur_ok}

-- @query flows
-- The `flows` rows (base.tables) of `raw`: flow endpoints (`ph: s/f/t`) with a usable ts.
SELECT {rank}::INTEGER AS rank, TRY_CAST(id AS BIGINT) AS flow_id, cat, ph AS phase,
       {pid} AS pid, {tid} AS tid, {ts_ns} AS ts_ns
FROM raw WHERE ph IN ('s', 'f', 't') AND {ts_ok}

-- @query memory
-- The `memory` rows (base.tables) of `raw`: `[memory]` instants with a usable ts; the
-- other placeholders read the `args` key of the column they name.
SELECT {rank}::INTEGER AS rank, {ts_ns} AS ts_ns,
       {pid} AS pid, {tid} AS tid,
       {device_type} AS device_type, {device_id} AS device_id,
       {addr} AS addr, {bytes} AS bytes,
       {total_allocated} AS total_allocated, {total_reserved} AS total_reserved
FROM raw WHERE ph = 'i' AND name = '[memory]' AND {ts_ok}

-- @query threads
-- The `threads` rows (base.tables) of `raw`: the latest thread or process name per (pid,
-- tid), and process labels ("GPU 0", "CPU"). {name_arg}, {labels_arg}: args "name" and
-- "labels".
SELECT {rank}::INTEGER AS rank, {pid} AS pid,
       CASE WHEN name = 'thread_name' THEN {tid} END AS tid,
       CASE name WHEN 'thread_name' THEN 'thread' WHEN 'process_name' THEN 'process'
                 ELSE 'labels' END AS what,
       arg_max(coalesce({name_arg}, {labels_arg}), coalesce(ts, 0)) AS name
FROM raw
WHERE ph = 'M' AND name IN ('thread_name', 'process_name', 'process_labels')
GROUP BY ALL

-- @query merged_ranks
-- The ranks a merged multi-rank file names in its process names ({name_arg}: args
-- "name"; {pattern}: the process-name pattern, group 1 the rank).
-- @column rank INTEGER: a rank of the file
SELECT DISTINCT TRY_CAST(regexp_extract({name_arg}, {pattern}, 1) AS INT) AS rank
FROM raw WHERE ph = 'M' AND name = 'process_name'
  AND regexp_matches({name_arg}, {pattern})

-- @query pid_ranks
-- Table `_pid_rank` of a merged file: the rank each process belongs to, by its name.
CREATE OR REPLACE TABLE _pid_rank AS
SELECT pid, any_value(TRY_CAST(regexp_extract({name_arg}, {pattern}, 1)
                               AS INT)) AS rank
FROM raw WHERE ph = 'M' AND name = 'process_name'
  AND regexp_matches({name_arg}, {pattern})
GROUP BY pid

-- @query merged_rank
-- One rank's raw events out of a merged file (`_raw_all`): by `args.rank`, else by the
-- process the event belongs to; pids lose the rank's offset. {rank}, {offset} (rank ×
-- {pid_offset}): integer literals.
SELECT r.* REPLACE (
    CASE WHEN {rank} > 0 AND TRY_CAST(r.pid AS BIGINT) >= {offset}
         THEN (TRY_CAST(r.pid AS BIGINT) - {offset})::VARCHAR ELSE r.pid END AS pid)
FROM _raw_all r LEFT JOIN _pid_rank p ON p.pid = r.pid
WHERE coalesce(TRY_CAST(r.args."rank" AS BIGINT), p.rank,
               TRY_CAST(TRY_CAST(r.pid AS BIGINT) // {pid_offset} AS INT)) = {rank}

-- @query rank_stats
-- Per rank of `events`: what rank_info reads from its events.
-- @column rank INTEGER: global rank
-- @column device BIGINT: its most used device
-- @column first_ns BIGINT: its first event's start, ns since the epoch
-- @column last_ns BIGINT: its last event's end, ns since the epoch
-- @column events BIGINT: its complete events
-- @column has_device_events BOOLEAN: a kernel, memcpy or memset among them
SELECT rank, mode(device) AS device, min(ts_ns) AS first_ns, max(ts_ns + dur_ns) AS last_ns,
       count(*) AS events,
       count(*) FILTER (kind IN ('kernel', 'memcpy', 'memset')) > 0 AS has_device_events
FROM events GROUP BY rank
