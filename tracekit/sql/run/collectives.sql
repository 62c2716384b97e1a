-- @include base.tables
-- @view collectives
-- One row per collective instance per rank, any backend (see tracekit/collectives.py for
-- how communication kernels and gloo spans become rows), matched across ranks:
--   by Seq: where the row has a sequence number and a process group name, the instance is
--     (process group, collective, Seq) — exact, a collective missing on one rank leaves
--     only that instance unmatched;
--   else by occurrence: the n-th (process group, collective, size) on each rank (all_to_all
--     leaves the size out: uneven splits give each rank its own). A collective missing on
--     one rank shifts the later occurrences of that rank; such a pairing is refused
--     because a synchronizing collective's spans (all_reduce, all_gather,
--     reduce_scatter, all_to_all, barrier) must overlap on every rank — no rank finishes
--     before the last one arrives: instances whose last start comes more than 5 µs after
--     the first end are unmatched. Broadcast, reduce, gather and scatter do not
--     synchronize (a broadcast's root may finish before its peers start), so their
--     occurrence pairing is not checked.
-- An instance is matched only when every rank of its group is in the run and has it:
-- group size known, as many ranks as the group has, and the group's ranks (metadata or
-- pg_config) all present. Waiting (wait_ns, last_arrival_ns) exists only for matched
-- instances. gloo traces do not name the process group: disjoint groups of one kind (TP
-- groups {0,1} and {2,3} of a 2-D mesh) share keys, count more ranks than a group has,
-- and stay unmatched. Point-to-point transfers (send, recv, send_recv) and rows of
-- unknown kind are not matched (instance_key null).
-- @column rank INTEGER: global rank
-- @column backend VARCHAR: gloo, or the family of the communication kernel: nccl (NCCL and RCCL), deepep, nvshmem, symm_mem, custom_all_reduce, userbuffers, user
-- @column name VARCHAR: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send, recv, send_recv, barrier, gather, scatter; null when nothing says (RCCL generic kernel without metadata)
-- @column raw_name VARCHAR: kernel or gloo span name as traced
-- @column issue_name VARCHAR: what named the collective: Collective name (metadata) or the c10d:: op / nccl:* annotation
-- @column issue_ts_ns BIGINT: when the CPU issued it (start of the outermost enclosing c10d / record_param_comms / nccl:* op, else the launch call)
-- @column ts_ns BIGINT: when the transfer started on the device / worker thread
-- @column dur_ns BIGINT: transfer duration including waiting for peers, ns
-- @column end_ns BIGINT: transfer end
-- @column lane BIGINT: stream (device) or worker thread (gloo)
-- @column pg_name VARCHAR: process group name (null when the trace does not say)
-- @column pg_desc VARCHAR: process group description
-- @column pg_ranks VARCHAR: ranks of the process group, as traced
-- @column group_ranks BIGINT[]: global ranks of the group (metadata, else the rank's pg_config, else all ranks when the trace lists no groups); null when unknown
-- @column group_size BIGINT: ranks taking part (metadata, else the group's traced ranks, else an all-gather's or reduce-scatter's shapes — the whole buffer ÷ the shard —, else the rank's only group size in pg_config, else the world size when the trace lists no groups); null when unknown
-- @column dtype VARCHAR: element type
-- @column elem_bytes BIGINT: bytes per element
-- @column in_nelems BIGINT: input elements
-- @column out_nelems BIGINT: output elements
-- @column bytes BIGINT: nccl-tests size S = max(in, out) × element size, bytes
-- @column seq BIGINT: sequence number from the metadata (newer torch)
-- @column kind_source VARCHAR: where name came from: kernel (metadata args), record_param_comms, issue_op (c10d:: op or nccl:* annotation), kernel_name, span_name (gloo); null when unknown
-- @column size_source VARCHAR: where in/out_nelems came from: kernel, record_param_comms, issue_op (Input Dims), span (gloo span dims); null when unknown
-- @column group_source VARCHAR: where group_size came from: kernel (metadata), record_param_comms, pg_ranks (the group's ranks as traced), shapes (in/out elements), pg_config (the rank's only group size), world (the world size); null when unknown
-- @column peer BIGINT: send: the global rank it goes to; recv: the one it comes from (record_param_comms' "Rank", which for a send/recv is the peer's rank in the process group; gloo: the c10d op's third argument in Concrete Inputs), mapped through group_ranks; null for other collectives or when unknown
-- @column match_by VARCHAR: seq or occurrence; null for rows that are not matched (point-to-point, unknown kind)
-- @column occurrence BIGINT: 1-based count of this (group, collective, Seq or size) on this rank
-- @column instance_key VARCHAR: cross-rank match key; null for point-to-point and unknown kind
-- @column ranks_matched BIGINT: ranks in the run with the same instance_key (matched or not)
-- @column matched BOOLEAN: every rank of the group is in the run and has this instance (and, for a synchronizing collective matched by occurrence, their spans overlap)
-- @column last_arrival_ns BIGINT: latest transfer start among the group's ranks; null unless matched
-- @column wait_ns BIGINT: last_arrival_ns − ts_ns: time this rank waited for the last peer; null unless matched
-- The Seq rule, one definition for the matching below and for clock alignment's `any_seq`
-- (store.clocks): a row can be matched by Seq (`_by_seq`) where it has a sequence number
-- and a process group name. Seq ("Seq" in the collective metadata of newer torch's
-- record_param_comms and NCCL kernels) counts the collectives of one process group, so it
-- names an instance only with the group: Seq 7 of the default group and Seq 7 of a TP group
-- are different ones. A view's column, not a macro: the SQL sandbox rebuilds views alone;
-- a filter on it still reaches the Parquet scan (its statistics answer `any_seq`).
CREATE OR REPLACE VIEW _collectives_seq AS
SELECT *, seq IS NOT NULL AND pg_name IS NOT NULL AS _by_seq FROM _collectives;

CREATE OR REPLACE VIEW _collectives_matched AS
-- group_ranks (a list of the group's ranks per row: 8 KB a row at 1,024 ranks) is left out
-- of the window functions below and joined back at the end from collective_groups
-- (group_hash is its hash, per rank); the cache writes it null (ingest.collectives
-- collectives_table), caches written before carry the lists: nulled here alike
WITH s AS (
    SELECT * EXCLUDE (_by_seq) REPLACE (NULL::BIGINT[] AS group_ranks),
           CASE WHEN name = 'all_to_all' THEN '*' ELSE coalesce(bytes::VARCHAR, '?') END
               AS _size_key,
           CASE WHEN name IS NULL OR name IN ('send', 'recv', 'send_recv') THEN NULL
                WHEN _by_seq THEN 'seq'
                ELSE 'occurrence' END AS match_by
    FROM _collectives_seq
), c AS (
    SELECT *, ts_ns + dur_ns AS end_ns,
           row_number() OVER (
               PARTITION BY rank, coalesce(pg_name, ''), name,
                            CASE WHEN match_by = 'seq' THEN 'seq' || seq ELSE _size_key END
               ORDER BY ts_ns) AS occurrence
    FROM s
), k AS MATERIALIZED (
    SELECT * EXCLUDE (_size_key),
           CASE WHEN match_by = 'seq'
                    THEN concat_ws('/', pg_name, name, 'seq' || seq, occurrence::VARCHAR)
                WHEN match_by = 'occurrence'
                    THEN concat_ws('/', coalesce(pg_name, '?'), name, _size_key,
                                   occurrence::VARCHAR)
           END AS instance_key
    FROM c
), i AS (
    -- per instance grouped, joined back (not windows over every column of every row)
    SELECT instance_key, count(*) AS n, max(ts_ns) AS last_start, min(end_ns) AS first_end
    FROM k WHERE instance_key IS NOT NULL GROUP BY instance_key
), m AS (
    SELECT k.*,
           CASE WHEN k.instance_key IS NULL THEN 1 ELSE i.n END AS ranks_matched,
           i.last_start AS _last_start, i.first_end AS _first_end
    FROM k LEFT JOIN i ON i.instance_key = k.instance_key
), present AS (
    -- once per distinct group, from the groups table, not per row: a per-row check is
    -- ranks × group size per row, cubic in the world size
    SELECT group_hash,
           list_has_all((SELECT list(rank) FROM rank_info), any_value(group_ranks))
               AS all_present
    FROM collective_groups GROUP BY group_hash
), g AS (
    SELECT m.* EXCLUDE (_last_start, _first_end), _last_start,
           coalesce(instance_key IS NOT NULL
                    AND group_size IS NOT NULL AND ranks_matched = group_size
                    AND (m.group_hash IS NULL OR p.all_present)
                    AND (match_by = 'seq'
                         OR name NOT IN ('all_reduce', 'all_gather', 'reduce_scatter',
                                         'all_to_all', 'barrier')
                         OR _last_start <= _first_end + 5000), false)
               AS matched
    FROM m LEFT JOIN present p ON p.group_hash = m.group_hash
)
SELECT g.* EXCLUDE (_last_start),
       CASE WHEN matched THEN _last_start END AS last_arrival_ns,
       CASE WHEN matched THEN _last_start - ts_ns END AS wait_ns
FROM g;

-- the rows above with their group's ranks: `Run.materialize` copies `_collectives_matched`
-- (its group_ranks null) into a table, not these lists (1,024 of them a row at 1,024 ranks)
CREATE OR REPLACE VIEW collectives AS
SELECT c.* EXCLUDE (group_hash) REPLACE (r.group_ranks AS group_ranks)
FROM _collectives_matched c
LEFT JOIN collective_groups r ON r.rank = c.rank AND r.group_hash = c.group_hash;

-- @view collective_instances
-- One row per collective instance matched across every rank of its group (see
-- collectives.matched); partial instances are left out.
-- @column instance_key VARCHAR: match key (group/collective/Seq or size/occurrence)
-- @column match_by VARCHAR: seq or occurrence
-- @column name VARCHAR: collective
-- @column pg_name VARCHAR: process group name
-- @column bytes BIGINT: nccl-tests size S, bytes (all_to_all: the largest rank's)
-- @column group_size BIGINT: ranks in the group
-- @column ranks_matched BIGINT: ranks of this run in which the instance was found (= group_size)
-- @column first_start_ns BIGINT: earliest transfer start across ranks
-- @column last_start_ns BIGINT: latest transfer start across ranks (the last arrival)
-- @column skew_ns BIGINT: last_start_ns − first_start_ns
-- @column last_rank INTEGER: rank that arrived last (of ranks arriving at the same nanosecond, the lowest)
-- @column transfer_ns BIGINT: shortest duration across ranks (the transfer itself, without waiting)
-- @column max_dur_ns BIGINT: longest duration across ranks (includes waiting for the last peer)
CREATE OR REPLACE VIEW collective_instances AS
SELECT instance_key, any_value(match_by) AS match_by, any_value(name) AS name,
       any_value(pg_name) AS pg_name, max(bytes) AS bytes, max(group_size) AS group_size,
       count(*) AS ranks_matched,
       min(ts_ns) AS first_start_ns, max(ts_ns) AS last_start_ns,
       max(ts_ns) - min(ts_ns) AS skew_ns,
       arg_max(rank, (ts_ns, -rank)) AS last_rank,  -- ties: not the order rows are read in
       min(dur_ns) AS transfer_ns, max(dur_ns) AS max_dur_ns
FROM collectives
WHERE matched
GROUP BY instance_key;
