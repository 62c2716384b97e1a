-- What the store asks DuckDB's catalog about its own views.

-- @query user_views
-- Every user view of the connection, in creation order, with its definition: what the SQL
-- sandbox (tracekit/store/sandbox.py) rebuilds on its own connection.
-- @column view_name VARCHAR: the view's name
-- @column sql VARCHAR: its CREATE VIEW statement
SELECT view_name, sql FROM duckdb_views() WHERE NOT internal
AND schema_name = 'main' ORDER BY view_oid

-- @query cache_views
-- The views that read the Parquet cache (per-rank tables), not yet aligned: what clock
-- alignment (tracekit/store/clocks.py) shifts.
-- @column view_name VARCHAR: the view's name
SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'
AND sql LIKE '%read_parquet%' AND NOT starts_with(view_name, '_unaligned_')
