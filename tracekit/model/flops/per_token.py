"""Per token (`transformer_flops_per_token`): 6N + 6·h·V + 12·L·H·Q·T (PaLM, Chowdhery et
al. 2022, appendix B, plus the final logits of Hoffmann et al. 2022, appendix F): 6 FLOPs
per parameter per token for forward and backward, with N the non-embedding parameters a
token passes through (MoE: the top-k experts only; GQA and SwiGLU enter through N); the
logits GEMM against the h×V output embedding (tied or not: it runs either way; PaLM's N
leaves it out, which under-predicts a small-vocabulary-heavy model: 11% on an 8-layer
h=2048, V=32000 model); attention's QKᵀ and PV, halved for causal attention, whose
masked half flash kernels skip and the measured FLOPs do not count.
"""

from __future__ import annotations


def transformer_flops_per_token(
    n_params: float,
    layers: int,
    heads: int,
    head_dim: int,
    seq: int,
    *,
    hidden: int | None = None,
    vocab: int | None = None,
    causal: bool | None = None,
) -> float:
    """Training FLOPs per token: 6N + 6·h·V + 12·L·H·Q·T (PaLM appendix B; the logits of
    Chinchilla appendix F, where h and V are known), attention halved when causal."""
    attention = 12.0 * layers * heads * head_dim * seq * (0.5 if causal else 1.0)
    logits = 6.0 * hidden * vocab if hidden and vocab else 0.0
    return 6.0 * n_params + logits + attention
