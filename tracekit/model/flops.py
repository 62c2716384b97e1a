"""FLOPs: per traced op from a table of signatures, and per token from the model.

Per op (`op_flops`), from `Input Dims` / `Input type` / `Concrete Inputs`
(record_shapes=True). A multiply-add is 2 FLOPs. Every op torch emits for a GEMM, a
convolution or attention has one entry in `SIGNATURES`: where each argument the formula
needs sits in the op's schema (PyTorch `aten/src/ATen/native/native_functions.yaml`;
the positions were read from `torch._C._jit_get_schemas_for_operator` of torch 2.13,
the removed backward ops of torch ≤ 1.10 from that release's yaml). Formulas:

- GEMM: mm / _scaled_mm [M,K]·[K,N] → 2MKN; addmm (bias, [M,K], [K,N]) → 2MKN;
  bmm, baddbmm, addbmm [B,M,K]·[B,K,N] → 2BMKN; _grouped_mm (MoE experts):
  [T,K]·[G,K,N] → 2TKN (each token meets one expert), [G,M,K]·[G,K,N] → 2GMKN,
  [M,T]·[T,N] (grouped along K, the weight gradient) → 2MTN.
- convolution, weight [O, C/g, k…] (transposed: [C_in, C_out/g, k…]):
  2·N·w₀·w₁·∏k·∏spatial, spatial = the output's (transposed: the input's), the output
  from stride, padding and dilation (`torch.utils.flop_counter.conv_flop_count`).
  Backward: that per gradient the output mask asks for (input, weight); the old
  `*_backward_input` / `*_backward_weight` ops are one gradient each.
- attention, q [B,H,S,D] (flash/efficient backend ops: [B,S,H,D]), k with Sk keys:
  forward 2·B·H·S·Sk·(D_qk + D_v) (QKᵀ and PV); backward 2·B·H·S·Sk·(3·D_qk + 2·D_v)
  (QKᵀ recomputed, dP, dV, dQ, dK: 2.5× the forward when D_qk = D_v, as
  `flop_counter.sdpa_backward_flop_count`); causal (is_causal, or the efficient
  kernels' custom_mask_type ≥ 1) halves it — the masked half of the blocks is skipped.
  Library ops with the same formula: flash-attn's `flash_attn::_flash_attn_forward` /
  `_flash_attn_backward` (q [B,S,H,D]; Dao-AILab/flash-attention
  `flash_attn/flash_attn_interface.py`), aiter's `aiter::mha_fwd` / `mha_bwd` (ROCm/aiter
  `aiter/ops/mha.py`).
- varlen attention, q [total_q, H, D] packed from B sequences (`cu_seqlens_q` has B+1
  entries): Σᵢ 2·H·sᵢ·skᵢ·(D_qk + D_v) — the per-sequence lengths live in the
  cumulative-length *tensors*, which a trace does not record. tracekit counts only where
  the shapes prove the lengths: B = 1 (s = total_q, sk = total_k, or max_seqlen_k for a
  paged cache), or every sequence at its maximum (total_q = B·max_seqlen_q and total_k =
  B·max_seqlen_k); else FLOPs unknown, with that reason. Causal with sk > s (a prefix in
  the cache, the mask aligned bottom-right as flash-attn does) attends s·(sk − s/2) pairs
  (s·sk/2 when sk = s). Ops: `flash_attn::_flash_attn_varlen_forward` / `_backward`,
  `aten::_flash_attention_forward` / `_backward` with cum_seq tensors, `aiter::mha_varlen_fwd`
  / `mha_varlen_bwd`, and `aiter::mha_batch_prefill` (SGLang's paged prefill: k/v are the
  page pool, so only B = 1 with max_seqlen_k is exact).
- paged decode attention (`aiter::paged_attention_rocm`, vLLM's `_rocm_C::paged_attention`,
  `_C::paged_attention_v1/v2`: query [num_seqs, H, D], one query token per sequence):
  2·H·(D + D)·Σ context_lens; exact for one sequence (Σ = max_context_len), else unknown.
- Transformer Engine `tex_ts::te_gemm_ts(A, …, transa, B, …, transb, D, …)` (NVIDIA
  TransformerEngine `pytorch/csrc/ts_fp8_op.cpp`; cuBLAS column-major): D [M, N], K = A's
  inner dimension (A [N, K] when transa, else [K, N]; B [M, K] unless transb, then
  [K, M]) → 2MNK; the transposes from Concrete Inputs, else from the shapes when only one
  K fits both operands.

An argument the formula needs and the trace lacks (old traces have no `Concrete Inputs`)
makes the op's FLOPs `None` with the reason — never a default. One exception, exact and
not a guess: a forward convolution without its stride/padding takes its output size
from the backward op of the same convolution (same input and weight shapes; the
backward op carries grad_output, whose shape *is* the output), and an old
`*_backward_weight` op takes its kernel from the `*_convolution_backward` op that
encloses it (else from the same shapes elsewhere in the trace: `ConvGeometry`).

matmul, linear and the conv/sdpa front ends dispatch to the ops above; only the
innermost op of the table counts (a DTensor `aten::mm` wraps the local one) — see
`tracekit.ingest.opscan`.

Per token (`transformer_flops_per_token`): 6N + 6·h·V + 12·L·H·Q·T (PaLM, Chowdhery et
al. 2022, appendix B, plus the final logits of Hoffmann et al. 2022, appendix F): 6 FLOPs
per parameter per token for forward and backward, with N the non-embedding parameters a
token passes through (MoE: the top-k experts only; GQA and SwiGLU enter through N); the
logits GEMM against the h×V output embedding (tied or not: it runs either way; PaLM's N
leaves it out, which under-predicts a small-vocabulary-heavy model: 11% on an 8-layer
h=2048, V=32000 model); attention's QKᵀ and PV, halved for causal attention, whose
masked half flash kernels skip and the measured FLOPs do not count.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from math import prod
from typing import Any


@dataclass(frozen=True)
class OpSig:
    """Where an op's formula arguments sit in its schema (0-based positions)."""

    family: str  # gemm, conv, conv_bwd…, attn, attn_bwd, varlen, varlen_bwd, paged, te_gemm
    args: dict[str, int] = field(default_factory=dict)
    transposed: bool | None = None  # fixed by the op (None: read args["transposed"])
    layout: str = "BHSD"  # attention q/k/v layout


