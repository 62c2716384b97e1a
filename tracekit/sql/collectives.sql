-- @view collectives
-- One row per collective instance per rank, any backend (see tracekit/collectives.py for
-- how NCCL kernels and gloo spans become rows), matched across ranks by instance_key:
-- same process group, collective, size and occurrence number on that rank. all_to_all
-- sizes differ between ranks (uneven splits), so its key leaves the size out. gloo traces
-- do not name the process group: disjoint groups of one kind (TP groups {0,1} and {2,3}
-- of a 2-D mesh) then share keys and match as one instance.
-- Point-to-point transfers (send, recv, send_recv) are not matched (instance_key null).
-- @column rank: global rank
-- @column backend: nccl or gloo
-- @column name: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send, recv, send_recv, barrier, gather, scatter
-- @column raw_name: kernel or gloo span name as traced
-- @column issue_name: the issuing op: Collective name (NCCL metadata) or c10d:: op (gloo)
-- @column issue_ts_ns: when the CPU issued it (record_param_comms / c10d op start)
-- @column ts_ns: when the transfer started on the device / worker thread
-- @column dur_ns: transfer duration including waiting for peers, ns
-- @column end_ns: transfer end
-- @column lane: stream (NCCL) or worker thread (gloo)
-- @column pg_name: process group name (null when the trace does not say)
-- @column pg_desc: process group description
-- @column pg_ranks: ranks of the process group, as traced
-- @column group_size: ranks taking part (metadata, else the rank's only group size, else world size)
-- @column dtype: element type
-- @column elem_bytes: bytes per element
-- @column in_nelems: input elements
-- @column out_nelems: output elements
-- @column bytes: nccl-tests size S = max(in, out) × element size, bytes
-- @column seq: sequence number from the metadata (newer torch)
-- @column occurrence: 1-based count of this (group, collective, size) on this rank
-- @column instance_key: cross-rank match key; null for point-to-point
-- @column ranks_matched: ranks in the run with the same instance_key
-- @column last_arrival_ns: latest transfer start among matched ranks
-- @column wait_ns: last_arrival_ns − ts_ns: time this rank waited for the last peer
CREATE OR REPLACE VIEW collectives AS
WITH s AS (
    SELECT *, CASE WHEN name = 'all_to_all' THEN '*' ELSE coalesce(bytes::VARCHAR, '?') END
              AS _size_key
    FROM _collectives
), c AS (
    SELECT *, ts_ns + dur_ns AS end_ns,
           row_number() OVER (
               PARTITION BY rank, coalesce(pg_name, ''), name, _size_key
               ORDER BY ts_ns) AS occurrence
    FROM s
), k AS (
    SELECT * EXCLUDE (_size_key),
           CASE WHEN name IN ('send', 'recv', 'send_recv') THEN NULL
                ELSE concat_ws('/', coalesce(pg_name, '?'), name, _size_key,
                               occurrence::VARCHAR)
           END AS instance_key
    FROM c
)
SELECT *,
       CASE WHEN instance_key IS NULL THEN 1
            ELSE count(*) OVER (PARTITION BY instance_key) END AS ranks_matched,
       CASE WHEN instance_key IS NULL THEN ts_ns
            ELSE max(ts_ns) OVER (PARTITION BY instance_key) END AS last_arrival_ns,
       CASE WHEN instance_key IS NULL THEN 0
            ELSE max(ts_ns) OVER (PARTITION BY instance_key) - ts_ns END AS wait_ns
FROM k;

-- @view collective_instances
-- One row per collective instance matched across ranks.
-- @column instance_key: match key (group/collective/bytes/occurrence)
-- @column name: collective
-- @column pg_name: process group name
-- @column bytes: nccl-tests size S, bytes
-- @column group_size: ranks in the group
-- @column ranks_matched: ranks of this run in which the instance was found
-- @column first_start_ns: earliest transfer start across ranks
-- @column last_start_ns: latest transfer start across ranks (the last arrival)
-- @column skew_ns: last_start_ns − first_start_ns
-- @column last_rank: rank that arrived last
-- @column transfer_ns: shortest duration across ranks (the transfer itself, without waiting)
-- @column max_dur_ns: longest duration across ranks (includes waiting for the last peer)
CREATE OR REPLACE VIEW collective_instances AS
SELECT instance_key, any_value(name) AS name, any_value(pg_name) AS pg_name,
       any_value(bytes) AS bytes, max(group_size) AS group_size,
       count(*) AS ranks_matched,
       min(ts_ns) AS first_start_ns, max(ts_ns) AS last_start_ns,
       max(ts_ns) - min(ts_ns) AS skew_ns,
       arg_max(rank, ts_ns) AS last_rank,
       min(dur_ns) AS transfer_ns, max(dur_ns) AS max_dur_ns
FROM collectives
WHERE instance_key IS NOT NULL
GROUP BY instance_key;
