-- @include base.tables
-- How ingest builds the rank-local collective rows (tracekit/ingest/collectives.py): the
-- kernels to classify, the communication kernels with the CPU ops that issued them, gloo's
-- issue ops and worker-thread spans — each query over every rank of the batch, its rows
-- turned into collective rows by Python — then the tables those rows become.

-- @query kernel_names
-- Each rank's distinct kernel names, to classify (`kernel_classes`).
-- @column rank INTEGER: global rank
-- @column name VARCHAR: kernel name as traced
SELECT DISTINCT rank, name::VARCHAR AS name FROM events WHERE kind = 'kernel'
AND name IS NOT NULL ORDER BY 1, 2

-- @query comm_kernels
-- Communication kernels (kernel_classes says so), numbered per rank in time order (`kid`),
-- with their collective metadata and when the runtime call that launched each began.
-- @column rank INTEGER: global rank
-- @column kid BIGINT: the kernel's number on its rank (time, then name, order)
-- @column raw_name VARCHAR: kernel name as traced
-- @column ts_ns BIGINT: kernel start, ns since the epoch
-- @column dur_ns BIGINT: kernel duration, ns
-- @column lane BIGINT: CUDA stream
-- @column correlation BIGINT: runtime ↔ kernel link
-- @column family VARCHAR: kernel_classes.family
-- @column name_kind VARCHAR: the collective the kernel name tells (kernel_classes.coll_name)
-- @column coll_name VARCHAR: collective metadata on the kernel: "Collective name"
-- @column in_nelems BIGINT: collective metadata: "In msg nelems"
-- @column out_nelems BIGINT: collective metadata: "Out msg nelems"
-- @column group_size BIGINT: collective metadata: "Group size"
-- @column dtype VARCHAR: collective metadata: element type
-- @column pg_name VARCHAR: collective metadata: "Process Group Name"
-- @column pg_desc VARCHAR: collective metadata: "Process Group Description"
-- @column pg_ranks VARCHAR: collective metadata: "Process Group Ranks"
-- @column seq BIGINT: collective metadata: "Seq"
-- @column rt_ts BIGINT: start of the runtime call with the kernel's correlation, ns (null: none)
SELECT k.rank,
       row_number() OVER (PARTITION BY k.rank ORDER BY k.ts_ns, k.name) AS kid,
       k.name::VARCHAR AS raw_name,
       k.ts_ns, k.dur_ns, k.stream AS lane, k.correlation, kc.family,
       kc.coll_name AS name_kind, k.coll_name::VARCHAR AS coll_name, k.in_nelems, k.out_nelems,
       k.group_size, k.dtype::VARCHAR AS dtype, k.pg_name::VARCHAR AS pg_name,
       k.pg_desc::VARCHAR AS pg_desc, k.pg_ranks::VARCHAR AS pg_ranks, k.seq,
       (SELECT min(r.ts_ns) FROM events r
        WHERE r.kind = 'runtime' AND r.rank = k.rank AND r.correlation = k.correlation) AS rt_ts
FROM events k JOIN kernel_classes kc ON kc.rank = k.rank AND kc.name = k.name::VARCHAR
WHERE k.kind = 'kernel' AND kc.category = 'communication'
ORDER BY k.rank, kid

