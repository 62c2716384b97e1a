-- @query kernel_time
-- Per rank, window of {windows} (rank, wid, start_ns, end_ns) and compute kernel (CPU op
-- on CPU runs): its device time clipped to the window (a plain sum: kernels of one name on
-- two streams both count).
-- @column rank: global rank
-- @column wid: the window's id
-- @column name: kernel (or CPU op) name
-- @column ns: device time in the window
-- @column n: instances starting in the window
SELECT rank, wid, name::VARCHAR AS name, sum(e - s) AS ns,
       count(*) FILTER (s = ts_ns) AS n
FROM ({clipped})
GROUP BY rank, wid, name
