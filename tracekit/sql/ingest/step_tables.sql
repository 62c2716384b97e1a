-- @include base.tables
-- Whether an ingest builds the step model's inputs (`rank.step_*`,
-- tracekit/ingest/steptables.py): the batch's size as `tracekit.analysis.whatif_plan.plan`
-- estimates a step's nodes (its device work and runtime calls, per step).

-- @query step_model_size
-- The batch's ranks, their device work and runtime calls, and the most steps of one rank.
-- @column ranks BIGINT: ranks with events
-- @column work BIGINT: kernels, copies, memsets, gloo spans and runtime calls
-- @column steps BIGINT: the most ProfilerStep annotations of one rank (null: none)
SELECT count(DISTINCT rank) AS ranks,
       count(*) FILTER (WHERE kind IN ('kernel', 'memcpy', 'memset', 'comm_thread', 'runtime'))
           AS work,
       (SELECT max(n) FROM (SELECT count(*) AS n FROM events
                            WHERE kind IN ('user_annotation', 'cpu_op')
                              AND prefix(name::VARCHAR, 'ProfilerStep#')
                            GROUP BY rank) s) AS steps
FROM events