-- @query issue_ops
-- Every CPU op enclosing the runtime call that launched a communication kernel (same
-- thread, the call inside the op's span): record_param_comms (collective metadata),
-- c10d::* / _c10d_functional::* / vllm:: issue ops and nccl:* annotations (`Input Dims`),
-- outermost first. `kid` numbers the kernels as `comm_kernels` does.
-- @column rank INTEGER: global rank
-- @column kid BIGINT: the kernel's number on its rank (comm_kernels.kid)
-- @column rt_ts BIGINT: start of the launching runtime call, ns
-- @column tid BIGINT: the op's thread
-- @column ts_ns BIGINT: op start, ns since the epoch
-- @column end_ns BIGINT: op end, ns since the epoch
-- @column op VARCHAR: op name
-- @column coll_name VARCHAR: collective metadata: "Collective name"
-- @column in_nelems BIGINT: collective metadata: "In msg nelems"
-- @column out_nelems BIGINT: collective metadata: "Out msg nelems"
-- @column group_size BIGINT: collective metadata: "Group size"
-- @column dtype VARCHAR: collective metadata: element type
-- @column pg_name VARCHAR: collective metadata: "Process Group Name"
-- @column pg_desc VARCHAR: collective metadata: "Process Group Description"
-- @column pg_ranks VARCHAR: collective metadata: "Process Group Ranks"
-- @column seq BIGINT: collective metadata: "Seq"
-- @column input_dims VARCHAR: "Input Dims" as JSON text
-- @column input_types VARCHAR: "Input type" as JSON text
-- @column comm_rank BIGINT: record_param_comms "Rank" (events.comm_rank)
WITH k AS (
    SELECT k.rank, row_number() OVER (PARTITION BY k.rank ORDER BY k.ts_ns, k.name) AS kid,
           k.correlation
    FROM events k JOIN kernel_classes kc ON kc.rank = k.rank AND kc.name = k.name::VARCHAR
    WHERE k.kind = 'kernel' AND kc.category = 'communication'
), rt AS (
    SELECT rank, correlation, arg_min(tid, ts_ns) AS rt_tid, min(ts_ns) AS rt_ts
    FROM events WHERE kind = 'runtime' AND correlation IS NOT NULL GROUP BY rank, correlation
), ops AS (
    SELECT rank, tid, ts_ns, ts_ns + dur_ns AS end_ns, name::VARCHAR AS op,
           coll_name::VARCHAR AS coll_name, in_nelems, out_nelems, group_size,
           dtype::VARCHAR AS dtype, pg_name::VARCHAR AS pg_name, pg_desc::VARCHAR AS pg_desc,
           pg_ranks::VARCHAR AS pg_ranks, seq, input_dims, input_types, comm_rank
    FROM events
    WHERE kind IN ('cpu_op', 'user_annotation')
      AND (name = 'record_param_comms' OR prefix(name, 'c10d::')
           OR prefix(name, '_c10d_functional::') OR prefix(name, 'nccl:')
           OR prefix(name, 'vllm::'))
), kr AS (
    SELECT k.rank, k.kid, rt.rt_ts, rt.rt_tid
    FROM k JOIN rt ON rt.rank = k.rank AND rt.correlation = k.correlation
)
-- the ops around each launch: a range join on (rank, tid) alone ran as a hash join that
-- tested every op of the thread against every launch (16M pairs on v100_ddp_rank1, 0.05 s);
-- joined on 1 ms buckets of the thread's time axis too (an op of at most 64 ms listed once
-- per bucket it covers, as `rank.kernel_ops` does), the few longer ops range-joined alone.
-- Whole rows, not keys with the metadata joined back by number as `rank.kernel_ops` does:
-- that measured slower (CPU, median of 30: 25.7 vs 23.2 ms on v100_ddp_rank1; 50.5 vs
-- 49.6 ms on 128 small ranks; by rowid, 92 vs 44 ms there), these ops being short (one
-- or two buckets each, few copies) and the join back costing more than it saves
SELECT kr.rank, kr.kid, kr.rt_ts, o.* EXCLUDE (rank, b)
FROM kr JOIN (SELECT *, unnest(range(ts_ns // 1000000, end_ns // 1000000 + 1)) AS b
              FROM ops WHERE end_ns - ts_ns <= 64000000) o
  ON o.rank = kr.rank AND o.tid = kr.rt_tid AND o.b = kr.rt_ts // 1000000
 AND kr.rt_ts BETWEEN o.ts_ns AND o.end_ns
UNION ALL
SELECT kr.rank, kr.kid, kr.rt_ts, o.* EXCLUDE (rank)
FROM kr JOIN (SELECT * FROM ops WHERE end_ns - ts_ns > 64000000) o
  ON o.rank = kr.rank AND o.tid = kr.rt_tid AND kr.rt_ts BETWEEN o.ts_ns AND o.end_ns
ORDER BY rank, kid, ts_ns

-- @query gloo_issue
-- gloo runs: the c10d:: ops that issue collectives, in time order.
-- @column rank INTEGER: global rank
-- @column op VARCHAR: op name
-- @column ts_ns BIGINT: op start, ns since the epoch
-- @column input_dims VARCHAR: "Input Dims" as JSON text
-- @column input_types VARCHAR: "Input type" as JSON text
-- @column concrete_inputs VARCHAR: "Concrete Inputs" as JSON text
SELECT rank, name::VARCHAR AS op, ts_ns, input_dims, input_types, concrete_inputs
FROM events WHERE kind = 'cpu_op' AND name LIKE 'c10d::%' ORDER BY rank, ts_ns

-- @query gloo_spans
-- gloo runs: the worker thread's execution spans (`comm_thread` events), in time order.
-- @column rank INTEGER: global rank
-- @column raw_name VARCHAR: span name as traced
-- @column ts_ns BIGINT: span start, ns since the epoch
-- @column dur_ns BIGINT: span duration, ns
-- @column tid BIGINT: the worker thread
-- @column input_dims VARCHAR: "Input Dims" as JSON text
-- @column input_types VARCHAR: "Input type" as JSON text
SELECT rank, name::VARCHAR AS raw_name, ts_ns, dur_ns, tid, input_dims, input_types
FROM events WHERE kind = 'comm_thread' ORDER BY rank, ts_ns

-- @query groups_table
-- Table `_groups` (each rank's distinct groups, numbered `gid`, as the derived rows name
-- them) with each group's 64-bit hash, computed once a group.
CREATE OR REPLACE TABLE _groups AS
        SELECT *, hash(group_ranks) AS group_hash FROM _groups

-- @query collectives_table
-- Table `_collectives` from the derived rows `_derived` and their groups `_groups`: each
-- row keyed by the hash of its group's ranks, so matching never carries a world-sized
-- list per collective row. The rows keep their order (a lookup by position, not a join).
-- Its group_ranks stays null (`_derived`'s: the rows' lists went to `_groups`): the
-- `collectives` view joins each row's list back from `collective_groups` by group_hash,
-- and nothing reads this column (`_collectives_matched` nulls it), so no list is copied
-- onto every row and written to the cache (1,024 numbers a row at 1,024 ranks).
CREATE OR REPLACE TABLE _collectives AS
        WITH g AS (SELECT list(group_hash ORDER BY gid) AS hashes FROM _groups)
        SELECT d.* EXCLUDE (gid), g.hashes[d.gid + 1] AS group_hash
        FROM _derived d, g

-- @query collective_groups_table
-- Table `collective_groups` (base.tables): a group's ranks once per group and rank.
CREATE OR REPLACE TABLE collective_groups AS
        SELECT DISTINCT rank, group_hash, group_ranks FROM _groups
