"""FLOPs: per traced op from its shapes, and per token from the model.

Per op (`op_flops`), from `Input Dims` / `Input type` / `Concrete Inputs`
(record_shapes=True). A multiply-add is 2 FLOPs:

- mm [M,K]·[K,N]: 2MKN; addmm (bias, [M,K], [K,N]): 2MKN; bmm [B,M,K]·[B,K,N]: 2BMKN;
  baddbmm (in, [B,M,K], [B,K,N]): 2BMKN.
- convolution (input [N,C,H,W…], weight [O,C/g,k…], stride, padding, dilation,
  transposed, output padding, groups): 2·N·O·(C/g)·∏k·∏out, out from the usual formula;
  convolution_backward: 2× that (input and weight gradients).
- scaled-dot-product / flash / efficient / cuDNN attention (q [B,H,S,D], k [B,Hk,Sk,D]):
  4·B·H·S·Sk·D (QKᵀ and PV), halved when causal; the backward ops: 2.5× (5 GEMMs of the
  same size against the forward's 2).
- matmul and linear only dispatch to the ops above, so they are never counted; and only
  the innermost of nested counted ops is (a DTensor `aten::mm` wraps the local one)
  — `innermost` in `tracekit/sql` does that.

Per token (`transformer_flops_per_token`): 6N + 12·L·H·Q·T (PaLM, Chowdhery et al.
2022, appendix B): 6 FLOPs per parameter per token for forward and backward, plus
attention's QKᵀ and PV, with N the non-embedding parameters a token passes through
(MoE: the top-k experts only; GQA and SwiGLU enter through N).
"""

from __future__ import annotations

import json
import re
from math import prod
from typing import Any

GEMM_OPS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::_scaled_mm",
    "aten::addmm_",
    "aten::baddbmm_",
    "aten::_addmm_activation",
}
CONV_OPS = {
    "aten::convolution",
    "aten::_convolution",
    "aten::cudnn_convolution",
    "aten::convolution_overrideable",
    "aten::miopen_convolution",
    "aten::mkldnn_convolution",
    "aten::cudnn_convolution_transpose",
    "aten::_convolution_mode",
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
}
CONV_BWD_OPS = {"aten::convolution_backward", "aten::cudnn_convolution_backward"}
ATTN_OPS = {
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_flash_attention_forward",
    "aten::_efficient_attention_forward",
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_attention_math",
}
ATTN_BWD_OPS = {
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_flash_attention_backward",
    "aten::_efficient_attention_backward",
}
COUNTED_OPS = GEMM_OPS | CONV_OPS | CONV_BWD_OPS | ATTN_OPS | ATTN_BWD_OPS


