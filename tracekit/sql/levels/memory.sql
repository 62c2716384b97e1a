-- Memory: the allocator's totals per rank.

-- @query peaks
-- Per rank, the largest allocator totals of the device type $device_type (1 CUDA, 0 CPU)
-- and the device's capacity from the trace header.
-- @column rank: global rank
-- @column alloc: peak total allocated, bytes
-- @column reserved: peak total reserved, bytes
-- @column capacity: device memory, bytes (null on CPU)
SELECT m.rank, max(m.total_allocated) AS alloc, max(m.total_reserved) AS reserved,
       any_value(r.device_memory_bytes) AS capacity
FROM memory m JOIN rank_info r USING (rank)
WHERE m.device_type = $device_type AND m.total_allocated IS NOT NULL
GROUP BY m.rank ORDER BY m.rank