def _gemm(a: int, b: int) -> OpSig:
    return OpSig("gemm", {"a": a, "b": b})


def _conv(**args: int) -> OpSig:
    return OpSig("conv", {"x": 0, "w": 1, **args})


def _convt(**args: int) -> OpSig:
    return OpSig("conv", {"x": 0, "w": 1, **args}, transposed=True)


def _attn(causal: int, layout: str = "BHSD", mask_type: bool = False, bwd: bool = False):
    pos = {"q": 1, "k": 2, "v": 3} if bwd else {"q": 0, "k": 1, "v": 2}
    pos["mask_type" if mask_type else "causal"] = causal
    return OpSig("attn_bwd" if bwd else "attn", pos, layout=layout)


def _varlen(q: int, cu_q: int, cu_k: int | None, max_q: int, max_k: int, causal: int,
            bwd: bool = False) -> OpSig:  # fmt: skip
    pos = {"q": q, "k": q + 1, "v": q + 2, "cu_q": cu_q, "max_q": max_q, "max_k": max_k}
    pos["causal"] = causal
    if cu_k is not None:
        pos["cu_k"] = cu_k
    return OpSig("varlen_bwd" if bwd else "varlen", pos, layout="THD")


# Old (torch ≤ 1.10) split backward ops: (self|self_size, grad_output, weight|weight_size …)
_OLD_BWD = {"x": 0, "gy": 1, "w": 2}
_OLD_BWD_INPUT = {"gy": 1, "w": 2}
_OLD_BWD_WEIGHT = {"gy": 1, "x": 2}

