-- @include base.tables
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

-- @query fused_attention
-- Attention ops that store no score matrix (FlashAttention, memory-efficient, cuDNN SDPA,
-- flash-attn's own ops), over the run: the activation equation leaves out its a·s² term
-- where there are any.
-- @column n: such ops
SELECT count(*) AS n FROM events
WHERE kind = 'cpu_op'
  AND (name IN ('aten::_scaled_dot_product_flash_attention',
                'aten::_scaled_dot_product_flash_attention_for_cpu',
                'aten::_scaled_dot_product_efficient_attention',
                'aten::_scaled_dot_product_cudnn_attention',
                'aten::_flash_attention_forward', 'aten::_efficient_attention_forward')
       OR starts_with(name, 'flash_attn') OR starts_with(name, 'FlashAttn'))
