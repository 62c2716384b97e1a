"""Memory per device: model states (mixed-precision Adam, ZeRO, FSDP, TP, PP) and
activations.

Model states, Ψ parameters, N data-parallel ranks (Rajbhandari et al., ZeRO, 2020,
§3.1 and fig. 1): mixed-precision Adam keeps fp16 parameters (2Ψ) and gradients (2Ψ)
and fp32 master parameters, momentum and variance (12Ψ) = 16Ψ bytes.
ZeRO-1 shards the optimizer states: 4Ψ + 12Ψ/N; ZeRO-2 also the gradients:
2Ψ + 14Ψ/N; ZeRO-3 (= FSDP full sharding) everything: 16Ψ/N. Full fp32 training with
Adam is also 4 + 4 + 8 = 16Ψ. Without master weights (parameters kept in a 16-bit
dtype, `job.json` master_weights false) torch's Adam keeps its two states in the
parameters' dtype: 2 + 2 + 4 = 8Ψ (`state_bytes_per_param`). DDP copies the gradients
into its communication buckets unless gradient_as_bucket_view is set (torch DDP docs):
one more gradient copy, unsharded. Tensor and pipeline parallelism divide Ψ by tp and pp
(evenly, embedding aside).

Activations per transformer layer (Korthikanti et al., "Reducing Activation
Recomputation in Large Transformer Models", 2022, §4 and table 2), 16-bit activations,
sequence s, micro-batch b, hidden h, heads a, tensor parallel t:

    no parallelism                      s·b·h·(34 + 5·a·s/h)
    tensor parallel                     s·b·h·(10 + 24/t + 5·a·s/(h·t))
    tensor + sequence parallel          s·b·h·(34 + 5·a·s/h)/t
    tensor parallel, selective recompute            s·b·h·(10 + 24/t)
    tensor + sequence parallel, selective recompute s·b·h·34/t
    full recompute                      2·s·b·h (the layer input)

Without sequence parallelism the layer norms and dropouts (10·s·b·h) are replicated on
every tensor-parallel rank; with it they are split along the sequence. The 5·a·s/h
term is the stored softmax, its dropout mask and output (a·s² per sequence): fused
attention (FlashAttention, memory-efficient, cuDNN SDPA) stores none of it, only its
output and log-sum-exp (Dao et al. 2022, §3.1), so it is left out where the trace shows
fused attention ops. The output layer adds its logits in fp32 for the loss, 4·s·b·V
bytes (Korthikanti et al. §4.3), on the last pipeline stage.
"""

from __future__ import annotations


def state_bytes_per_param(dtype: str | None, master_weights: bool | None) -> tuple[float, ...]:
    """(parameter, gradient, optimizer) bytes per parameter with Adam: fp32 training
    4 + 4 + 8; 16-bit parameters with fp32 master weights (ZeRO's mixed precision, assumed
    where job.json does not say) 2 + 2 + 12; 16-bit without them 2 + 2 + 4."""
    fp32 = (dtype or "float32") in ("float32", "fp32")
    if fp32 and not master_weights:
        return 4.0, 4.0, 8.0
    if master_weights is False:
        return 2.0, 2.0, 4.0
    return 2.0, 2.0, 12.0


def model_state_bytes(
    params: float,
    dp: int = 1,
    zero: int = 0,
    tp: int = 1,
    pp: int = 1,
    per_param: tuple[float, ...] = (2.0, 2.0, 12.0),
) -> float:
    """Bytes of parameters, gradients and Adam states on one device; `per_param` is
    (parameter, gradient, optimizer) bytes per parameter (`state_bytes_per_param`)."""
    psi = params / (tp * pp)
    n = max(dp, 1)
    p, g, o = per_param
    if zero >= 3:
        return (p + g + o) * psi / n
    if zero == 2:
        return p * psi + (g + o) * psi / n
    if zero == 1:
        return (p + g) * psi + o * psi / n
    return (p + g + o) * psi


def activation_bytes_per_layer(
    seq: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    tp: int = 1,
    recompute: str = "none",
    bytes_per_value: int = 2,
    sequence_parallel: bool = False,
    fused_attention: bool = False,
) -> float:
    """Korthikanti et al. table 2; `bytes_per_value` scales from their 16-bit count;
    fused attention stores no a·s² scores."""
    s, b, h, a, t = seq, micro_batch, hidden, heads, max(tp, 1)
    scale = bytes_per_value / 2
    if recompute == "full":
        return 2 * s * b * h * scale
    attention = 5 * a * s / h  # the a·s² softmax/dropout terms, split over heads
    if recompute == "selective" or fused_attention:
        attention = 0.0
    if sequence_parallel or t == 1:
        return s * b * h * (34 + attention) / t * scale
    return s * b * h * (10 + 24 / t + attention / t) * scale