SIGNATURES: dict[str, OpSig] = {
    # GEMMs
    "aten::mm": _gemm(0, 1),
    "aten::_scaled_mm": _gemm(0, 1),
    "aten::addmm": _gemm(1, 2),
    "aten::addmm_": _gemm(1, 2),
    "aten::_addmm_activation": _gemm(1, 2),
    "aten::bmm": _gemm(0, 1),
    "aten::baddbmm": _gemm(1, 2),
    "aten::baddbmm_": _gemm(1, 2),
    "aten::addbmm": _gemm(1, 2),
    "aten::_grouped_mm": _gemm(0, 1),
    "aten::_scaled_grouped_mm": _gemm(0, 1),
    # convolution front ends and generic paths (input, weight, bias, stride, padding, …)
    "aten::convolution": _conv(stride=3, padding=4, dilation=5, transposed=6),
    "aten::_convolution": _conv(stride=3, padding=4, dilation=5, transposed=6, tf32=12),
    "aten::convolution_overrideable": _conv(stride=3, padding=4, dilation=5, transposed=6),
    "aten::_convolution_mode": _conv(stride=3, padding=4, dilation=5),
    "aten::conv1d": _conv(stride=3, padding=4, dilation=5),
    "aten::conv2d": _conv(stride=3, padding=4, dilation=5),
    "aten::conv3d": _conv(stride=3, padding=4, dilation=5),
    "aten::conv_transpose1d": _convt(),
    "aten::conv_transpose2d": _convt(),
    "aten::conv_transpose3d": _convt(),
    # backends: cuDNN (self, weight, padding, stride, dilation, groups, …, allow_tf32)
    "aten::cudnn_convolution": _conv(padding=2, stride=3, dilation=4, tf32=8),
    "aten::cudnn_convolution_transpose": _convt(tf32=9),
    "aten::cudnn_convolution_relu": _conv(stride=3, padding=4, dilation=5),
    "aten::cudnn_convolution_add_relu": _conv(stride=5, padding=6, dilation=7),
    # MIOpen and mkldnn: (self, weight, bias, padding, stride, dilation, groups, …)
    "aten::miopen_convolution": _conv(padding=3, stride=4, dilation=5),
    "aten::miopen_depthwise_convolution": _conv(padding=3, stride=4, dilation=5),
    "aten::miopen_convolution_transpose": _convt(),
    "aten::mkldnn_convolution": _conv(padding=3, stride=4, dilation=5),
    # slow paths: (self, weight, kernel_size, bias, stride, padding[, dilation])
    "aten::_slow_conv2d_forward": _conv(stride=4, padding=5),
    "aten::thnn_conv2d": _conv(stride=4, padding=5),
    "aten::slow_conv3d_forward": _conv(stride=4, padding=5),
    "aten::slow_conv_dilated2d": _conv(stride=4, padding=5, dilation=6),
    "aten::slow_conv_dilated3d": _conv(stride=4, padding=5, dilation=6),
    "aten::_conv_depthwise2d": _conv(stride=4, padding=5, dilation=6),
    "aten::_nnpack_spatial_convolution": _conv(padding=3, stride=4),
    "aten::slow_conv_transpose2d": _convt(),
    "aten::slow_conv_transpose3d": _convt(),
    # convolution backward: (grad_output, input, weight, …, output_mask)
    "aten::convolution_backward": OpSig(
        "conv_bwd", {"gy": 0, "x": 1, "w": 2, "transposed": 7, "mask": 10}
    ),
    "aten::convolution_backward_overrideable": OpSig(
        "conv_bwd", {"gy": 0, "x": 1, "w": 2, "transposed": 6, "mask": 9}
    ),
    "aten::_slow_conv2d_backward": OpSig(
        "conv_bwd", {"gy": 0, "x": 1, "w": 2, "mask": 6}, transposed=False
    ),
    # torch ≤ 1.10: (self, grad_output, weight, padding, stride, dilation, groups, …, mask)
    "aten::cudnn_convolution_backward": OpSig("conv_bwd", {**_OLD_BWD, "mask": 10}, False),
    "aten::miopen_convolution_backward": OpSig("conv_bwd", {**_OLD_BWD, "mask": 9}, False),
    "aten::mkldnn_convolution_backward": OpSig("conv_bwd", {**_OLD_BWD, "mask": 7}, False),
    "aten::cudnn_convolution_backward_input": OpSig("conv_bwd_input", _OLD_BWD_INPUT, False),
    "aten::miopen_convolution_backward_input": OpSig("conv_bwd_input", _OLD_BWD_INPUT, False),
    "aten::mkldnn_convolution_backward_input": OpSig("conv_bwd_input", _OLD_BWD_INPUT, False),
    "aten::cudnn_convolution_backward_weight": OpSig("conv_bwd_weight", _OLD_BWD_WEIGHT, False),
    "aten::miopen_convolution_backward_weight": OpSig("conv_bwd_weight", _OLD_BWD_WEIGHT, False),
    "aten::mkldnn_convolution_backward_weights": OpSig("conv_bwd_weight", _OLD_BWD_WEIGHT, False),
    # attention forward
    "aten::scaled_dot_product_attention": _attn(5),
    "aten::_scaled_dot_product_attention_math": _attn(5),
    "aten::_scaled_dot_product_flash_attention": _attn(4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _attn(4),
    "aten::_scaled_dot_product_efficient_attention": _attn(6),
    "aten::_scaled_dot_product_cudnn_attention": _attn(6),
    "aten::_scaled_dot_product_fused_attention_overrideable": _attn(5),
    "aten::_flash_attention_forward": OpSig(
        "attn", {**_varlen(0, 3, 4, 5, 6, 8).args}, layout="BSHD"
    ),
    "aten::_efficient_attention_forward": _attn(9, "BSHD", mask_type=True),
    # attention backward: (grad_out, query, key, value, …)
    "aten::_scaled_dot_product_flash_attention_backward": _attn(11, bwd=True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _attn(7, bwd=True),
    "aten::_scaled_dot_product_efficient_attention_backward": _attn(11, bwd=True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _attn(14, bwd=True),
    "aten::_flash_attention_backward": OpSig(
        "attn_bwd", {**_varlen(1, 6, 7, 8, 9, 11).args}, layout="BSHD"
    ),
    "aten::_efficient_attention_backward": _attn(14, "BSHD", mask_type=True, bwd=True),
    # flash-attn 2 (Dao-AILab/flash-attention flash_attn_interface.py custom ops)
    "flash_attn::_flash_attn_forward": _attn(5, "BSHD"),
    "flash_attn::_flash_attn_backward": _attn(11, "BSHD", bwd=True),
    "flash_attn::_flash_attn_varlen_forward": _varlen(0, 3, 4, 5, 6, 9),
    "flash_attn::_flash_attn_varlen_backward": _varlen(1, 9, 10, 11, 12, 15, bwd=True),
    # aiter (ROCm/aiter aiter/ops/mha.py): (q, k, v, dropout_p, softmax_scale, is_causal …)
    "aiter::mha_fwd": _attn(5, "BSHD"),
    "aiter::mha_bwd": _attn(8, "BSHD", bwd=True),
    "aiter::mha_varlen_fwd": _varlen(0, 3, 4, 5, 6, 12),
    "aiter::mha_varlen_bwd": _varlen(1, 6, 7, 8, 9, 13, bwd=True),
    "aiter::mha_batch_prefill": _varlen(0, 3, None, 6, 7, 12),
    # paged decode: (out, exp_sums, max_logits, tmp_out, query, key_cache, value_cache,
    # num_kv_heads, scale, block_tables, context_lens, …, block_size, max_context_len …)
    "aiter::paged_attention_rocm": OpSig("paged", {"q": 4, "max_len": 12}),
    "_rocm_C::paged_attention": OpSig("paged", {"q": 4, "max_len": 13}),
    "_C::paged_attention_v1": OpSig("paged", {"q": 1, "max_len": 9}),
    "_C::paged_attention_v2": OpSig("paged", {"q": 4, "max_len": 12}),
    # Transformer Engine GEMM (TorchScript op; cuBLAS column-major)
    "tex_ts::te_gemm_ts": OpSig("te_gemm", {"a": 0, "transa": 4, "b": 5, "transb": 9, "d": 10}),
}
COUNTED_OPS = frozenset(SIGNATURES)


@dataclass
class Args:
    """One op's traced arguments: shapes and concrete values by position."""

    dims: list
    concrete: list | None

    def shape(self, i: int | None) -> list[int] | None:
        if i is None or i >= len(self.dims):
            return None
        x = self.dims[i]
        ok = isinstance(x, list) and x and all(isinstance(d, int) and d >= 0 for d in x)
        return x if ok else None

    def value(self, i: int | None) -> str | None:
        """The concrete value at position i as text, None when not recorded."""
        if i is None or self.concrete is None or i >= len(self.concrete):
            return None
        v = self.concrete[i]
        return v if isinstance(v, str) and v != "" else None

    def ints(self, i: int | None, n: int) -> list[int] | None:
        text = self.value(i)
        if text is None:
            return None
        nums = [int(v) for v in re.findall(r"-?\d+", text)]
        if len(nums) == 1:
            return nums * n
        return nums[:n] if len(nums) >= n else None

    def flag(self, i: int | None) -> bool | None:
        text = self.value(i)
        if text is None:
            return None
        t = text.strip().lower()
        return True if t == "true" else False if t == "false" else None


class ConvGeometry:
    """Convolution shapes the trace's backward ops reveal: grad_output is the output.

    `output(x, w)` → the output shape of the convolution with input x and weight w;
    `weight(x, gy)` → the weight shape of the convolution with input x and output gy.
    A key seen with two different answers is ambiguous and answers None.
    """

    def __init__(self) -> None:
        self._out: dict[tuple, tuple | None] = {}
        self._w: dict[tuple, tuple | None] = {}

    @staticmethod
    def _put(d: dict, key: tuple, val: tuple) -> None:
        if key in d and d[key] != val:
            d[key] = None
        else:
            d.setdefault(key, val)

    def learn(self, name: str, dims: Any) -> None:
        sig = SIGNATURES.get(name)
        if sig is None or sig.family != "conv_bwd" or not isinstance(dims, list):
            return
        a = Args(dims, None)
        x, w, gy = a.shape(sig.args["x"]), a.shape(sig.args["w"]), a.shape(sig.args["gy"])
        if x and w and gy and len(x) == len(w) == len(gy):
            self._put(self._out, (tuple(x), tuple(w)), tuple(gy))
            self._put(self._w, (tuple(x), tuple(gy)), tuple(w))

    def output(self, x: list[int], w: list[int]) -> list[int] | None:
        v = self._out.get((tuple(x), tuple(w)))
        return list(v) if v else None

    def weight(self, x: list[int], gy: list[int]) -> list[int] | None:
        v = self._w.get((tuple(x), tuple(gy)))
        return list(v) if v else None


@dataclass
class OpCount:
    flops: float | None
    reason: str | None = None  # why flops is None
    tf32: bool = False  # the op's own args say TF32 may be used (cuDNN allow_tf32)


def _none(reason: str) -> OpCount:
    return OpCount(None, reason)


def _gemm_flops(sig: OpSig, a: Args) -> OpCount:
    x, y = a.shape(sig.args["a"]), a.shape(sig.args["b"])
    if not x or not y:
        return _none("operand shapes not recorded")
    if len(x) == 2 and len(y) == 2 and x[1] == y[0]:
        return OpCount(2.0 * x[0] * x[1] * y[1])
    if len(x) == 3 and len(y) == 3 and x[0] == y[0] and x[2] == y[1]:
        return OpCount(2.0 * x[0] * x[1] * x[2] * y[2])
    if len(x) == 2 and len(y) == 3 and x[1] == y[1]:  # grouped: tokens × one expert each
        return OpCount(2.0 * x[0] * x[1] * y[2])
    return _none(f"operand shapes {x}·{y} are not a matrix product this formula knows")


def _conv_spatial(sig: OpSig, a: Args, x, w, geometry: ConvGeometry | None) -> list | None:
    """Output spatial size of a forward convolution, or None when the trace lacks it."""
    nsp = len(x) - 2
    stride = a.ints(sig.args.get("stride"), nsp)
    pad_text = a.value(sig.args.get("padding"))
    dilation = a.ints(sig.args["dilation"], nsp) if "dilation" in sig.args else [1] * nsp
    if stride and pad_text and dilation and all(s > 0 for s in stride):
        word = pad_text.strip().strip("'\"").lower()
        if word == "same":
            return [-(-x[2 + i] // stride[i]) for i in range(nsp)]
        padding = [0] * nsp if word == "valid" else a.ints(sig.args.get("padding"), nsp)
        if padding:
            return [
                (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
                for i in range(nsp)
            ]
    out = geometry.output(x, w) if geometry else None
    return out[2:] if out else None


def _conv_core(x, w, spatial) -> float:
    """2·N·w₀·w₁·∏k·∏spatial (torch.utils.flop_counter.conv_flop_count)."""
    return 2.0 * x[0] * w[0] * w[1] * prod(w[2:]) * prod(spatial)


def _conv_flops(sig: OpSig, a: Args, geometry: ConvGeometry | None) -> OpCount:
    x, w = a.shape(sig.args["x"]), a.shape(sig.args["w"])
    if not x or not w or len(x) < 3 or len(w) != len(x):
        return _none("input or weight shape not recorded")
    tf32 = bool(a.flag(sig.args.get("tf32")))
    transposed = sig.transposed
    if transposed is None:
        transposed = a.flag(sig.args.get("transposed")) if "transposed" in sig.args else False
    if transposed is None:
        return _none("'transposed' not recorded (no Concrete Inputs)")
    if transposed:
        return OpCount(_conv_core(x, w, x[2:]), tf32=tf32)
    spatial = _conv_spatial(sig, a, x, w, geometry)
    if spatial is None:
        return _none("stride/padding not recorded and no backward op gives the output size")
    if any(s <= 0 for s in spatial):
        return _none(f"output size {spatial} from the recorded stride/padding is empty")
    return OpCount(_conv_core(x, w, spatial), tf32=tf32)


def _conv_bwd_flops(
    sig: OpSig, a: Args, geometry: ConvGeometry | None, parent: tuple[str, Any] | None
) -> OpCount:
    gy, x, w = (a.shape(sig.args.get(k)) for k in ("gy", "x", "w"))
    if sig.family == "conv_bwd_weight" and gy and x and w is None:
        w = _parent_weight(parent, x, gy) or (geometry.weight(x, gy) if geometry else None)
    if sig.family == "conv_bwd_input":
        if not gy or not w or len(gy) != len(w) or len(w) < 3:
            return _none("grad_output or weight shape not recorded")
        return OpCount(_conv_core(gy, w, gy[2:]))  # grad_input: the forward's work again
    if not gy or not x or not w or not (len(gy) == len(x) == len(w) >= 3):
        return _none("grad_output, input or weight shape not recorded")
    transposed = sig.transposed
    if transposed is None:
        transposed = a.flag(sig.args.get("transposed"))
        if transposed is None:
            return _none("'transposed' not recorded (no Concrete Inputs)")
    one = _conv_core(x, w, x[2:] if transposed else gy[2:])
    if sig.family == "conv_bwd_weight":
        return OpCount(one)
    mask = a.value(sig.args["mask"])
    if mask is None:
        return _none("output_mask not recorded: which gradients ran is unknown")
    grads = [m.lower() == "true" for m in re.findall(r"True|False|true|false", mask)]
    return OpCount(one * sum(grads[:2]))


def _parent_weight(parent: tuple[str, Any] | None, x, gy) -> list[int] | None:
    """The weight shape from the enclosing backward op of the same convolution."""
    psig = SIGNATURES.get(parent[0]) if parent else None
    if psig is None or psig.family != "conv_bwd" or not isinstance(parent[1], list):
        return None
    pa = Args(parent[1], None)
    if pa.shape(psig.args["x"]) == x and pa.shape(psig.args["gy"]) == gy:
        return pa.shape(psig.args["w"])
    return None


def _attn_flops(sig: OpSig, a: Args) -> OpCount:
    q, k, v = (a.shape(sig.args[r]) for r in ("q", "k", "v"))
    if not q or not k or len(q) != 4 or len(k) != 4:
        return _none("q/k are not 4-D (varlen attention: the lengths are tensors)")
    if sig.layout == "BSHD":
        (b, s, h, d), sk = q, k[1]
    else:
        (b, h, s, d), sk = q, k[2]
    dv = v[3] if v and len(v) == 4 else d
    if "mask_type" in sig.args:
        mt = a.ints(sig.args["mask_type"], 1)
        causal = None if mt is None else mt[0] >= 1
    else:
        causal = a.flag(sig.args["causal"])
    if causal is None:
        return _none("is_causal not recorded (no Concrete Inputs)")
    per = (3 * d + 2 * dv) if sig.family == "attn_bwd" else (d + dv)
    flops = 2.0 * b * h * s * sk * per
    return OpCount(flops / 2 if causal else flops)


def _causal_pairs(s: int, sk: int, causal: bool) -> float:
    """Query-key pairs one sequence attends: s·sk, causal s·(sk − s/2) (bottom-right mask;
    s·sk/2 when sk = s, the convention of the 4-D ops)."""
    if not causal:
        return float(s) * sk
    return float(s) * (sk - s / 2) if sk > s else float(s) * sk / 2


def _varlen_flops(sig: OpSig, a: Args) -> OpCount:
    q, k, v = (a.shape(sig.args[r]) for r in ("q", "k", "v"))
    cu_q = a.shape(sig.args["cu_q"])
    if not q or len(q) != 3 or not cu_q or len(cu_q) != 1:
        return _none("q is not [total_q, H, D] with a cu_seqlens_q vector")
    b = cu_q[0] - 1
    max_q, max_k = (a.ints(sig.args[x], 1) for x in ("max_q", "max_k"))
    causal = a.flag(sig.args["causal"])
    if max_q is None or max_k is None or causal is None:
        return _none("max_seqlen or is_causal not recorded (no Concrete Inputs)")
    (total_q, h, d), dv = q, (v[-1] if v else q[2])
    paged = "cu_k" not in sig.args  # k/v are the page pool, not the sequences
    total_k = None if paged or not k or len(k) != 3 else k[0]
    if b == 1:
        s, sk = total_q, (max_k[0] if paged else total_k)
    elif total_q == b * max_q[0] and total_k == b * max_k[0]:
        s, sk = max_q[0], max_k[0]
    else:
        return _none(
            f"{b} sequences of unequal length: their lengths are in the cu_seqlens tensors, "
            "which the trace does not record"
        )
    if sk is None:
        return _none("key shape not recorded")
    per = (3 * d + 2 * dv) if sig.family.endswith("_bwd") else (d + dv)
    return OpCount(2.0 * b * h * per * _causal_pairs(s, sk, causal))


def _paged_flops(sig: OpSig, a: Args) -> OpCount:
    q = a.shape(sig.args["q"])
    max_len = a.ints(sig.args["max_len"], 1)
    if not q or len(q) != 3:
        return _none("query is not [num_seqs, H, D]")
    if max_len is None:
        return _none("max_context_len not recorded (no Concrete Inputs)")
    if q[0] != 1:
        return _none(
            f"{q[0]} sequences: their context lengths are a tensor the trace does not record"
        )
    return OpCount(2.0 * q[1] * 2 * q[2] * max_len[0])


def _te_gemm_flops(sig: OpSig, a: Args) -> OpCount:
    x, y, d = (a.shape(sig.args[r]) for r in ("a", "b", "d"))
    if not x or not y or not d or len(x) != 2 or len(y) != 2 or len(d) < 2:
        return _none("A, B or D shape not recorded")
    m, n = prod(d[:-1]), d[-1]
    ta, tb = (a.ints(sig.args[r], 1) for r in ("transa", "transb"))
    ka = {x[1]} if ta and ta[0] else {x[0]} if ta else {x[1] if x[0] == n else None,
                                                      x[0] if x[1] == n else None}  # fmt: skip
    kb = {y[0]} if tb and tb[0] else {y[1]} if tb else {y[1] if y[0] == m else None,
                                                      y[0] if y[1] == m else None}  # fmt: skip
    ks = (ka & kb) - {None}
    if len(ks) != 1:
        return _none(f"A {x}, B {y}, D {d}: no single inner dimension fits both operands")
    return OpCount(2.0 * m * n * ks.pop())


def loads(text: str | None) -> Any:
    """A traced JSON-text arg (`Input Dims` …) decoded, or None when absent or not JSON."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def count(
    name: str,
    dims: Any,
    concrete: Any = None,
    geometry: ConvGeometry | None = None,
    parent: tuple[str, Any] | None = None,
) -> OpCount:
    """FLOPs of one traced op (decoded `Input Dims` and `Concrete Inputs`), with the reason
    when they cannot be known. `parent` is the enclosing op of the table (name, dims)."""
    sig = SIGNATURES.get(name)
    if sig is None:
        return _none("not a GEMM, convolution or attention op")
    if not isinstance(dims, list) or not dims:
        return _none("no Input Dims (profile with record_shapes=True)")
    a = Args(dims, concrete if isinstance(concrete, list) else None)
    if sig.family == "gemm":
        return _gemm_flops(sig, a)
    if sig.family == "conv":
        return _conv_flops(sig, a, geometry)
    if sig.family.startswith("conv_bwd"):
        return _conv_bwd_flops(sig, a, geometry, parent)
    if sig.family.startswith("varlen"):
        return _varlen_flops(sig, a)
    if sig.family == "paged":
        return _paged_flops(sig, a)
    if sig.family == "te_gemm":
        return _te_gemm_flops(sig, a)
    if len(a.shape(sig.args["q"]) or []) == 3 and "cu_q" in sig.args:
        return _varlen_flops(sig, a)
    return _attn_flops(sig, a)


def op_flops(name: str, input_dims: str | None, concrete_inputs: str | None = None) -> float | None:
    """FLOPs of one traced op from its JSON-text args, or None when they do not say."""
    return count(name, loads(input_dims), loads(concrete_inputs)).flops


_NOT_TENSOR = {"Scalar", "ScalarList", "TensorList", "None", "GenericList", "Int", "Bool"}
_NOT_TENSOR |= {"Double", "Device", "Layout"}


def op_dtype(input_types: str | None) -> str | None:
    """The first tensor dtype among an op's inputs."""
    types = loads(input_types)
    for t in types if isinstance(types, list) else []:
        if isinstance(t, str) and t and t not in _NOT_TENSOR:
            return t
    return None


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
