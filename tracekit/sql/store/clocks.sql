-- @include run.collectives
-- Clock offsets between ranks (tracekit/store/clocks.py says why and how).

-- @query offsets
-- Per rank, its clock offset from the reference rank (the lowest rank with a synchronizing
-- collective matched by Seq): the median over shared instances of the difference of their
-- end times, the spread of those differences, and how many instances. Binds $names: the
-- synchronizing collectives.
-- @column rank INTEGER: global rank
-- @column med DOUBLE: median of end_ns(rank) − end_ns(reference), ns
-- @column mad DOUBLE: median absolute deviation of those differences, ns
-- @column n BIGINT: instances shared with the reference rank
WITH c AS (
    SELECT rank, instance_key, end_ns FROM collectives
    WHERE instance_key IS NOT NULL AND list_contains($names, name) AND ranks_matched >= 2
      AND match_by = 'seq'
), ref AS (SELECT min(rank) AS rank FROM c),
d AS (
    SELECT c.rank, c.end_ns - r.end_ns AS diff
    FROM c JOIN c AS r USING (instance_key)
    WHERE r.rank = (SELECT rank FROM ref)
), m AS (
    SELECT rank, median(diff) AS med, count(*) AS n FROM d GROUP BY rank
)
SELECT m.rank, m.med, median(abs(d.diff - m.med)) AS mad, m.n
FROM m JOIN d USING (rank) GROUP BY m.rank, m.med, m.n ORDER BY m.rank

-- @query any_seq
-- Whether any row could be matched by Seq (a synchronizing collective the Seq rule,
-- run.collectives' `_by_seq`, holds for): read from the cached rows (`_collectives_seq`
-- over `_collectives`, the Parquet's statistics answer for traces without Seq), not the
-- `collectives` view, whose matching (window functions over every rank's rows) `offsets`
-- needs only when it is.
-- Binds $names: the synchronizing collectives.
-- @column any BOOLEAN: such a row exists
SELECT EXISTS (
    SELECT 1 FROM _collectives_seq WHERE _by_seq AND list_contains($names, name)
) AS any

-- @query aligned
-- A per-rank view {raw} (the unaligned original) with the instants {shifted} (`"col" −
-- offset AS "col"`, one per instant column) moved onto the reference rank's clock.
SELECT * REPLACE ({shifted}) FROM "{raw}"
