-- @include rank.device_activity
-- Compute kernels by device time over windows (tracekit/metrics/kernels.py).

-- @query compute_activity
-- The rows of device_activity that are compute (kernels; CPU ops on CPU runs): what
-- `kernel_time` clips to the windows.
SELECT * FROM device_activity WHERE category = 'compute'

-- @query kernel_time
-- Per rank, window and compute kernel (CPU op on CPU runs): its device time clipped to the
-- window (a plain sum: kernels of one name on two streams both count). Placeholder
-- {clipped}: `compute_activity` rows clipped to the windows (`windows.overlapping`).
-- @column rank INTEGER: global rank
-- @column wid INTEGER: the window's id
-- @column name VARCHAR: kernel (or CPU op) name
-- @column ns HUGEINT: device time in the window
-- @column n BIGINT: instances starting in the window
SELECT rank, wid, name::VARCHAR AS name, sum(e - s) AS ns,
       count(*) FILTER (s = ts_ns) AS n
FROM ({clipped})
GROUP BY rank, wid, name

-- @query named
-- The rows of {kernel_time} of the kernels named in $names.
SELECT * FROM ({kernel_time}) WHERE list_contains($names, name)

-- @query top
-- The rows of {kernel_time} of the $top names with the most device time over all windows
-- (ties by name, as `kernels.top_names`; a kernel without a name is one more name). A sum
-- of integers is exact in SQL as in Python: the same names, in the same order.
WITH kt AS ({kernel_time}),
t AS (SELECT name FROM kt GROUP BY name ORDER BY sum(ns) DESC, name LIMIT $top)
SELECT * FROM kt SEMI JOIN t ON kt.name IS NOT DISTINCT FROM t.name