def _loads(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _dims(x: Any) -> list[int] | None:
    return x if isinstance(x, list) and x and all(isinstance(d, int) for d in x) else None


def _ints(text: Any, n: int, default: int) -> list[int]:
    """A concrete int list like "[2, 2]" (or a scalar) → n ints."""
    if isinstance(text, str):
        nums = [int(v) for v in re.findall(r"-?\d+", text)]
        if nums:
            return (nums * n)[:n] if len(nums) == 1 else nums[:n]
    return [default] * n


def _gemm(name: str, d: list) -> float | None:
    if name in ("aten::mm", "aten::_scaled_mm"):
        a, b = _dims(d[0]), _dims(d[1]) if len(d) > 1 else None
        if a and b and len(a) == 2 and len(b) == 2:
            return 2.0 * a[0] * a[1] * b[1]
    elif name in ("aten::addmm", "aten::addmm_", "aten::_addmm_activation"):
        a, b = (_dims(d[1]), _dims(d[2])) if len(d) > 2 else (None, None)
        if a and b and len(a) == 2 and len(b) == 2:
            return 2.0 * a[0] * a[1] * b[1]
    elif name == "aten::bmm":
        a, b = _dims(d[0]), _dims(d[1]) if len(d) > 1 else None
        if a and b and len(a) == 3 and len(b) == 3:
            return 2.0 * a[0] * a[1] * a[2] * b[2]
    elif name in ("aten::baddbmm", "aten::baddbmm_"):
        a, b = (_dims(d[1]), _dims(d[2])) if len(d) > 2 else (None, None)
        if a and b and len(a) == 3 and len(b) == 3:
            return 2.0 * a[0] * a[1] * a[2] * b[2]
    return None


def _conv(d: list, concrete: list | None, out_dims: list[int] | None = None) -> float | None:
    x, w = (_dims(d[0]), _dims(d[1])) if len(d) > 1 else (None, None)
    if not x or not w or len(x) < 3 or len(w) != len(x):
        return None
    nsp = len(x) - 2
    c = concrete or []

    def arg(i):
        return c[i] if i < len(c) else None

    stride, padding = _ints(arg(3), nsp, 1), _ints(arg(4), nsp, 0)
    dilation = _ints(arg(5), nsp, 1)
    transposed = str(arg(6)).lower() == "true"
    kernel = w[2:]
    if out_dims:
        out = out_dims[2:]
    elif transposed:
        out = list(x[2:])  # output padding aside, a transposed conv's work scales with input
    else:
        out = [
            (x[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
            for i in range(nsp)
        ]
    if any(o <= 0 for o in out):
        return None
    if transposed:  # weight [C_in, C_out/g, k…]: each input pixel scatters a kernel
        return 2.0 * x[0] * x[1] * w[1] * prod(kernel) * prod(out)
    return 2.0 * x[0] * w[0] * w[1] * prod(kernel) * prod(out)  # weight [O, C/g, k…]


def _attention(name: str, d: list, concrete: list | None) -> float | None:
    q, k = (_dims(d[0]), _dims(d[1])) if len(d) > 1 else (None, None)
    if name in ATTN_BWD_OPS:  # (grad_out, q, k, v, …)
        q, k = (_dims(d[1]), _dims(d[2])) if len(d) > 2 else (None, None)
    if not q or not k or len(q) != 4 or len(k) != 4:
        return None
    b, h, s, dh = q
    sk = k[2]
    flops = 4.0 * b * h * s * sk * dh
    causal = any(str(v).lower() == "true" for v in (concrete or [])[3:6])
    if causal:
        flops /= 2
    return flops * (2.5 if name in ATTN_BWD_OPS else 1.0)


def op_flops(name: str, input_dims: str | None, concrete_inputs: str | None = None) -> float | None:
    """FLOPs of one traced op, or None when its shapes do not say."""
    d = _loads(input_dims)
    if not isinstance(d, list) or not d:
        return None
    concrete = _loads(concrete_inputs)
    concrete = concrete if isinstance(concrete, list) else None
    if name in GEMM_OPS:
        return _gemm(name, d)
    if name in CONV_OPS:
        return _conv(d, concrete)
    if name in CONV_BWD_OPS:  # (grad_output, input, weight, …)
        if len(d) > 2:
            fwd = _conv([d[1], d[2]], None, out_dims=_dims(d[0]))
            return 2 * fwd if fwd else None
        return None
    if name in ATTN_OPS or name in ATTN_BWD_OPS:
        return _attention(name, d, concrete)
    return None


def op_dtype(input_types: str | None) -> str | None:
    """The first tensor dtype among an op's inputs."""
    types = _loads(input_types)
    for t in types if isinstance(types, list) else []:
        if isinstance(t, str) and t and t not in ("Scalar", "ScalarList", "TensorList", "None"):
            return t
    return None


def transformer_flops_per_token(
    n_params: float, layers: int, heads: int, head_dim: int, seq: int
) -> float:
    """Training FLOPs per token: 6N + 12·L·H·Q·T (PaLM appendix B)."""
    return 6.0 * n_params + 12.0 * layers * heads * head_dim * seq
