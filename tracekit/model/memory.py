"""Memory per device: model states (mixed-precision Adam, ZeRO, FSDP, TP, PP) and
activations.

Model states, Ψ parameters, N data-parallel ranks (Rajbhandari et al., ZeRO, 2020,
§3.1 and fig. 1): mixed-precision Adam keeps fp16 parameters (2Ψ) and gradients (2Ψ)
and fp32 master parameters, momentum and variance (12Ψ) = 16Ψ bytes.
ZeRO-1 shards the optimizer states: 4Ψ + 12Ψ/N; ZeRO-2 also the gradients:
2Ψ + 14Ψ/N; ZeRO-3 (= FSDP full sharding) everything: 16Ψ/N. Full fp32 training with
Adam is also 4 + 4 + 8 = 16Ψ. Tensor and pipeline parallelism divide Ψ by tp and pp
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
every tensor-parallel rank; with it they are split along the sequence.
"""

from __future__ import annotations

STATE_BYTES_PER_PARAM = 16


def model_state_bytes(params: float, dp: int = 1, zero: int = 0, tp: int = 1, pp: int = 1) -> float:
    """Bytes of parameters, gradients and Adam states on one device."""
    psi = params / (tp * pp)
    n = max(dp, 1)
    if zero >= 3:
        return 16 * psi / n
    if zero == 2:
        return 2 * psi + 14 * psi / n
    if zero == 1:
        return 4 * psi + 12 * psi / n
    return STATE_BYTES_PER_PARAM * psi


def activation_bytes_per_layer(
    seq: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    tp: int = 1,
    recompute: str = "none",
    bytes_per_value: int = 2,
    sequence_parallel: bool = False,
) -> float:
    """Korthikanti et al. table 2; `bytes_per_value` scales from their 16-bit count."""
    s, b, h, a, t = seq, micro_batch, hidden, heads, max(tp, 1)
    scale = bytes_per_value / 2
    if recompute == "full":
        return 2 * s * b * h * scale
    attention = 5 * a * s / h  # the a·s² softmax/dropout terms, split over heads
    if recompute == "selective":
        attention = 0.0
    if sequence_parallel or t == 1:
        return s * b * h * (34 + attention) / t * scale
    return s * b * h * (10 + 24 / t + attention / t) * scale
