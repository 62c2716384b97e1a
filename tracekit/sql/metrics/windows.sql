-- The analysis windows as SQL (tracekit/metrics/windows.py): the table that holds a list
-- of windows, and how a query restricts its rows to them. A window row is (rank, wid,
-- start_ns, end_ns, n): `wid` its id, `n` the ProfilerSteps it spans (≥ 1).

-- @query no_windows
-- No window: the columns of a window row and no row.
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column start_ns BIGINT: window start, ns since the epoch
-- @column end_ns BIGINT: window end, ns since the epoch
-- @column n INTEGER: ProfilerSteps in the window
SELECT NULL::INT AS rank, 0 AS wid, 0::BIGINT AS start_ns, 0::BIGINT AS end_ns, 1 AS n WHERE false

-- @query window_table
-- Table {name} of window rows, from the lists bound as $1 … $5 (rank, wid, start_ns,
-- end_ns, n), in the in-memory database (not TEMP: cursors of other threads read it too).
CREATE TABLE IF NOT EXISTS {name} AS SELECT unnest($1)::INTEGER AS rank,
unnest($2)::INTEGER AS wid, unnest($3)::BIGINT AS start_ns,
unnest($4)::BIGINT AS end_ns, unnest($5)::INTEGER AS n

-- @query overlapping
-- Rows of {source} that meet a window of {windows}, with the window's columns (`wid`, `n`
-- …, not its bounds) and the row clipped to it: `s`, `e` (one row per window met). The
-- row's interval is [{start}, {end}).
SELECT src.*, w.* EXCLUDE (rank, start_ns, end_ns), greatest(src.{start}, w.start_ns) AS s,
       least(src.{end}, w.end_ns) AS e
FROM ({source}) src JOIN ({windows}) w ON src.rank = w.rank
WHERE src.{end} > w.start_ns AND src.{start} < w.end_ns

-- @query starting_in
-- Rows of {source} whose {start} falls inside a window of {windows}, with the window's
-- columns (`wid`, `n` …, not its bounds).
SELECT src.*, w.* EXCLUDE (rank, start_ns, end_ns)
FROM ({source}) src JOIN ({windows}) w ON src.rank = w.rank
WHERE src.{start} >= w.start_ns AND src.{start} < w.end_ns
