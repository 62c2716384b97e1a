-- @include base.tables
-- What the counted-ops scan (tracekit/ingest/opscan.py) reads at ingest.

-- @query ops_and_phases
-- Every rank's ops of the FLOPs signature table (names bound as $names), and the spans
-- that set a phase: autograd nodes (`autograd::engine::evaluate_function: …`, or in older
-- traces the node itself, `AddmmBackward0`) and optimizer steps (`Optimizer.step#…`,
-- `Optimizer.zero_grad#…`); by rank and thread in time order, an enclosing span first.
-- @column rank INTEGER: global rank
-- @column tid BIGINT: thread
-- @column name VARCHAR: op or span name
-- @column ts_ns BIGINT: start, ns since the epoch
-- @column dur_ns BIGINT: duration, ns
-- @column input_dims VARCHAR: "Input Dims" as JSON text (ops only)
-- @column input_types VARCHAR: "Input type" as JSON text (ops only)
-- @column concrete_inputs VARCHAR: "Concrete Inputs" as JSON text (ops only)
-- @column what VARCHAR: op, backward or optimizer
SELECT rank, tid, name::VARCHAR AS name, ts_ns, dur_ns, input_dims, input_types,
       concrete_inputs, 'op' AS what
FROM events WHERE kind = 'cpu_op' AND list_contains($names, name)
UNION ALL
SELECT rank, tid, name::VARCHAR, ts_ns, dur_ns, NULL, NULL, NULL,
       CASE WHEN prefix(name, 'Optimizer.step') OR prefix(name, 'Optimizer.zero_grad')
            THEN 'optimizer' ELSE 'backward' END
FROM events
WHERE kind IN ('cpu_op', 'user_annotation')
  AND (prefix(name, 'autograd::engine::evaluate_function')
       OR (contains(name, 'Backward')  -- a cheap filter before the regex
           AND regexp_matches(name, '^[A-Za-z0-9_:]*Backward[0-9]*$'))
       OR prefix(name, 'Optimizer.step') OR prefix(name, 'Optimizer.zero_grad'))
ORDER BY rank, tid, ts_ns, dur_ns DESC
